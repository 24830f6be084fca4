"""Attacks a pull request can make, found by a ninth red-team review (2026-12-06), and the
two items the eighth left open: the custom backward's wrapper used fixed names (an input
`dout` replaced the upstream gradient in the PyLayer; `bprop(self, ..., out, dout)` with an
input `out` was a duplicate argument that `ast.parse` accepts and the import refuses)."""

from __future__ import annotations

import numpy as np
import pytest

from losscc import emit, verify
from losscc.backends import get
from losscc.emit import compile_spec
from losscc.spec import spec_from_text
from tests.codegen_util import case
from tests.test_fuzz_found import _check

# every name the wrappers once used as a fixed local, context attribute or cell attribute
CLASH = """name: clash
summary: s.
inputs:
  dout: {dtype: float, shape: [N]}
  ctx: {dtype: float, shape: [N]}
  out: {dtype: float, shape: [N]}
  d_dout: {dtype: float, shape: [N]}
  need_out: {dtype: float, shape: [N], optional: true}
params:
  grads: {default: 0.5}
  need_ctx: {default: 0.25}
  bprop: {default: 0.75}
  saved_tensor: {default: 1.5}
  save_for_backward: {default: 2.0}
formula: |
  loss = grads * (dout - ctx)**2 + need_ctx * out * d_dout + bprop * saved_tensor * dout * need_out + save_for_backward * ctx
backward: custom
"""


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_the_custom_backward_takes_any_input_and_parameter_names(backend, tmp_path):
    pytest.importorskip(backend)
    spec = spec_from_text(CLASH, "clash.yaml")
    source = compile_spec(spec, get(backend))
    assert "Backward" in source  # the custom backward is emitted, not the autograd fallback
    _check(spec, backend, [case(spec, {"N": (5,)}, seed=4), case(spec, {"N": (3,)}, seed=5, none=("need_out",))],
           tmp_path)


def test_a_module_the_python_compiler_refuses_is_never_written(monkeypatch):
    """A duplicate argument parses (ast) and fails only at compile: compile_spec compiles."""
    spec = spec_from_text(CLASH.replace("backward: custom\n", ""), "clash.yaml")
    monkeypatch.setattr(emit, "render_module", lambda *a, **k: "def f(a, a):\n    return a\n")
    with pytest.raises(SyntaxError, match="duplicate argument"):
        compile_spec(spec, get("paddle"))


def _attr_spec(name: str, default: str) -> str:
    return (f"name: attr_{name}\nsummary: s.\ninputs:\n  x: {{dtype: float, shape: [N]}}\n"
            f"  y: {{dtype: float, shape: [N]}}\nparams:\n  {name}: {{default: {default}}}\nformula: |\n"
            f"  loss = where({name}, 2.0, 1.0) * (x - y)**2\n" if default in ("true", "false") else
            f"name: attr_{name}\nsummary: s.\ninputs:\n  x: {{dtype: float, shape: [N]}}\n"
            f"  y: {{dtype: float, shape: [N]}}\nparams:\n  {name}: {{default: {default}}}\nformula: |\n"
            f"  loss = {name} * (x - y)**2\n")


def _load(spec_text: str, backend: str, tmp_path):
    spec = spec_from_text(spec_text, f"{spec_text.split()[1]}.yaml")
    path = tmp_path / f"{spec.name}_{backend}.py"
    path.write_text(compile_spec(spec, get(backend)), encoding="utf-8")
    return verify.load_module(path, f"losscc_rt9_{spec.name}_{backend}"), spec


@pytest.mark.parametrize("name,default", [("is_top_cell", "false"), ("phase", "0.5"), ("param_prefix", "0.5"),
                                          ("requires_grad", "0.5")])
