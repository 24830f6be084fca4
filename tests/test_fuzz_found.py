"""Compiler defects the differential fuzzer (tests/fuzz.py) found, each as the smallest spec
that showed it: compiled, run once eagerly in a backend where it failed, and compared with
the reference evaluator."""

import numpy as np
import pytest
from tests.codegen_util import case, modules, runners, spec_of

from losscc import verify

# an optional per-sample weight that broadcasts, in a program whose layout keeps the class
# axis (the weight must become [N, 1], not stay [N] and broadcast to [N, N]), or a variadic
# group after it
BROADCAST_WEIGHT = """
    name: weighted_pick
    summary: s.
    inputs:
      z: {dtype: float, shape: [N, C, "*D"]}
      lab: {dtype: int, shape: [N, "*D"], domain: "[0, C)"}
      w: {dtype: float, shape: [N, "*D"], optional: true, broadcast: true}
    formula: |
      loss = w * (-log_softmax(z, axis=C)[lab])
"""


def _check(spec, backend, cases, tmp_path, dtypes=("float64",)):
    mods = modules(spec, tmp_path)
    rows = verify.verify_spec(spec, mods, {backend: runners()[backend]}, dtypes, ("eager",), cases)
    bad = [(r.dtype, r.failures[:2]) for r in rows if not r.ok]
    assert not bad, bad
    assert all(r.cases == len(cases) for r in rows)


@pytest.mark.parametrize("backend,sizes,cut", [
    ("paddle", {"N": (3,), "C": (4,), "D": ()}, None),          # an [N] weight
    ("paddle", {"N": (2,), "C": (3,), "D": (2,)}, None),        # an [N, D] weight
    ("mindspore", {"N": (3,), "C": (4,), "D": ()}, (1,)),       # one weight for the batch
    ("mindspore", {"N": (2,), "C": (3,), "D": (2,)}, (2,)),     # a [D] weight for every sample
])
def test_broadcast_input_placed_in_the_layout(backend, sizes, cut, tmp_path):
    pytest.importorskip({"paddle": "paddle", "mindspore": "mindspore", "jax": "jax"}[backend])
    spec = spec_of(BROADCAST_WEIGHT, "weighted_pick")
    c = case(spec, sizes, seed=3)
    if cut is not None:
        c.inputs["w"] = np.ascontiguousarray(c.inputs["w"].reshape(-1)[:int(np.prod(cut))].reshape(cut))
    _check(spec, backend, [c], tmp_path)


def test_ignored_positions_masked_with_a_float_zero_in_paddle(tmp_path):
    """`y - y` folds to the number 0 typed with y's axes, and SymPy has one 0: the ignore mask's
    0 branch was then taken for a tensor and written as a bare int, which Paddle's where
    promotes to int64 against the float64 loss."""
    pytest.importorskip("paddle")
    spec = spec_of("""
        name: masked_fold
        summary: s.
        inputs:
          z: {dtype: float, shape: [N, C]}
          lab: {dtype: int, shape: [N], domain: "[0, C)", ignore: ig}
          y: {dtype: float, shape: [N]}
        params:
          ig: {default: -100}
        formula: |
          loss = -log_softmax(z, axis=C)[lab] + softplus(y - y) + y
    """, "masked_fold")
    c = case(spec, {"N": (4,), "C": (3,)}, seed=1)
    c.inputs["lab"][1] = -100
    _check(spec, "paddle", [c], tmp_path, dtypes=("float64", "float32"))


def test_loss_without_the_class_axis_after_a_folded_gather(tmp_path):
    """`x - x` removes the only gather, so the loss [N, *D] is not canonical in a layout that
    has C between N and D: the test for a needed reshape built the shape code from no sizes
    (an internal compiler error, E900)."""
    pytest.importorskip("mindspore")
    spec = spec_of("""
        name: folded_gather
        summary: s.
        inputs:
          z: {dtype: float, shape: [N, C, "*D"]}
          y: {dtype: float, shape: [N, "*D"]}
          lab: {dtype: int, shape: [N, "*D"], domain: "[0, C)"}
        formula: |
          x = z[lab]
          loss = y + (x - x)
    """, "folded_gather")
    _check(spec, "mindspore", [case(spec, {"N": (3,), "C": (3,), "D": (2,)}, seed=2)], tmp_path)



