"""The reference evaluator (losscc.reference) against hand-derived closed forms.

Every spec here is built inline from YAML text; the expected values and gradients
are computed independently in float64 NumPy (or in mpmath where float64 would lose
the answer), and must agree with the evaluator to ~1e-12 relative.  Gradients from
the evaluator are d(sum of the per-element loss)/d(input).
"""

from __future__ import annotations

import textwrap

import mpmath
import numpy as np
import pytest

from losscc.parse import build_program
from losscc.reference import DPS, digits_for, reference
from losscc.spec import spec_from_text

RTOL = 1e-12


def make_spec(inputs: str, formula: str, extra: str = ""):
    """A spec from its `inputs:` block, its formula and any further top-level YAML."""
    text = "name: t\nsummary: a test spec\ninputs:\n"
    text += textwrap.indent(textwrap.dedent(inputs).strip("\n"), "  ") + "\n"
    if extra:
        text += textwrap.dedent(extra).strip("\n") + "\n"
    text += "formula: |\n" + textwrap.indent(textwrap.dedent(formula).strip("\n"), "  ") + "\n"
    return spec_from_text(text, "<test>")


def program(inputs: str, formula: str, extra: str = ""):
    return build_program(make_spec(inputs, formula, extra))


def close(actual, expected, rtol=RTOL, atol=0.0):
    actual = np.asarray(actual, dtype=float)
    expected = np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def softmax(x, axis=-1):
    z = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return z / np.sum(z, axis=axis, keepdims=True)


