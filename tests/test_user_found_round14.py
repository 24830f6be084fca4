"""Fresh-loss trial 14 (losses of optax, mmdet, kornia and others written from the docs alone)."""

from __future__ import annotations

import numpy as np
import pytest

from losscc.backends import get
from losscc.emit import compile_spec
from losscc import verify
from tests.backend_util import AVAILABLE
from tests.codegen_util import spec_of

DFL = """
    name: dfl_fixed
    summary: Distribution focal loss (mmdet) over a fixed axis of 8 bins.
    inputs:
      pred: {dtype: float, shape: [N, "R=8"]}
      label: {dtype: float, shape: [N], domain: "[0, 7)"}
    backward: custom
    formula: |
      left = stop_gradient(floor(label))
      ls = log_softmax(pred, axis=R)
      ce_left = -sum(where(index(R) == left, ls, 0), axis=R)
      ce_right = -sum(where(index(R) == left + 1, ls, 0), axis=R)
      loss = ce_left * (left + 1 - label) + ce_right * (label - left)
"""


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_custom_backward_of_a_spec_with_a_fixed_size_axis_compiles(backend):
    """The custom backward assigned the size of every axis it reads, also an axis of a fixed
    size, whose 'variable' is its number: `8 = pred.shape[1]`, a SyntaxError (generate and
    `verify --backward custom` ended in an internal error, exit 3)."""
    code = compile_spec(spec_of(DFL), get(backend))
    assert "8 = " not in code
    compile(code, "dfl_fixed.py", "exec")


@pytest.mark.skipif("paddle" not in AVAILABLE, reason="paddle is not installed")
def test_custom_backward_of_a_fixed_size_axis_equals_autograd(tmp_path):
    import paddle

    path = tmp_path / "dfl_fixed.py"
    path.write_text(compile_spec(spec_of(DFL), get("paddle")), encoding="utf-8")
    mod = verify.load_module(path, f"losscc_test_r14_dfl_{tmp_path.name}")
    rng = np.random.default_rng(14)
    pred, label = rng.normal(size=(3, 8)), np.array([0.25, 3.0, 6.5])
    grads = []
    for f in (mod.dfl_fixed, mod.DflFixed()):
        x = paddle.to_tensor(pred, stop_gradient=False)
        y = paddle.to_tensor(label, stop_gradient=False)
        grads.append([g.numpy() for g in paddle.grad([f(x, y)], [x, y])])
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


BARRON = """
    name: barron_general
    summary: Barron's general robust loss at a fixed alpha in (0, 2).
    inputs:
      x: {dtype: float, shape: [N]}
    params:
      alpha: {default: 1.0, gt: 0, lt: 2}
      scale: {default: 1.0, gt: 0}
    formula: |
      b = abs(alpha - 2)
      loss = b / alpha * (((x / scale)**2 / b + 1)**(alpha / 2) - 1)
    cases:
      - id: large_residuals
        inputs: {x: [3.0e15, -1.0e6]}
        params: {alpha: 0.5}
        expected: {none: [%s, %s]}
"""


def _barron(x, alpha):
    import mpmath as mp

    with mp.workdps(60):
        b = abs(mp.mpf(alpha) - 2)
        return b / alpha * ((mp.mpf(x) ** 2 / b + 1) ** (mp.mpf(alpha) / 2) - 1)


def test_a_power_with_an_exponent_made_of_hyperparameters_is_not_exponential():
    """`x ** (alpha / 2)`, the exponent an expression of hyperparameters: the reference's
    digit rule took it for an exponential function of the inputs (`b ** u` with u computed
    from inputs) and refused a residual of 3e15 (434822 digits, E104/E181), where a bare
    parameter exponent `x ** alpha` was taken."""
    import mpmath as mp

    from losscc.casecheck import exponential
    from losscc.parse import build_program
    from losscc.reference import reference

    want = [_barron(3.0e15, 0.5), _barron(-1.0e6, 0.5)]
    spec = spec_of(BARRON % tuple(mp.nstr(w, 20) for w in want))
    assert not exponential(spec)
    (case,) = spec.cases
    ref = reference(build_program(spec), {"x": np.array([3.0e15, -1.0e6])}, {"alpha": 0.5}, {}, ["x"])
    for got, w in zip(ref.values["none"], want):
        assert abs(got - float(w)) <= 1e-15 * abs(float(w)), (got, w)


