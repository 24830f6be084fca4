"""eps guards (range analysis, guards.eps, --eps) and half-precision inputs computed in float32."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from losscc import ir, verify
from losscc.backends import get
from losscc.emit import compile_spec, with_eps
from losscc.parse import build_program
from losscc.pipeline import explain, prepare
from losscc.ranges import is_positive
from losscc.spec import load_spec, spec_from_text
from tests.backend_util import BACKENDS

ROOT = Path(__file__).resolve().parent.parent


def _spec(name):
    return load_spec(ROOT / "specs" / f"{name}.yaml", f"specs/{name}.yaml")


def _eps_fired(spec):
    return [f for f in prepare(spec).fired if f.rule == "eps-guard"]


# ----------------------------------------------------------------- range analysis


def test_eps_guard_only_where_the_argument_can_reach_zero():
    # dice's denominator sum(p) + sum(y) is >= 0 but can be 0: guarded
    fired = _eps_fired(_spec("dice"))
    assert len(fired) == 1 and "max(1e-07" in str(prepare(_spec("dice")).loss).replace("Max(1.0e-7", "max(1e-07")
    # gaussian_nll's variance is declared (0, inf), cosine_embedding adds 1e-12: exact, even under --eps
    for name in ("gaussian_nll", "cosine_embedding", "focal", "cross_entropy"):
        assert _eps_fired(with_eps(_spec(name), 1e-6)) == [], name
    # kl_div's log(target) sits in the branch target > 0, so the branch guard already makes it positive
    assert _eps_fired(with_eps(_spec("kl_div"), 1e-6)) == []
    # bce's log(p), p in [0, 1], can reach 0: guarded when asked for
    assert len(_eps_fired(with_eps(_spec("bce"), 1e-6))) == 1
    # --eps 0 removes a spec's own guard
    assert _eps_fired(with_eps(_spec("dice"), 0.0)) == []


def test_range_analysis_uses_branch_conditions():
    prog = build_program(_spec("poisson_nll"))
    t = prog.symbols["target"]
    assert is_positive(ir.Where(sp.Gt(t, 1), 2 * sp.pi * t, 1), prog)
    assert is_positive(ir.Where(sp.Gt(t, 0), t, 1), prog)
    assert not is_positive(ir.Where(sp.Gt(t, -1), t, 1), prog)
    assert not is_positive(ir.Where(sp.Gt(t, 1), -t, 1), prog)
    assert not is_positive(t, prog)


def test_explain_lists_unguarded_zeros_and_the_guard():
    text = explain(_spec("bce"))
    assert "can reach 0 under log or division" in text and "stop_gradient(input)" in text
    text = explain(_spec("dice"))
    assert "eps-guard:" in text and "can reach 0" not in text


def test_eps_field_is_validated():
    base = "name: x\nsummary: s\ninputs:\n  p: {dtype: float, shape: [N], domain: '[0, 1]'}\nformula: loss = log(p)\n"
    from losscc.errors import SpecError

    for bad, msg in (("eps: 0", "must be positive"), ("eps: 0.5", "is not small"), ("eps: yes", "is a YAML 1.1 boolean"),
                     ("upcast: 3", "expected true or false")):
        with pytest.raises(SpecError) as exc:
            spec_from_text(base + f"guards: {{{bad}}}\n", "x.yaml")
        d = exc.value.diagnostics[0]
        assert msg in d.message and d.loc.line == 6, d.format()


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "losscc", *args], cwd=cwd, capture_output=True, text=True)


def test_global_eps_is_recorded_and_checked(tmp_path):
    out = tmp_path / "gen"
    r = _cli("generate", "-o", str(out), "--eps", "1e-9", "specs/bce.yaml", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    text = (out / "paddle" / "bce.py").read_text()
    assert "# losscc-option: --eps 1e-09" in text and "1e-09" in text.split('"""', 2)[2]
    assert _cli("check", "-o", str(out), "--eps", "1e-9", "specs/bce.yaml", cwd=ROOT).returncode == 0
    assert _cli("check", "-o", str(out), "specs/bce.yaml", cwd=ROOT).returncode == 1
    r = _cli("generate", "-o", str(out), "--eps", "2", "specs/bce.yaml", cwd=ROOT)
    assert r.returncode == 2 and "--eps" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_dice_empty_sample_is_finite(backend, tmp_path):
    spec = _spec("dice")
    path = tmp_path / f"dice_{backend}.py"
    path.write_text(compile_spec(spec, get(backend)))
    mod = verify.load_module(path, f"guards_dice_{backend}")
    probs = np.array([[0.0, 0.0, 0.0], [0.5, 0.25, 0.0]])
    target = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    case = verify.CaseData("empty", "test", {"probs": probs, "target": target}, {})
    for dtype in ("float32", "float64"):
        vals, grads = verify.runner(backend).run(mod, spec, case, dtype, "eager", ["none"])
        # empty: 1 - 0 / eps = 1; the other: 1 - 2 * 0.5 / 1.75
        np.testing.assert_allclose(vals["none"], [1.0, 1 - 1.0 / 1.75], rtol=1e-6)
        g = grads["probs"]
        assert np.all(np.isfinite(g)), g
        # d/dp of 1 - 2 o / t at the empty row: -2 y / eps + 2 o / eps**2 = 0 (y = 0, o = 0)
        np.testing.assert_allclose(g[0], 0.0, atol=1e-6)


# ----------------------------------------------------------------- half precision

HALF = ("float16", "bfloat16")