def log_sum_exp(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(m, axis) + np.log(np.sum(np.exp(x - m), axis=axis))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


RNG = np.random.default_rng(20240611)
X1 = np.round(RNG.normal(0.0, 1.5, size=5), 6)
X2 = np.round(RNG.normal(0.0, 1.5, size=(3, 4)), 6)
LABELS = np.array([2, 0, 3])

VEC = "x: {dtype: float, shape: [N]}"
MAT = "x: {dtype: float, shape: [N, C]}"


# --------------------------------------------------------------------------- elementary closed forms


def test_sum_of_squares():
    prog = program(VEC, "loss = x**2")
    ref = reference(prog, {"x": X1}, {})
    close(ref.values["none"], X1**2)
    close(ref.values["sum"], np.sum(X1**2))
    close(ref.values["mean"], np.mean(X1**2))
    close(ref.grads["x"], 2 * X1)
    assert not ref.kinks["x"].any()


def test_sum_of_squares_over_an_axis():
    prog = program(MAT, "loss = sum(x**2, axis=C)")
    ref = reference(prog, {"x": X2}, {})
    close(ref.values["none"], np.sum(X2**2, axis=1))
    close(ref.values["mean"], np.mean(np.sum(X2**2, axis=1)))
    close(ref.grads["x"], 2 * X2)


@pytest.mark.parametrize("formula", ["loss = logsumexp(x, axis=C)", "loss = log(sum(exp(x), axis=C))"])
def test_log_sum_exp_gradient_is_softmax(formula):
    prog = program(MAT, formula)
    ref = reference(prog, {"x": X2}, {})
    close(ref.values["none"], log_sum_exp(X2, axis=1))
    close(ref.values["sum"], np.sum(log_sum_exp(X2, axis=1)))
    close(ref.grads["x"], softmax(X2, axis=1))


def test_mean_and_max_over_an_axis():
    prog = program(MAT, "loss = mean(x, axis=C) + max(x, axis=C) - min(x, axis=C)")
    ref = reference(prog, {"x": X2}, {})
    close(ref.values["none"], X2.mean(1) + X2.max(1) - X2.min(1))
    onehot_max = (X2 == X2.max(1, keepdims=True)).astype(float)
    onehot_min = (X2 == X2.min(1, keepdims=True)).astype(float)
    close(ref.grads["x"], 1 / X2.shape[1] + onehot_max - onehot_min)


def test_softmax_cross_entropy_gradient_is_softmax_minus_onehot():
    prog = program(MAT + "\ny: {dtype: int, shape: [N], domain: \"[0, C)\"}",
                   "loss = -log_softmax(x, axis=C)[y]")
    ref = reference(prog, {"x": X2, "y": LABELS}, {})
    picked = X2[np.arange(3), LABELS]
    expected = log_sum_exp(X2, axis=1) - picked
    close(ref.values["none"], expected)
    close(ref.values["mean"], expected.mean())
    onehot = np.eye(4)[LABELS]
    close(ref.grads["x"], softmax(X2, axis=1) - onehot, atol=1e-15)
    assert set(ref.grads) == {"x"}  # the int label has no gradient


def test_cross_entropy_via_softmax_and_one_hot():
    """The same loss written as -sum(one_hot * log(softmax)): same value and gradient."""
    prog = program(MAT + "\ny: {dtype: int, shape: [N], domain: \"[0, C)\"}",
                   "loss = -sum(one_hot(y, C) * log(softmax(x, axis=C)), axis=C)")
    ref = reference(prog, {"x": X2, "y": LABELS}, {})
    close(ref.values["none"], log_sum_exp(X2, axis=1) - X2[np.arange(3), LABELS])
    close(ref.grads["x"], softmax(X2, axis=1) - np.eye(4)[LABELS], atol=1e-15)


def test_softplus_gradient_is_sigmoid():
    prog = program(VEC, "loss = softplus(x)")
    ref = reference(prog, {"x": X1}, {})
    close(ref.values["none"], softplus(X1))
    close(ref.grads["x"], sigmoid(X1))


def test_sigmoid_gradient():
    prog = program(VEC, "loss = sigmoid(x)")
    ref = reference(prog, {"x": X1}, {})
    close(ref.values["none"], sigmoid(X1))
    close(ref.grads["x"], sigmoid(X1) * (1 - sigmoid(X1)))


def test_binary_cross_entropy_with_logits():
    prog = program(VEC + "\nt: {dtype: float, shape: [N], domain: \"[0, 1]\"}",
                   "loss = -(t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x)))")
    t = np.round(RNG.uniform(0, 1, size=X1.shape), 6)
    ref = reference(prog, {"x": X1, "t": t}, {})
    close(ref.values["none"], softplus(X1) - t * X1)
    close(ref.grads["x"], sigmoid(X1) - t)
    close(ref.grads["t"], -X1)


def test_gradient_entries_far_below_the_loss_keep_their_digits():
    """d/dt of BCE at logits of 1e-20 is -x, 1e-20 next to a loss of log 2: the differences'
    rounding (1e-23 at 40 digits) would leave three digits; the entry is refined to its own
    size, and a larger one next to it is left as it was."""
    prog = program(VEC + "\nt: {dtype: float, shape: [N], domain: \"[0, 1]\"}",
                   "loss = -(t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x)))")
    x = np.array([1e-20, -3e-20, 2e-22, 0.75])
    t = np.array([0.3, 0.7, 1.0, 0.5])
    ref = reference(prog, {"x": x, "t": t}, {})
    close(ref.grads["t"], -x, rtol=1e-15)
    close(ref.grads["x"], sigmoid(x) - t, rtol=1e-15)


def test_a_sample_that_is_not_finite_leaves_the_others_gradients_alone():
    """Dice of an empty sample is 0/0; the other sample's gradient is the usual one, not NaN
    (each entry's difference counts only the elements that move, as autograd's chain does),
    the empty sample's own entries are NaN, and the other sample's entries are compared: by the layout they do not feed the NaN element (red-team: one such
    element made every entry of every sample a kink, and zeroed gradients passed)."""
    prog = program("p: {dtype: float, shape: [N, P], domain: \"[0, 1]\"}\n"
                   "t: {dtype: float, shape: [N, P], domain: \"[0, 1]\"}",
                   "loss = 1 - 2 * sum(p * t, axis=P) / (sum(p, axis=P) + sum(t, axis=P))")
    p = np.array([[0.5, 0.0, 0.25], [0.0, 0.0, 0.0]])
    t = np.array([[1.0, 0.0, 0.5], [0.0, 0.0, 0.0]])
    ref = reference(prog, {"p": p, "t": t}, {})
    i, s = (p[0] * t[0]).sum(), p[0].sum() + t[0].sum()
    close(ref.grads["p"][0], -2 * (t[0] * s - i) / s**2)
    close(ref.grads["t"][0], -2 * (p[0] * s - i) / s**2)
    assert np.isnan(ref.grads["p"][1]).all() and np.isnan(ref.values["none"][1])
    assert not ref.kinks["p"][0].any() and not ref.kinks["t"][0].any()


def test_elementary_functions():
    prog = program("x: {dtype: float, shape: [N], domain: \"(0, inf)\"}",
                   "loss = sqrt(x) + tanh(x) + log1p(x) + expm1(-x) + x**1.5 + 1 / x")
    x = np.array([0.25, 0.7, 1.0, 2.5, 9.0])
    ref = reference(prog, {"x": x}, {})
    close(ref.values["none"], np.sqrt(x) + np.tanh(x) + np.log1p(x) + np.expm1(-x) + x**1.5 + 1 / x)
    close(ref.grads["x"], 0.5 / np.sqrt(x) + 1 / np.cosh(x) ** 2 + 1 / (1 + x) - np.exp(-x)
          + 1.5 * np.sqrt(x) - 1 / x**2)


# --------------------------------------------------------------------------- piecewise


HUBER_INPUTS = """
input: {dtype: float, shape: ["*S"]}
target: {dtype: float, shape: ["*S"]}
"""
HUBER_FORMULA = """
d = abs(input - target)
loss = Piecewise((0.5 * d**2, d < delta), (delta * (d - 0.5 * delta), True))
"""


@pytest.mark.parametrize("delta", [1.0, 1.5])
def test_huber_inside_and_outside_the_quadratic_zone(delta):
    prog = program(HUBER_INPUTS, HUBER_FORMULA, "params:\n  delta: {default: 1.0, min: 0}")
    inp = np.array([0.0, 0.3, -0.9, 1.2, -2.0, 4.0, 1.45])
    tgt = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1.0, -0.5])
    d = inp - tgt
    quad = np.abs(d) < delta
    params = {} if delta == 1.0 else {"delta": delta}  # the default, or a value given
    ref = reference(prog, {"input": inp, "target": tgt}, params)
    expected = np.where(quad, 0.5 * d**2, delta * (np.abs(d) - 0.5 * delta))
    close(ref.values["none"], expected)
    close(ref.values["sum"], expected.sum())
    close(ref.values["mean"], expected.mean())
    grad = np.where(quad, d, delta * np.sign(d))
    close(ref.grads["input"], grad, atol=1e-15)
    close(ref.grads["target"], -grad, atol=1e-15)
    # abs(d) at d == 0 sits in the smooth quadratic part: not a kink
    assert not ref.kinks["input"].any()