# SymPy folds `z - z`, `0 * z` and `stop_gradient` of either to the number 0 before any
# tensor operator sees it: each operator of a constant must be the constant it stands for
# (the IR folds them at construction), not a framework call on a Python int ("amax():
# argument must be Tensor, but got int"), nor a 0 typed with z's axes (the loss then got a
# class axis it does not have).
FOLDED = [
    ("paddle", "max(z - z, axis=C) + z[lab]"),
    ("mindspore", "logsumexp(z - z, axis=C) + stop_gradient(y - y) + y"),
    ("paddle", "sum(z * softmax(z - z, axis=C), axis=C)"),
    ("mindspore", "sum(z * log_softmax(0 * z, axis=C), axis=C) + y"),
    ("paddle", "z[argmax(stop_gradient(z - z), axis=C)] + sum(z * diff(z - z, axis=C), axis=C)"),
    ("mindspore", "sum(z * one_hot(argmax(stop_gradient(z - z), axis=C), C), axis=C)"),
    ("paddle", "stop_gradient(y - y) + y + mean(z - z, axis=C)"),
]


@pytest.mark.parametrize("backend,formula", FOLDED, ids=[f for _, f in FOLDED])
def test_operators_of_a_folded_constant(backend, formula, tmp_path):
    pytest.importorskip(backend)
    spec = spec_of(f"""
        name: folded_op
        summary: s.
        inputs:
          z: {{dtype: float, shape: [N, C]}}
          y: {{dtype: float, shape: [N]}}
          lab: {{dtype: int, shape: [N], domain: "[0, C)"}}
        formula: |
          loss = {formula}
    """, "folded_op")
    _check(spec, backend, [case(spec, {"N": (3,), "C": (4,)}, seed=5)], tmp_path)


def test_a_where_whose_condition_the_default_decides(tmp_path):
    """x omitted is 1, so relu(loss) = where(loss > 0, loss, 0) has the condition True: the
    compiler's Where node did not simplify it away and MindSpore got ops.where(True, ...)."""
    pytest.importorskip("mindspore")
    spec = spec_of("""
        name: decided_where
        summary: s.
        inputs:
          z: {dtype: float, shape: [N, C]}
          lab: {dtype: int, shape: [N], domain: "[0, C)"}
          x: {dtype: float, shape: [C], optional: true}
        formula: |
          picked = x[lab] * where(argmin(stop_gradient(z), axis=C) == lab, 1.0, 0.5)
          loss = relu(picked) + sum(z, axis=C)
    """, "decided_where")
    c = case(spec, {"N": (3,), "C": (4,)}, seed=6)
    c.inputs["x"] = None
    _check(spec, "mindspore", [c], tmp_path)


