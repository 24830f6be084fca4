"""Found by a tenth red-team review (2026-12-06): a 0-D call through the custom backward of
an unbatched drop-in, unbounded work per reduction, a docs page larger than its own reader
accepts, and stacked exponentials in verify --extreme's boundary draws."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from losscc import verify
from losscc.backends import get
from losscc.emit import compile_spec
from losscc.spec import load_spec


@pytest.mark.parametrize("reduction", ["sum", "mean", "none", "batchmean"])
@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_a_0d_call_through_the_custom_backward(backend, reduction, tmp_path):
    """kl_div's custom backward read N = input.shape[0] of a 0-D input: IndexError."""
    fw = pytest.importorskip(backend)
    spec = dataclasses.replace(load_spec("specs/kl_div.yaml"), backward="custom")
    source = compile_spec(spec, get(backend))
    assert "Backward" in source
    path = tmp_path / f"kl_{backend}.py"
    path.write_text(source, encoding="utf-8")
    mod = verify.load_module(path, f"losscc_rt10_kl_{backend}_{reduction}")
    x, t = np.log(0.3), 0.6
    want_value, want_grad = t * (np.log(t) - x), -t
    if backend == "paddle":
        a = fw.to_tensor(np.array(x), stop_gradient=False)
        out = mod.KlDiv(reduction=reduction)(a, fw.to_tensor(np.array(t)))
        out.backward()
        value, grad = float(out), a.grad.numpy()
    else:
        cell = mod.KlDiv(reduction=reduction)

        def f(a):
            return cell(a, fw.Tensor(np.array(t)))
        value, grad = float(f(fw.Tensor(np.array(x)))), fw.grad(f)(fw.Tensor(np.array(x))).asnumpy()
    assert np.shape(grad) == () and value == pytest.approx(want_value) and float(grad) == pytest.approx(want_grad)


from tests.test_hostile_specs import assert_clean, cli, project, spec_text  # noqa: E402

CHAIN = "\n".join(["a1 = where(x > 0, log(1 + x), exp(x) - 1)"] + [
    f"a{i} = where(a{i - 1} > 0, log(1 + a{i - 1}), exp(a{i - 1}) - 1)" for i in range(2, 5)] + ["loss = a4"])


def test_the_number_of_reductions_is_limited(tmp_path):
    """300 reductions, each lowering the loss again, took 52 s in check."""
    extra = "reductions:\n" + "".join(f"  r{k}: {{denominator: a4}}\n" for k in range(300))
    proj = project(tmp_path, {"many": spec_text("many", CHAIN, "x", extra)})
    rc, out, err = cli(["check"], proj)
    assert_clean(rc, out, err, 2)
    assert "more than the limit 'reductions' (8)" in err and "[E104]" in err


def test_a_docs_page_stays_within_what_docs_check_reads(tmp_path):
    """The LaTeX of an inlined chain made a 5.7 MB page that docs --check (4 MiB reader)
    always called out of date."""
    from losscc.docpages import MATH_CHARS, MAX_PAGE_BYTES, page
    from losscc.spec import spec_from_text

    text = spec_text("bigpage", CHAIN.replace("loss = a4", "loss = a4 * w"), "x") .replace(
        "formula:", "  w: {dtype: float, shape: [N], optional: true}\nformula:")
    body = page(spec_from_text(text, "bigpage.yaml"), None, [])
    assert len(body.encode()) < MAX_PAGE_BYTES / 10 and f"over {MATH_CHARS}" in body


def test_extreme_boundary_draws_of_a_tower_of_exponentials_are_bounded(tmp_path):
    """max(exp(exp(x**8)), 2): the tie's bisection substituted floats into the tower and
    mpmath computed ln 2 to an enormous precision (killed at 200 s, 600 MB and growing)."""
    proj = project(tmp_path, {"tower": spec_text("tower", "loss = max(exp(exp(x**8)), 2.0)", "x")})
    (proj / "pyproject.toml").write_text('[tool.losscc]\nbackends = ["paddle"]\n', encoding="utf-8")
    rc, out, err = cli(["verify", "--extreme", "--mode", "eager", "--dtype", "float64"], proj)
    assert rc in (0, 1) and "Traceback" not in out + err, err[-2000:]


@pytest.mark.parametrize("line", ["sqrt(tanh(A)**2 + A**2)", "sqrt(cosh(A))", "cosh(sqrt(A**2 + 1))",
                                  "sqrt(tanh(A) + 2)"])
def test_chained_roots_of_hyperbolic_functions_parse_in_bounded_time(tmp_path, line):
    """SymPy's cosh/tanh assumptions took the argument's imaginary part modulo pi (Mod, gcd)
    on every query: four to eight such lines took 20 s to minutes at parse."""
    formula = "\n".join(["a0 = x - y"] + [f"a{i} = " + line.replace("A", f"a{i - 1}") for i in range(1, 9)]
                        + ["loss = a8 * y"])
    proj = project(tmp_path, {"hyp": spec_text("hyp", formula, "x y", "backward: custom\n")})
    rc, out, err = cli(["generate", "specs", "-o", "out"], proj)
    assert rc in (0, 2) and "Traceback" not in out + err, err[-2000:]
    assert rc == 0 or "[E104]" in err


def test_the_cheap_assumptions_answer_for_real_arguments():
    import sympy as sp

    from losscc import hyperbolic

    r, z = sp.Symbol("r", real=True), sp.Symbol("z")
    assert hyperbolic.cosh(r).is_positive and hyperbolic.tanh(r).is_real and hyperbolic.tanh(r).is_finite
    assert hyperbolic.cosh(z).is_positive is None and hyperbolic.tanh(z).is_real is None
    assert hyperbolic.tanh(z).diff(z) == 1 - hyperbolic.tanh(z) ** 2 and isinstance(hyperbolic.cosh(z), sp.cosh)