def test_huber_on_a_two_dimensional_input():
    prog = program(HUBER_INPUTS, HUBER_FORMULA, "params:\n  delta: {default: 1.0, min: 0}")
    inp = np.array([[0.5, -3.0, 0.1], [2.0, 0.0, -0.25]])
    tgt = np.zeros_like(inp)
    ref = reference(prog, {"input": inp, "target": tgt}, {})
    expected = np.where(np.abs(inp) < 1, 0.5 * inp**2, np.abs(inp) - 0.5)
    close(ref.values["none"], expected)
    close(ref.values["mean"], expected.mean())
    close(ref.grads["input"], np.clip(inp, -1, 1))


def test_where_and_clip_and_relu():
    prog = program(VEC, "loss = where(x > 0, x**3, -x) + clip(x, -0.5, 0.5) + relu(x - 1)")
    x = np.array([-2.0, -0.3, 0.2, 0.7, 1.6])
    ref = reference(prog, {"x": x}, {})
    close(ref.values["none"], np.where(x > 0, x**3, -x) + np.clip(x, -0.5, 0.5) + np.maximum(x - 1, 0))
    close(ref.grads["x"], np.where(x > 0, 3 * x**2, -1.0) + (np.abs(x) < 0.5) + (x > 1))


# --------------------------------------------------------------------------- reductions