def test_an_exponent_that_reads_an_input_is_still_exponential():
    text = """
        name: tensor_power
        summary: A power whose exponent is an input.
        inputs:
          x: {dtype: float, shape: [N], domain: "(0, inf)"}
          y: {dtype: float, shape: [N]}
        params:
          p: {default: 2.0}
        formula: |
          loss = x ** (p * y / 2)
    """
    from losscc.casecheck import exponential

    assert exponential(spec_of(text))
    assert not exponential(spec_of(text.replace("(p * y / 2)", "(p / 2 - 1)")))


XLOGX = """
    name: xlogx
    summary: The entropy term p log p of a probability (a JS divergence's, kornia's js_div_loss_2d).
    inputs:
      p: {dtype: float, shape: [N], domain: "[0, 1]"}
    formula: |
      loss = where(p > 0, p * log(p), 0)
"""


def test_the_reference_step_stays_inside_the_inputs_domain():
    """The reference's central difference stepped 1e-15 either side of a probability of 1e-31,
    below 0, where log is not defined: its gradient was NaN and the correct code failed
    `verify` with 'gradient d/dp is -70.38 (expected NaN)' (kornia's js_div_loss_2d on peaked
    heatmaps, in float32, where a library case's gradients come from the reference)."""
    import math

    from losscc.parse import build_program
    from losscc.reference import reference

    spec = spec_of(XLOGX)
    p = np.array([1e-31, 3e-20, 0.25])
    ref = reference(build_program(spec), {"p": p}, {}, {}, ["p"])
    want = np.log(p) + 1
    assert np.all(np.isfinite(ref.grads["p"])), ref.grads["p"]
    np.testing.assert_allclose(ref.grads["p"], want, rtol=1e-14)
    assert math.isclose(ref.values["none"][0], 1e-31 * math.log(1e-31), rel_tol=1e-15)


PRIOR = """
    name: margin_prior
    summary: Cross-entropy with a per-class margin from class counts read under stop_gradient (LDAM).
    inputs:
      x: {dtype: float, shape: [N, C]}
      target: {dtype: int, shape: [N], domain: "[0, C)"}
      counts: {dtype: float, shape: [C], domain: "(0, inf)"}
    backward: custom
    formula: |
      m = stop_gradient(0.5 * counts**-0.25)
      loss = -log_softmax(where(index(C) == target, x - m[target], x), axis=C)[target]
"""


@pytest.mark.skipif("paddle" not in AVAILABLE, reason="paddle is not installed")
@pytest.mark.parametrize("mode", ["eager", "to_static"])
def test_a_zero_gradient_keeps_its_inputs_shape_under_reduction_none(tmp_path, mode):
    """The gradient of an input read only under stop_gradient is zeros of its shape [C]; the
    custom backward multiplied it by none's upstream gradient, of shape [N, 1], and returned
    [N, C]: Paddle's to_static refused it ('shape of inp_grad([5, 4]) and fwd_input([4])
    should be the same', LDAM's class counts in `verify --backward custom`)."""
    import paddle

    path = tmp_path / "margin_prior.py"
    path.write_text(compile_spec(spec_of(PRIOR), get("paddle")), encoding="utf-8")
    mod = verify.load_module(path, f"losscc_test_r14_prior_{mode}_{tmp_path.name}")
    rng = np.random.default_rng(5)
    x0, t0, c0 = rng.normal(size=(5, 4)), np.array([0, 3, 1, 1, 2]), np.array([500.0, 20.0, 7.0, 90.0])
    grads = []
    for f in (mod.margin_prior, mod.MarginPrior(reduction="none")):
        if f is not mod.margin_prior and mode == "to_static":
            f = paddle.jit.to_static(f, full_graph=True)
        x = paddle.to_tensor(x0, stop_gradient=False)
        c = paddle.to_tensor(c0, stop_gradient=False)
        out = f(x, paddle.to_tensor(t0), c, reduction="none") if f is mod.margin_prior else f(x, paddle.to_tensor(t0), c)
        gx, gc = paddle.grad([out], [x, c], grad_outputs=[paddle.to_tensor(np.linspace(0.5, 2.0, 5))], allow_unused=True)
        grads.append((gx.numpy(), None if gc is None else gc.numpy()))
    (want_x, want_c), (got_x, got_c) = grads
    np.testing.assert_allclose(got_x, want_x, rtol=1e-12, atol=1e-15)
    assert got_c is not None and got_c.shape == (4,), None if got_c is None else got_c.shape
    assert np.all(got_c == 0)