@pytest.mark.parametrize("backend", ["jax", "paddle"])
def test_a_condition_on_a_hyperparameter_through_a_function_under_jit(backend, tmp_path):
    """`value if log1p(value) >= 1.51 else -value`: held as a Python bool, the condition was
    `jnp.log1p(value) >= 1.51`, a traced array under jax.jit (TracerBoolConversionError). A
    condition that calls a function is now a tensor select, like a condition on inputs."""
    pytest.importorskip(backend)
    spec = spec_of("""
        name: param_cond
        summary: s.
        inputs:
          x: {dtype: float, shape: ["*S"]}
        params:
          value: {default: 1.51, min: 0.0}
        formula: |
          loss = x * (value if log1p(value) >= 1.51 else -value) + x**2
    """, "param_cond")
    cases = [case(spec, {"S": (3,)}, seed=9)]
    high = case(spec, {"S": (2, 2)}, seed=10)
    high.params = {"value": 4.0}
    rows = verify.verify_spec(spec, modules(spec, tmp_path), {backend: runners()[backend]}, ("float64",),
                              ("graph",), cases + [high])
    assert all(r.ok for r in rows), [r.failures[:2] for r in rows]
    assert all(r.cases == 2 for r in rows)


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_a_guard_whose_condition_is_a_number(backend, tmp_path):
    """sqrt(sigmoid(x - x)): the sqrt guard's condition `sigmoid(0) > 0` has no symbol, but
    SymPy leaves losscc's functions of numbers unevaluated, so it was lowered as a Python
    bool into a tensor select (MindSpore's Select refused it, Paddle read its .shape)."""
    pytest.importorskip(backend)
    spec = spec_of("""
        name: number_guard
        summary: s.
        inputs:
          x: {dtype: float, shape: [N]}
          g: {dtype: float, shape: [N]}
          w: {dtype: float, shape: [N], optional: true}
        formula: |
          loss = w * (sqrt(sigmoid(x - x)) + g)
    """, "number_guard")
    given = case(spec, {"N": (3,)}, seed=12)
    left_out = case(spec, {"N": (4,)}, seed=13)
    left_out.inputs["w"] = None
    _check(spec, backend, [given, left_out], tmp_path)


def test_a_select_between_two_numbers_in_float64_in_mindspore(tmp_path):
    """where(c, 1.0, 0.5) with Python numbers: MindSpore makes a float32 tensor of them, so
    softplus of it lost float64 accuracy (2e-10 relative). Both become tensors of the dtype."""
    pytest.importorskip("mindspore")
    spec = spec_of("""
        name: number_select
        summary: s.
        inputs:
          z: {dtype: float, shape: [N, C]}
          y: {dtype: float, shape: [N]}
          lab: {dtype: int, shape: [N], domain: "[0, C)"}
        formula: |
          w = where(argmin(stop_gradient(z), axis=C) == lab, 1.0, 0.5)
          loss = y * softplus(w)
    """, "number_select")
    _check(spec, "mindspore", [case(spec, {"N": (4,), "C": (3,)}, seed=14)], tmp_path)


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_a_comparison_of_a_product_with_a_select(backend, tmp_path):
    """`w[lab] * where(argmin(...) == lab, 1, 2) + s > 0.5`: SymPy derives a function's
    commutativity from its arguments and a condition has none, so the product was
    non-commutative, hence "not real": the comparison was E203 and a max of it E900."""
    import sympy as sp

    from losscc import ir

    x, lab = sp.symbols("x lab")
    assert (x * ir.Where(sp.Eq(x, lab), 1, 2)).is_commutative
    pytest.importorskip(backend)
    spec = spec_of("""
        name: select_product
        summary: s.
        inputs:
          x: {dtype: float, shape: [N, C]}
          w: {dtype: float, shape: [C]}
          lab: {dtype: int, shape: [N], domain: "[0, C)"}
        formula: |
          t = w[lab] * where(argmin(stop_gradient(x), axis=C) == lab, 1.0, 2.0) + sum(where(x > 0, x, 0), axis=C)
          loss = where(t > 0.5, t, -t) + max(where(t > 0, t, 1.0), min(t, 2.0))
    """, "select_product")
    _check(spec, backend, [case(spec, {"N": (4,), "C": (3,)}, seed=15)], tmp_path)


def test_a_zero_specialisation_that_sympy_makes_complex_infinity(tmp_path):
    """`log(one ** 1.5)` with `min: 0`: the `one == 0` side of the value split was
    log(0) = zoo, which has no lowering (E900); that side keeps the general program."""
    pytest.importorskip("paddle")
    spec = spec_of("""
        name: zero_split
        summary: s.
        inputs:
          x: {dtype: float, shape: [N]}
        params:
          one: {default: 0.25, min: 0.0}
        formula: |
          loss = log(one ** 1.5) + x
    """, "zero_split")
    _check(spec, "paddle", [case(spec, {"N": (3,)}, seed=16)], tmp_path)