WEIGHTED = """
input: {dtype: float, shape: [N]}
target: {dtype: float, shape: [N]}
weight: {dtype: float, shape: [N], optional: true}
"""


def test_mean_with_a_custom_denominator():
    prog = program(WEIGHTED, "loss = weight * (input - target)**2",
                   "reductions:\n  mean: {denominator: weight}")
    inp, tgt = X1, np.round(RNG.normal(size=5), 6)
    w = np.array([0.5, 2.0, 1.25, 0.1, 3.0])
    ref = reference(prog, {"input": inp, "target": tgt, "weight": w}, {})
    per = w * (inp - tgt) ** 2
    close(ref.values["none"], per)
    close(ref.values["sum"], per.sum())
    close(ref.values["mean"], per.sum() / w.sum())
    close(ref.grads["input"], 2 * w * (inp - tgt))
    close(ref.grads["target"], -2 * w * (inp - tgt))
    close(ref.grads["weight"], (inp - tgt) ** 2)


def test_custom_denominator_with_an_omitted_optional_input_is_the_plain_mean():
    prog = program(WEIGHTED, "loss = weight * (input - target)**2",
                   "reductions:\n  mean: {denominator: weight}")
    inp, tgt = X1, np.zeros(5)
    ref = reference(prog, {"input": inp, "target": tgt, "weight": None}, {})
    close(ref.values["none"], inp**2)
    close(ref.values["mean"], np.mean(inp**2))
    close(ref.grads["input"], 2 * inp)
    assert "weight" not in ref.grads


def test_broadcast_weight_in_the_custom_denominator():
    prog = program("""
        input: {dtype: float, shape: ["*S"]}
        target: {dtype: float, shape: ["*S"]}
        weight: {dtype: float, shape: ["*S"], optional: true, broadcast: true}
        """, "loss = weight * (input - target)**2", "reductions:\n  mean: {denominator: weight}")
    inp, tgt = X2, np.zeros_like(X2)
    w = np.array([0.5, 1.0, 2.0, 4.0])  # broadcasts along the last axis
    ref = reference(prog, {"input": inp, "target": tgt, "weight": w}, {})
    per = w * inp**2
    close(ref.values["none"], per)
    close(ref.values["mean"], per.sum() / np.broadcast_to(w, inp.shape).sum())
    close(ref.grads["input"], 2 * w * inp)
    close(ref.grads["weight"], np.sum(inp**2, axis=0))


def test_sum_and_mean_over_a_variadic_group():
    prog = program('x: {dtype: float, shape: [N, "*D"]}', "loss = mean(x, axis=D) + sum(x**2, axis=D)")
    x = np.round(RNG.normal(size=(2, 3, 4)), 6)
    ref = reference(prog, {"x": x}, {})
    close(ref.values["none"], x.mean(axis=(1, 2)) + np.sum(x**2, axis=(1, 2)))
    close(ref.grads["x"], 1 / 12 + 2 * x)


def test_extra_reduction_with_a_size_denominator():
    prog = program(MAT, "loss = x**2", "reductions:\n  batchmean: {denominator: N}")
    ref = reference(prog, {"x": X2}, {})
    close(ref.values["none"], X2**2)
    close(ref.values["sum"], np.sum(X2**2))
    close(ref.values["mean"], np.mean(X2**2))
    close(ref.values["batchmean"], np.sum(X2**2) / X2.shape[0])


CE_INPUTS = """
input: {dtype: float, shape: [N, C]}
target: {dtype: int, shape: [N], domain: "[0, C)", ignore: ignore_index}
weight: {dtype: float, shape: [C], optional: true}
"""
CE_EXTRA = """
params:
  ignore_index: {default: -100}
reductions:
  mean: {denominator: "weight[target]"}
"""