def test_a_hyperparameter_named_like_a_cell_attribute_keeps_both(name, default, tmp_path):
    """MindSpore's value_and_grad set the class's `is_top_cell` (a flag of the loss: the value
    doubled); `phase` must be a string, so the class could not be built."""
    ms = pytest.importorskip("mindspore")
    mod, spec = _load(_attr_spec(name, default), "mindspore", tmp_path)
    x = ms.Tensor(np.array([1.0, 2.0, 3.0], np.float32))
    y = ms.Tensor(np.zeros(3, np.float32))
    loss = getattr(mod, spec.class_name)()
    want = float(getattr(mod, spec.name)(x, y).asnumpy())
    value, grad = ms.value_and_grad(loss)(x, y)
    assert float(value.asnumpy()) == pytest.approx(want) and float(loss(x, y).asnumpy()) == pytest.approx(want)
    scale = 1.0 if default == "false" else 0.5
    assert np.allclose(grad.asnumpy(), scale * 2 * np.array([1.0, 2.0, 3.0]) / 3)


@pytest.mark.parametrize("name", ["buffers", "full", "named_buffers"])
def test_a_hyperparameter_named_like_a_layer_method_keeps_both(name, tmp_path):
    """A float `buffers` replaced nn.Layer.buffers, which to_static calls."""
    paddle = pytest.importorskip("paddle")
    mod, spec = _load(_attr_spec(name, "0.5"), "paddle", tmp_path)
    loss = getattr(mod, spec.class_name)()
    assert callable(getattr(loss, name))
    static = paddle.jit.to_static(loss, full_graph=True)
    x = paddle.to_tensor([1.0, 2.0, 3.0], stop_gradient=False)
    out = static(x, paddle.zeros([3]))
    out.backward()
    assert float(out) == pytest.approx(0.5 * 14 / 3) and np.allclose(x.grad.numpy(), [1 / 3, 2 / 3, 1.0])


@pytest.mark.parametrize("shape,ok", [("[C]", False), ("[N]", True), ("[N, C]", True), ("[K]", False)])
def test_broadcast_left_needs_a_leading_prefix(shape, ok):
    """`broadcast: left` pads trailing axes against a required input: a [C] weight of an [N, C]
    input was padded to [C, 1] and scaled rows (silently, where N == C)."""
    from losscc.errors import SpecError
    from losscc.parse import build_program

    text = ("name: bl\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N, C]}\n"
            f"  w: {{dtype: float, shape: {shape}, broadcast: left}}\nformula: |\n  loss = w * x**2\n")
    if ok:
        build_program(spec_from_text(text, "bl.yaml"))
        return
    with pytest.raises(SpecError, match=r"E124") as exc:
        build_program(spec_from_text(text, "bl.yaml"))
    assert "broadcast 'left'" in str(exc.value) and "bl.yaml:5" in str(exc.value)


SCALAR = """name: scal_{k}
summary: s.
inputs:
  x: {{dtype: float, shape: {shape}}}
  v: {{dtype: float, shape: {shape}, optional: true, default: 2, scalar: true}}
formula: |
  loss = (x - v)**2 * x
"""


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
@pytest.mark.parametrize("k,shape,shapes", [
    (0, '[N, C, "*D"]', [(2, 3), (2, 3, 4), (2, 3, 4, 5)]),
    (1, '["*B", C]', [(3,), (2, 3), (2, 4, 3)]),
    (2, '[N, "*D", C]', [(2, 3), (2, 4, 3), (2, 4, 5, 3)]),
])
def test_a_number_for_a_scalar_input_fills_any_rank(backend, k, shape, shapes, tmp_path):
    """The fill shape counted a group *D as one axis: IndexError or a broadcast error at
    every rank but one, and verify never passed a number."""
    fw = pytest.importorskip(backend)
    mod, spec = _load(SCALAR.format(k=k, shape=shape), backend, tmp_path)
    f = getattr(mod, spec.name)
    rng = np.random.default_rng(k)
    for s in shapes:
        x = rng.uniform(0.5, 2.0, size=s)
        t = fw.to_tensor(x) if backend == "paddle" else fw.Tensor(x)
        got = f(t, 0.5, reduction="none").numpy() if backend == "paddle" else f(t, 0.5, reduction="none").asnumpy()
        assert got.shape == s and np.allclose(got, (x - 0.5) ** 2 * x)