def _ms_run(mod, fn_name, arrays, dtype, mode):
    import mindspore as ms
    from mindspore import ops

    tensors = [ops.cast(ms.Tensor(a), getattr(ms, dtype)) if a.dtype.kind == "f" else ms.Tensor(a.astype(np.int32))
               for a in arrays]
    cls = getattr(mod, next(n for n in mod.__all__ if n[0].isupper()))()  # the class
    fn = ms.value_and_grad(cls, grad_position=0)
    if mode == "graph":
        fn = ms.jit(fn)
    v, g = fn(*tensors)
    return v.dtype == getattr(ms, dtype), float(ops.cast(v, ms.float32).asnumpy()), \
        g.dtype == getattr(ms, dtype), ops.cast(g, ms.float32).asnumpy()


def _pd_run(mod, fn_name, arrays, dtype, mode):
    import paddle

    tensors = [paddle.to_tensor(a.astype(np.float32)).astype(dtype) if a.dtype.kind == "f" else paddle.to_tensor(a)
               for a in arrays]
    tensors[0].stop_gradient = False
    layer = getattr(mod, next(n for n in mod.__all__ if n[0].isupper()))()  # the class
    if mode == "graph":
        layer = paddle.jit.to_static(layer, full_graph=True)
    v = layer(*tensors)
    v.backward()
    g = tensors[0].grad
    return v.dtype == getattr(paddle, dtype), float(v.astype("float32")), \
        g.dtype == getattr(paddle, dtype), g.astype("float32").numpy()


def _jax_run(mod, fn_name, arrays, dtype, mode):
    import jax
    import jax.numpy as jnp

    tensors = [jnp.asarray(a.astype(np.float32)).astype(dtype) if a.dtype.kind == "f" else jnp.asarray(a)
               for a in arrays]
    fn = jax.value_and_grad(getattr(mod, next(n for n in mod.__all__ if n[0].isupper()))())  # the class
    if mode == "graph":
        fn = jax.jit(fn)
    v, g = fn(*tensors)
    return v.dtype == jnp.dtype(dtype), float(v.astype(jnp.float32)), \
        g.dtype == jnp.dtype(dtype), np.asarray(g.astype(jnp.float32))


HALF_RUNS = {"mindspore": _ms_run, "paddle": _pd_run, "jax": _jax_run}  # (value ok, value, gradient ok, gradient)
INPUTS = {
    "focal": lambda rng: [rng.standard_normal((6, 5)) * 3, rng.integers(0, 5, 6)],
    "bce_with_logits": lambda rng: [rng.standard_normal((6, 5)) * 3, rng.uniform(0, 1, (6, 5))],
    "huber": lambda rng: [rng.standard_normal((6, 5)) * 2, rng.standard_normal((6, 5))],
}


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("backend", [b for b in BACKENDS if b.values[0] in HALF_RUNS])
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_half_inputs_are_computed_in_float32(name, backend, mode, dtype):
    mod = verify.load_module(ROOT / "generated" / backend / f"{name}.py", f"guards_half_{backend}_{name}")
    rng = np.random.default_rng(3)
    arrays = INPUTS[name](rng)
    # the float32 answer for the half-rounded inputs
    half = [a.astype(np.float16).astype(np.float32) if a.dtype.kind == "f" and dtype == "float16" else a
            for a in arrays]
    if dtype == "bfloat16":  # round to bfloat16: keep the top 16 bits, to nearest even
        def to_bf16(a):
            b = a.astype(np.float32).view(np.uint32)
            b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
            return b.view(np.float32)
        half = [to_bf16(a) if a.dtype.kind == "f" else a for a in arrays]
    run = HALF_RUNS[backend]
    v_ok, v, g_ok, g = run(mod, name, half, dtype, mode)
    ref_ok, ref_v, _, ref_g = run(mod, name, [a.astype(np.float32) if a.dtype.kind == "f" else a for a in half],
                                  "float32", mode)
    assert v_ok and g_ok, "the result and the gradient keep the inputs' dtype"
    rtol = 1e-3 if dtype == "float16" else 8e-3
    # only the final rounding to the half dtype differs from the float32 computation
    assert v == pytest.approx(ref_v, rel=rtol)
    np.testing.assert_allclose(g, ref_g, rtol=rtol * 4, atol=rtol * np.abs(ref_g).max())


def test_upcast_can_be_turned_off():
    text = "name: x\nsummary: s\ninputs:\n  a: {dtype: float, shape: [N]}\nformula: loss = a * a\n"
    on = compile_spec(spec_from_text(text, "x.yaml"), get("paddle"))
    off = compile_spec(spec_from_text(text + "guards: {upcast: false}\n", "x.yaml"), get("paddle"))
    assert "half = in_dtype in (paddle.float16, paddle.bfloat16)" in on
    assert "in_dtype" not in off and "half" not in off


def test_no_gradient_guard_on_integer_valued_exponents():
    # x ** C (an axis size) and x ** k (a float parameter) differ: only the second is
    # undefined for x < 0 and gets the derivative-0-at-0 guard; x ** C is a polynomial
    text = """
name: t
summary: s
inputs:
  x: {dtype: float, shape: [N, C]}
params:
  k: {default: 3.5}
formula: |
  loss = x ** C + abs(x) ** k
"""
    loss = prepare(spec_from_text(text, "t.yaml")).loss
    guarded = [a for a in sp.preorder_traversal(loss) if isinstance(a, ir.Where)]
    assert guarded and all("Size" not in str(w) for w in guarded)
    assert any(isinstance(t, sp.Pow) and isinstance(t.args[1], ir.Size) and t.args[0].is_Symbol
               for t in sp.preorder_traversal(loss))