@pytest.mark.parametrize("ignore_index", [-100, 1])
@pytest.mark.parametrize("with_weight", [False, True])
def test_ignored_positions_give_zero_and_do_not_count(ignore_index, with_weight):
    prog = program(CE_INPUTS, "loss = -weight[target] * log_softmax(input, axis=C)[target]", CE_EXTRA)
    x = np.round(RNG.normal(0, 2, size=(5, 3)), 6)
    target = np.array([0, ignore_index, 2, 1, ignore_index]) if ignore_index < 0 else np.array([0, 1, 2, 1, 0])
    w = np.array([0.3, 1.7, 2.2]) if with_weight else np.ones(3)
    ref = reference(prog, {"input": x, "target": target, "weight": w if with_weight else None},
                    {} if ignore_index == -100 else {"ignore_index": ignore_index})
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    nll = log_sum_exp(x, axis=1) - x[np.arange(5), safe]
    per = np.where(valid, w[safe] * nll, 0.0)
    close(ref.values["none"], per)
    close(ref.values["sum"], per.sum())
    close(ref.values["mean"], per.sum() / np.sum(np.where(valid, w[safe], 0.0)))
    grad = np.where(valid[:, None], w[safe][:, None] * (softmax(x, axis=1) - np.eye(3)[safe]), 0.0)
    close(ref.grads["input"], grad, atol=1e-15)
    assert not ref.grads["input"][~valid].any()  # exactly zero at ignored positions
    if with_weight:
        gw = np.zeros(3)
        np.add.at(gw, safe[valid], nll[valid])
        close(ref.grads["weight"], gw)


@pytest.mark.parametrize("denominator", [
    "\"weight[target]\"",
    "N",
])
def test_declaring_ignore_changes_nothing_when_nothing_is_ignored(denominator):
    extra = f"params:\n  ignore_index: {{default: -100}}\nreductions:\n  mean: {{denominator: {denominator}}}"
    plain = program(CE_INPUTS.replace(", ignore: ignore_index", ""),
                    "loss = -weight[target] * log_softmax(input, axis=C)[target]", extra)
    masked = program(CE_INPUTS, "loss = -weight[target] * log_softmax(input, axis=C)[target]", extra)
    x = np.round(RNG.normal(0, 2, size=(4, 3)), 6)
    inputs = {"input": x, "target": np.array([0, 2, 1, 1]), "weight": np.array([0.5, 1.0, 2.0])}
    a, b = reference(plain, inputs, {}), reference(masked, inputs, {})
    for red in ("none", "sum", "mean"):
        close(b.values[red], a.values[red])
    close(b.grads["input"], a.grads["input"])


def test_reductions_agree_with_each_other():
    prog = program(MAT + "\nt: {dtype: float, shape: [N, C]}",
                   "loss = (x - t)**2 * sigmoid(t)",
                   "reductions:\n  batchmean: {denominator: N}\n  halved: {denominator: 2}")
    t = np.round(RNG.normal(size=X2.shape), 6)
    ref = reference(prog, {"x": X2, "t": t}, {})
    none = ref.values["none"]
    assert none.shape == X2.shape
    close(ref.values["sum"], none.sum())
    close(ref.values["mean"], none.sum() / none.size)
    close(ref.values["mean"], none.mean())
    close(ref.values["batchmean"], none.sum() / X2.shape[0])
    close(ref.values["halved"], none.sum() / 2)
    close(ref.values["none"], (X2 - t) ** 2 * sigmoid(t))


# --------------------------------------------------------------------------- learnable tensors


MULTITASK_INPUTS = """
x: {dtype: float, shape: [N]}
t: {dtype: float, shape: [N]}
"""
MULTITASK_EXTRA = "learnable:\n  log_vars: {shape: [2], init: 0.0}"
MULTITASK_FORMULA = """
s1 = log_vars[0]
s2 = log_vars[1]
loss = exp(-s1) * (x - t)**2 + s1 + s2 * x
"""


def test_learnable_tensor_indexed_by_a_constant():
    prog = program(MULTITASK_INPUTS, MULTITASK_FORMULA, MULTITASK_EXTRA)
    x, t = X1, np.round(RNG.normal(size=5), 6)
    s = np.array([0.3, -0.7])
    ref = reference(prog, {"x": x, "t": t}, {}, {"log_vars": s})
    per = np.exp(-s[0]) * (x - t) ** 2 + s[0] + s[1] * x
    close(ref.values["none"], per)
    close(ref.values["mean"], per.mean())
    close(ref.grads["x"], 2 * np.exp(-s[0]) * (x - t) + s[1])
    close(ref.grads["log_vars"], [np.sum(-np.exp(-s[0]) * (x - t) ** 2 + 1), np.sum(x)])
    # grad_of restricts which gradients are computed
    only = reference(prog, {"x": x, "t": t}, {}, {"log_vars": s}, grad_of=["log_vars"])
    assert set(only.grads) == {"log_vars"}
    close(only.grads["log_vars"], ref.grads["log_vars"])