def test_a_scalar_input_needs_its_axes_on_a_required_input():
    from losscc.errors import SpecError

    text = ("name: sm\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\n"
            "  v: {dtype: float, shape: [N, M], optional: true, default: 2, scalar: true}\n"
            "formula: |\n  loss = x**2 * mean(v, axis=M)\n")
    with pytest.raises(SpecError, match=r"sm.yaml:5:.*E128"):
        spec_from_text(text, "sm.yaml")


ALIAS = """name: sqe
summary: s.
inputs:
  x: {dtype: float, shape: [N]}
  y: {dtype: float, shape: [N]}
formula: |
  loss = (x - y)**2
dropin:
  paddle: {aliases: {x: sqe}}
  mindspore: {aliases: {x: sqe}}
"""


@pytest.mark.parametrize("custom", [False, True])
@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_a_library_keyword_named_like_the_loss_does_not_hide_it(backend, custom, tmp_path):
    """forward(self, x=None, y=None, *, sqe=None) returned sqe(...): None is not callable."""
    fw = pytest.importorskip(backend)
    mod, spec = _load(ALIAS + ("backward: custom\n" if custom else ""), backend, tmp_path)
    x, y = np.array([1.0, 2.0]), np.array([0.0, 0.0])
    tensor = fw.to_tensor if backend == "paddle" else fw.Tensor
    loss = getattr(mod, spec.class_name)()
    for kwargs in ({"x": tensor(x)}, {"sqe": tensor(x)}):
        assert float(loss(y=tensor(y), **kwargs)) == pytest.approx(2.5)


def _spec_error(text: str) -> str:
    from losscc.errors import SpecError
    from losscc.parse import build_program

    with pytest.raises(SpecError) as exc:
        build_program(spec_from_text(text, "t.yaml"))
    return str(exc.value)


def test_a_label_with_a_closed_end_does_not_gather():
    """"[0, C]" allows C, one past the axis: generate passed, verify crashed (IndexError)."""
    msg = _spec_error("name: t\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N, C]}\n"
                      "  y: {dtype: int, shape: [N], domain: \"[0, C]\"}\nformula: |\n  loss = -x[y]\n")
    assert "E222" in msg and "open at C" in msg


@pytest.mark.parametrize("domain", ["{0, 9223372036854775808}", "{0, 0.5}", "[0, 1e20)", "[-1e17, 3)"])
def test_an_int_domain_holds_exact_int64_values(domain):
    """A set member past int64 crashed verify's draws (OverflowError, exit 3)."""
    from losscc.errors import SpecError

    with pytest.raises(SpecError, match="E125"):
        spec_from_text("name: t\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\n"
                       f"  y: {{dtype: int, shape: [N], domain: \"{domain}\"}}\nformula: |\n"
                       "  loss = where(y == 0, x**2, x)\n", "t.yaml")


@pytest.mark.parametrize("op,shown", [("x // 2", "//"), ("x % 2", "%"), ("~x", "~")])
def test_a_refused_operator_is_named(op, shown):
    msg = _spec_error(f"name: t\nsummary: s.\ninputs:\n  x: {{dtype: float, shape: [N]}}\nformula: |\n  loss = {op}\n")
    assert f"operator '{shown}' is not allowed" in msg


def test_verify_refuses_to_pass_over_nothing(tmp_path):
    import subprocess
    import sys

    (tmp_path / "specs").mkdir()
    p = subprocess.run([sys.executable, "-m", "losscc", "verify"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2 and "E176" in p.stderr and "Traceback" not in p.stderr


def test_broadcast_left_skips_an_optional_input_for_its_reference():
    """An optional [N, C] input before the required one made a valid [N] weight E124 (round 11)."""
    from losscc.parse import build_program

    build_program(spec_from_text(
        "name: bl\nsummary: s.\ninputs:\n  w: {dtype: float, shape: [N, C], optional: true}\n"
        "  x: {dtype: float, shape: [N, C]}\n  v: {dtype: float, shape: [N], broadcast: left}\n"
        "formula: |\n  loss = v * x * w\n", "bl.yaml"))