def test_negative_literals_keep_float64_in_mindspore_graph_mode():
    """clip(t, -1.17, 1.5): `ms.Tensor(-1.17, dtype)` under ms.jit is -1.1699999570846558 in
    float64 (the minus of the literal is computed in float32; 1e-8 relative off); the code
    now negates the tensor, `-ms.Tensor(1.17, dtype)` (found by the fuzzer, seed 61206)."""
    from pathlib import Path
    pytest.importorskip("mindspore")
    spec = spec_of("""
        name: negative_literals
        summary: s.
        inputs:
          t: {dtype: float, shape: [N, C]}
        formula: |
          loss = logsumexp(clip(t, -1.17, 1.5), axis=C) + max(t, axis=C) * -0.3
    """, "negative_literals")
    rows = verify.run([spec], ("mindspore",), dtypes=("float64",), modes=("graph",), root=Path("."))
    assert rows and all(r.ok for r in rows), [r.failures[:2] for r in rows]


def test_a_gradient_that_is_exactly_zero_is_zero_in_the_reference():
    """-log_softmax(x)[y] + sum(one_hot(y, C) * log_softmax(x)) is 0 for every x: beside an
    ignored label and terms of size 1, its central differences left noise of 1e-92 (1e-112
    refined), and verify held the code's exact 0 to it (relative error 1; found by the
    fuzzer, seed 61206, this spec and case as it saved them)."""
    from losscc.parse import build_program
    from losscc.reference import reference
    spec = spec_of("""
        name: fuzzed
        summary: A fuzzed loss.
        inputs:
          grad: {dtype: float, shape: [N, C, "*D"]}
          scale: {dtype: float, shape: [N, "*D"]}
          d: {dtype: float, shape: [N, "*D"]}
          t: {dtype: float, shape: [N, "*D"]}
          input: {dtype: float, shape: [N, "*D"], domain: "(0, 1)"}
          value: {dtype: int, shape: [N, "*D"], domain: "[0, C)", ignore: w}
        params:
          logp: {default: 0.73, min: 0.0}
          w: {default: -100}
        formula: |
          z = -log_softmax(grad, axis=C)[value] + sum(one_hot(value, C) * log_softmax(grad, axis=C), axis=C)
          half = ((((sqrt(sigmoid(sigmoid((input))))) + z) + scale) + d) + t
        reductions:
          mean: {denominator: input}
        reduction: none
    """, "fuzzed")
    inputs = {"grad": np.array([[0.21875, 3.84375], [-0.28125, 0.796875]]), "scale": np.array([-1.9375, -0.015625]),
              "d": np.array([1.859375, 1.03125]), "t": np.array([0.359375, 1.515625]),
              "input": np.array([0.484375, 0.671875]), "value": np.array([0, -100])}
    r = reference(build_program(spec), inputs, {"logp": 0.73, "w": -100}, {}, ["grad", "scale"])
    assert np.all(r.grads["grad"] == 0) and list(r.grads["scale"]) == [1, 0], r.grads


@pytest.mark.parametrize("backend", ["jax", "paddle", "mindspore"])
@pytest.mark.parametrize("term", ["sign(abs(sqrt(scale)))", "sign(sqrt(scale) - 1)", "floor(exp(scale))",
                                  "sign(abs(d))", "sign(d - 3) * scale", "sign(scale**2 - 1) + floor(d / 3)"])
def test_a_piecewise_constant_of_a_function_of_hyperparameters(backend, term, tmp_path):
    """sign(abs(sqrt(scale))) took the Python-number form `(v > 0) - (v < 0)`, but a function
    of a hyperparameter is a 0-d tensor of the backend: JAX refused bool - bool (TypeError
    in every row; fuzz seed 61231, spec #8)."""
    pytest.importorskip(backend)
    spec = spec_of(f"""
        name: pc_of_fn
        summary: s.
        inputs:
          z: {{dtype: float, shape: ["*S", N]}}
        params:
          scale: {{default: 0.34, gt: 0.0}}
          d: {{default: 2}}
        formula: |
          loss = z * {term} + z**2
    """, "pc_of_fn")
    _check(spec, backend, [case(spec, {"N": (3,), "S": (2,)}, seed=3)], tmp_path, ("float64", "float32"))