def test_uncertainty_multitask_as_in_the_repository_spec():
    prog = program("""
        logits1: {dtype: float, shape: [N]}
        labels1: {dtype: float, shape: [N], domain: "[0, 1]"}
        """, """
        bce1 = -(labels1 * log(sigmoid(logits1)) + (1 - labels1) * log(1 - sigmoid(logits1)))
        s1 = log_vars[0]
        loss = exp(-s1) * bce1 + s1 + log_vars[1]**2
        """, MULTITASK_EXTRA)
    z = X1
    y = np.array([0.0, 1.0, 1.0, 0.0, 0.5])
    s = np.array([-0.4, 0.9])
    ref = reference(prog, {"logits1": z, "labels1": y}, {}, {"log_vars": s})
    bce = softplus(z) - y * z
    close(ref.values["none"], np.exp(-s[0]) * bce + s[0] + s[1] ** 2)
    close(ref.grads["logits1"], np.exp(-s[0]) * (sigmoid(z) - y))
    close(ref.grads["log_vars"], [np.sum(1 - np.exp(-s[0]) * bce), 5 * 2 * s[1]])


# --------------------------------------------------------------------------- stop_gradient and kinks


def test_stop_gradient_contributes_no_gradient():
    prog = program(VEC, "loss = x * stop_gradient(x)")
    ref = reference(prog, {"x": X1}, {})
    close(ref.values["none"], X1**2)
    close(ref.grads["x"], X1)  # d/dx [x * sg(x)] = sg(x) = x, not 2x


def test_stop_gradient_of_a_reduction_and_a_straight_through_term():
    # x + stop_gradient(x**3 - x) has the value x**3 and the gradient 1 (straight-through)
    prog = program(MAT, """
        sq = stop_gradient(sum(x**2, axis=C))
        loss = x**2 / sq + x + stop_gradient(x**3 - x)
        """)
    ref = reference(prog, {"x": X2}, {})
    norm = np.sum(X2**2, axis=1, keepdims=True)
    close(ref.values["none"], X2**2 / norm + X2**3)
    close(ref.grads["x"], 2 * X2 / norm + 1)


def test_kinks_of_selections_take_the_documented_convention():
    prog = program(VEC, "loss = abs(x) + max(x - 1, 0)")
    x = np.array([0.0, 0.5, -1.5, 1.0, 2.0])
    ref = reference(prog, {"x": x}, {})
    close(ref.values["none"], np.abs(x) + np.maximum(x - 1, 0))
    # selections are made at the point: abs'(0) = 0, max against a bound passes the gradient
    assert not ref.kinks["x"].any()
    close(ref.grads["x"], np.sign(x) + (x >= 1), atol=1e-15)


def test_kink_of_a_smooth_operation_is_reported():
    prog = program(VEC, "loss = sqrt(x * x) + x")
    x = np.array([0.0, 0.5, -1.5])
    ref = reference(prog, {"x": x}, {})
    assert ref.kinks["x"].tolist() == [True, False, False]
    close(ref.grads["x"][1:], [2.0, 0.0])


def test_no_kink_where_the_function_is_smooth():
    # the Huber curve is C1 at |d| == delta: left and right slopes agree, so no kink
    prog = program(HUBER_INPUTS, HUBER_FORMULA, "params:\n  delta: {default: 1.0, min: 0}")
    inp = np.array([1.0, -1.0, 0.0])
    ref = reference(prog, {"input": inp, "target": np.zeros(3)}, {})
    assert not ref.kinks["input"].any()
    close(ref.grads["input"], [1.0, -1.0, 0.0], atol=1e-15)


# --------------------------------------------------------------------------- large inputs


def test_precision_grows_with_the_input_magnitude():
    assert digits_for({"x": np.array([0.5])}, {}) == DPS
    assert digits_for({"x": np.array([-1000.0, 2.0])}, {}) >= DPS + 1000 / 2.3 - 1
    assert digits_for({"x": None}, {"s": np.array([50.0])}) > DPS


def test_softplus_of_large_inputs():
    prog = program(VEC, "loss = softplus(x)")
    x = np.array([1000.0, 50.0, -50.0, -700.0])
    ref = reference(prog, {"x": x}, {})
    v = ref.values["none"]
    assert abs(v[0] - 1000.0) <= 1e-15 * 1000.0
    assert abs(v[1] - 50.0) <= 1e-15 * 50.0
    with mpmath.workdps(50):
        exact = [float(mpmath.log1p(mpmath.exp(mpmath.mpf(z)))) for z in x]
        dexact = [float(1 / (1 + mpmath.exp(-mpmath.mpf(z)))) for z in x]
    close(v, exact)  # including log1p(exp(-50)) ~ 1.9e-22 and exp(-700) ~ 9.9e-305
    close(ref.grads["x"], dexact)


def test_log_one_minus_sigmoid_of_large_inputs():
    prog = program(VEC, "loss = log(1 - sigmoid(x))")
    x = np.array([50.0, 1000.0, -50.0, 3.0])
    ref = reference(prog, {"x": x}, {})
    v = ref.values["none"]
    assert np.all(np.isfinite(v)) and np.all(np.isfinite(ref.grads["x"]))
    # log(1 - sigmoid(x)) = -softplus(x); d/dx = -sigmoid(x)
    with mpmath.workdps(60):
        exact = [float(-(mpmath.log1p(mpmath.exp(-mpmath.mpf(z))) + z)) for z in x]
        dexact = [float(-1 / (1 + mpmath.exp(-mpmath.mpf(z)))) for z in x]
    close(v, exact)
    close(ref.grads["x"], dexact)
    assert v[1] == -1000.0 and v[0] == -50.0
    assert abs(v[2] + 1.9287498479639178e-22) <= 1e-12 * 1.93e-22


def test_one_minus_sigmoid_beyond_the_precision_cap():
    # at 1e4 and 1e18, 1 - sigmoid(x) would need thousands of digits (or more) to
    # survive the cancellation; the evaluator uses the identity 1 - sigmoid(x) = sigmoid(-x)
    prog = program(VEC, "loss = log(1 - sigmoid(x))")
    x = np.array([1e4, 1e18, -1e4])
    ref = reference(prog, {"x": x}, {}, max_dps=120)
    close(ref.values["none"], [-1e4, -1e18, 0.0])
    close(ref.grads["x"], [-1.0, -1.0, 0.0], atol=1e-300)


def test_log_sigmoid_and_exp_of_large_inputs():
    prog = program(VEC, "loss = log(sigmoid(x)) + exp(x / 10)")
    x = np.array([-1000.0, 1000.0, 0.0])
    ref = reference(prog, {"x": x}, {})
    with mpmath.workdps(60):
        exact = [float(-mpmath.log1p(mpmath.exp(-mpmath.mpf(z))) + mpmath.exp(mpmath.mpf(z) / 10)) for z in x]
        dexact = [float(1 - 1 / (1 + mpmath.exp(-mpmath.mpf(z))) + mpmath.exp(mpmath.mpf(z) / 10) / 10)
                  for z in x]
    close(ref.values["none"], exact)
    close(ref.grads["x"], dexact)


def test_cross_entropy_of_large_logits():
    prog = program(MAT + "\ny: {dtype: int, shape: [N], domain: \"[0, C)\"}",
                   "loss = -log(softmax(x, axis=C)[y])")
    x = np.array([[1000.0, 0.0, -1000.0], [0.0, 0.0, 0.0]])
    y = np.array([2, 1])
    ref = reference(prog, {"x": x, "y": y}, {})
    close(ref.values["none"], [2000.0, np.log(3.0)])
    close(ref.grads["x"], softmax(x, axis=1) - np.eye(3)[y], atol=1e-15)
