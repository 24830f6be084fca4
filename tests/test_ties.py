"""Gradients at ties and kinks (docs/spec.md, "Gradients at ties and kinks").

Every selecting function is evaluated exactly at its ties, in both backends, eager and
graph, float64, and its gradient compared with the documented convention, which the
reference evaluator must give too (it makes its selections at the unperturbed point):

* max/min of two differentiated values: half to each side (torch.maximum/minimum);
* max/min against a bound (a number or a hyperparameter): all to the tensor (torch.clamp,
  the hinge of margin losses);
* relu: 0 at 0 (torch.relu); clip: 1 at either bound (torch.clamp); abs: 0 at 0;
* where / Piecewise: the gradient of the branch whose condition holds at the point;
* max/min over an axis: shared evenly among the tied entries (torch.amax).
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from losscc import verify
from losscc.backends import get
from losscc.emit import compile_spec
from losscc.parse import build_program
from losscc.reference import reference
from losscc.spec import spec_from_text
from tests.backend_util import BACKENDS

TERMS = {  # input(s) -> (term of the loss, values at and around the ties, expected gradients)
    ("a", "b"): ("max(a, b)", ([0, 1, -1, 2], [0, 1, 3, -2]), ([0.5, 0.5, 0, 1], [0.5, 0.5, 1, 0])),
    ("c", "d"): ("min(c, d)", ([0, 1, -1, 2], [0, 1, 3, -2]), ([0.5, 0.5, 1, 0], [0.5, 0.5, 0, 1])),
    ("e",): ("max(e, 0)", ([0, 1, -1, 2],), ([1, 1, 0, 1],)),
    ("f",): ("min(f, margin)", ([1, 0, 2, 1],), ([1, 1, 0, 1],)),
    ("g",): ("relu(g)", ([0, 1, -1, 0],), ([0, 1, 0, 0],)),
    ("h",): ("clip(h, 0, 1)", ([0, 1, -1, 2],), ([1, 1, 0, 0],)),
    ("k",): ("abs(k)", ([0, 1, -1, 0],), ([0, 1, -1, 0],)),
    ("m", "n"): ("where(m >= n, m, n)", ([0, 1, -1, 2], [0, 1, 3, -2]), ([1, 1, 0, 1], [0, 0, 1, 0])),
    ("p",): ("where(p > 0, 2 * p, -p)", ([0, 1, -1, 0],), ([-1, 2, -1, -1],)),
    ("q",): ("Piecewise((3 * q, q <= 0), (q, True))", ([0, 1, -1, 0],), ([3, 1, 3, 3],)),
    ("r", "s"): ("max(r, s, 0.5)", ([0.5, 0, 1, 0.5], [0.5, 0, 0.5, 2]), ([0.5, 0, 1, 0], [0.5, 0, 0, 1])),
    ("u",): ("max(u - margin, 0) + max(margin - u, 0)", ([1, 1, 0, 3],), ([0, 0, -1, 1],)),
}
NAMES = [n for names in TERMS for n in names]
INPUTS = {n: np.array(v, dtype=float) for names, (_, vals, _) in TERMS.items() for n, v in zip(names, vals)}
EXPECTED = {n: np.array(g, dtype=float) for names, (_, _, grads) in TERMS.items() for n, g in zip(names, grads)}

ELEMENTWISE = (
    "name: ties\nsummary: every selection at its ties\ninputs:\n"
    + "".join(f"  {n}: {{dtype: float, shape: [N]}}\n" for n in NAMES)
    + "params:\n  margin: {default: 1.0}\n"
    + "formula: |\n  loss = " + " + ".join(t for t, _, _ in TERMS.values()) + "\n"
)

Z = np.array([[1.0, 1.0, 0.0], [2.0, 2.0, 2.0], [0.0, 3.0, 1.0], [-1.0, -1.0, 4.0]])
AXIS = (
    "name: axis_ties\nsummary: maximum and minimum over an axis at ties\ninputs:\n"
    "  z: {dtype: float, shape: [N, C]}\n  w: {dtype: float, shape: [N, C]}\n"
    "formula: |\n  loss = max(z, axis=C) - 2 * min(w, axis=C)\n"
)
Z_GRAD = np.array([[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
W_GRAD = -2 * np.array([[0.0, 0.0, 1.0], [1 / 3, 1 / 3, 1 / 3], [1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])

CASES = {
    "elementwise": (ELEMENTWISE, INPUTS, EXPECTED),
    "axis": (AXIS, {"z": Z, "w": Z}, {"z": Z_GRAD, "w": W_GRAD}),
}


def _module(text: str, backend: str, tmp_path):
    spec = spec_from_text(text, "<ties>")
    tag = f"ties_{hashlib.sha256(text.encode()).hexdigest()[:10]}_{backend}"
    path = tmp_path / f"{tag}.py"
    path.write_text(compile_spec(spec, get(backend)))
    return spec, verify.load_module(path, tag)


@pytest.mark.parametrize("case", sorted(CASES))
def test_reference_gives_the_convention_at_ties(case):
    text, inputs, expected = CASES[case]
    ref = reference(build_program(spec_from_text(text, "<ties>")), inputs, {})
    for name, g in expected.items():
        assert not ref.kinks[name].any(), name
        np.testing.assert_allclose(ref.grads[name], g, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_code_gives_the_convention_at_ties(case, backend, mode, tmp_path):
    text, inputs, expected = CASES[case]
    spec, mod = _module(text, backend, tmp_path)
    data = verify.CaseData("ties", "test", inputs, {})
    _, grads = verify.runner(backend).run(mod, spec, data, "float64", mode, ["none"])
    for name, g in expected.items():
        np.testing.assert_allclose(grads[name], g, atol=1e-12, err_msg=f"{backend} {mode} d/d{name}")


def test_conventions_are_not_vacuous():
    """A different convention is told apart: relu(0) would be 1 under max(x, 0), max(a, b)
    at a tie would be 1/0 under where(a >= b, a, b)."""
    assert EXPECTED["g"][0] != EXPECTED["e"][0]
    assert EXPECTED["a"][0] != EXPECTED["m"][0]


def test_max_with_an_argument_that_folds_to_a_number(tmp_path):
    """`x - x` folds to 0 but keeps its tensor type: it is still a bound (a clip), not a
    tensor operand (Paddle's maximum takes no Python number)."""
    from tests.codegen_util import case, check, modules, spec_of

    spec = spec_of("""
        name: folded_max
        summary: s.
        inputs:
          x: {dtype: float, shape: [N]}
          y: {dtype: float, shape: [N]}
        formula: loss = max(x - x, exp(sin(y)) - 1.5, -0.78)
    """)
    # (sin, not tanh: every framework's tanh gradient is (1 - t)(1 + t) of the rounded
    # t = tanh(y), relative error eps / (1 - t), 1e-12 at |y| = 4.6 in float64; docs/verify.md)
    mods = modules(spec, tmp_path)
    check(spec, mods, [case(spec, {"N": (5,)}, seed=3)], modes=("eager", "graph"))


SPAN = """name: span_sq
summary: a squared difference over the span of two shifted intervals
inputs:
  x: {dtype: float, shape: [N]}
  y: {dtype: float, shape: [N]}
formula: |
  span = max(x + 2, y + 1) - min(x - 2, y - 1)
  loss = (x - y)**2 / span
"""


def test_a_tie_that_only_rounding_makes_is_a_kink_not_a_convention():
    """x - 2 and y - 1 at x = 0.855, y = -0.145 differ by 2.8e-17 in exact arithmetic on the
    float64 values and are equal once rounded: a backend applies the tie convention (half to
    each side), the exact reference picks one side. The entry is a kink (not compared) at the
    dtype's resolution; an exact tie (x = 0.5, y = -0.5) keeps its convention."""
    prog = build_program(spec_from_text(SPAN, "<span>"))
    x, y = np.array([0.855, 0.5, 3.0]), np.array([-0.145, -0.5, 1.0])
    assert (x[0] - 2) == (y[0] - 1)  # a tie in float64
    case = verify.CaseData("near", "test", {"x": x, "y": y}, {}, from_reference=True)
    _, grads, kinks = verify.expectations(prog, case)
    assert list(kinks["x"]) == [True, False, False] and list(kinks["y"]) == [True, False, False]
    assert grads["x"][1] == pytest.approx(2 * 1.0 / 4 - 1.0 / 16 * 0.5)  # the exact tie: half to x's side
    ref = reference(prog, {"x": x, "y": y}, {})  # without near_tol: the exact reading, no kink
    assert not ref.kinks["x"].any()


@pytest.mark.parametrize("backend", BACKENDS)
def test_verify_passes_a_correct_loss_at_a_rounding_tie(backend, tmp_path):
    spec = spec_from_text(SPAN, "<span>")
    path = tmp_path / f"span_{backend}.py"
    path.write_text(compile_spec(spec, get(backend)))
    mod = verify.load_module(path, f"span_tie_{backend}")
    case = verify.CaseData("near", "test", {"x": np.array([0.855, 0.25]), "y": np.array([-0.145, 1.5])}, {},
                           from_reference=True)
    rows = verify.verify_spec(spec, {backend: mod}, {backend: verify.runner(backend)}, ("float64", "float32"),
                              ("eager",), [case])
    assert all(r.ok for r in rows), [r.failures[:2] for r in rows]


def _kinks(formula: str, inputs: dict, dtype: str) -> dict:
    names = "".join(f"  {n}: {{dtype: float, shape: [N]}}\n" for n in inputs)
    prog = build_program(spec_from_text(f"name: t\nsummary: s.\ninputs:\n{names}formula: |\n  loss = {formula}\n", "<t>"))
    case = verify.CaseData("near", "test", {k: np.array(v) for k, v in inputs.items()}, {}, from_reference=True)
    return {k: list(v) for k, v in verify.expectations(prog, case, dtype)[2].items()}


def test_an_entry_that_feeds_only_the_side_not_taken_is_a_kink_at_a_near_tie():
    """min(1 + 1e-12 x, 1 + y) at x = -1, y = 0: float32 rounds both sides to 1, a backend
    gives each side half, the reference takes x's side.  Moving y does not move the frozen
    loss, so y was compared (expected 0, got 0.5); both sides' slopes differ in y."""
    kinks = _kinks("min(1 + 1e-12 * x, 1 + y)", {"x": [1.0, -1.0, 3.0], "y": [0.0, 0.0, -1.0]}, "float32")
    assert kinks == {"x": [True, True, False], "y": [True, True, False]}
    assert _kinks("min(1 + 1e-12 * x, 1 + y)", {"x": [-1.0], "y": [0.0]}, "float64") == {"x": [False], "y": [False]}


def test_a_near_tie_of_sides_with_equal_slopes_is_not_a_kink():
    """max(s, s * 1.000000000000001) is a near tie at every element: it made every entry a
    kink, and a wrong gradient of the rest of the loss (sin off by 0.05) passed.  Both sides
    move alike, so whichever the dtype picks, the gradient is the same: no kink."""
    assert _kinks("max(x, x * 1.000000000000001) + sin(x)", {"x": [0.3, -2.0, 5.0]}, "float64") == \
        {"x": [False, False, False]}


def test_a_condition_at_a_near_tie_makes_a_kink_of_the_entries_whose_branches_differ():
    """where(x > 1 + 1e-12 y, x**2, x) at x = 1 + 2e-12, y = 1: float32 cannot tell the sides
    apart.  The branches' slopes in x differ (2x against 1): x is a kink; in y both are 0."""
    kinks = _kinks("where(x > 1 + 1e-12 * y, x**2, x)", {"x": [1.000000000002, 3.0], "y": [1.0, 1.0]}, "float32")
    assert kinks == {"x": [True, False], "y": [False, False]}


@pytest.mark.parametrize("backend", BACKENDS)
def test_verify_applies_float32_near_ties_to_a_hand_case_float32_holds(backend, tmp_path):
    """A hand case whose inputs float32 holds exactly used its float64 expectations, kinks
    included, in the float32 rows: the near tie of min(1 + 1e-12 x, 1 + y) failed there."""
    spec = spec_from_text("name: tmin\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\n"
                          "  y: {dtype: float, shape: [N]}\nformula: |\n  loss = min(1 + 1e-12 * x, 1 + y)\n", "<t>")
    path = tmp_path / f"tmin_{backend}.py"
    path.write_text(compile_spec(spec, get(backend)))
    mod = verify.load_module(path, f"tmin_tie_{backend}")
    case = verify.CaseData("hand", "test", {"x": np.array([1.0, -1.0]), "y": np.array([0.0, 0.0])}, {},
                           expected={"none": np.array([1.0, 0.999999999999])})
    rows = verify.verify_spec(spec, {backend: mod}, {backend: verify.runner(backend)}, ("float32",), ("eager",), [case])
    assert rows and all(r.ok for r in rows), [r.failures[:2] for r in rows]


CANCELLING = """
name: cancelling
summary: s.
inputs:
  x: {dtype: float, shape: [N]}
  t: {dtype: float, shape: [N]}
  y: {dtype: float, shape: [N]}
formula: |
  loss = max(3 * x - t, 0) + abs(3 * y - t) + 2 * where(3 * x - t > 0, x, -x)
reduction: mean
cases:
  - id: rounding_tie
    inputs: {x: [0.1, 0.2], t: [0.30000000000000004, 0.1], y: [0.1, 0.5]}
    expected: {none: [-0.2, 2.3]}
"""


def test_a_tie_that_a_cancelling_side_hides_is_a_near_tie():
    """3x - t at x = 0.1, t = 0.30000000000000004 is -2.8e-17 exactly and 0 in float64
    arithmetic: near a tie relative to the terms it cancels (0.6), not to itself, so max,
    abs and the select there are kinks (correct code failed verify on them); the entries of
    the other element, far from any tie, are still compared."""
    prog = build_program(spec_from_text(CANCELLING, "c.yaml"))
    inputs = {"x": np.array([0.1, 0.2]), "t": np.array([0.30000000000000004, 0.1]), "y": np.array([0.1, 0.5])}
    c = verify.CaseData("rounding_tie", "test", inputs, {}, from_reference=True)
    for dtype in ("float64", "float32"):
        kinks = verify.expectations(prog, c, dtype)[2]
        assert all(list(kinks[n]) == [True, False] for n in ("x", "t", "y")), (dtype, kinks)


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_correct_code_passes_at_a_cancelling_tie(backend, tmp_path):
    from pathlib import Path
    spec = spec_from_text(CANCELLING, "c.yaml")
    rows = verify.run([spec], (backend,), dtypes=("float64",), modes=("eager",), root=Path("."), n_random=0)
    assert rows and all(r.ok for r in rows), [r.failures[:3] for r in rows]


ROWMAX = """
name: rowmax
summary: s.
inputs:
  x: {dtype: float, shape: [N, C]}
  z: {dtype: float, shape: [N, C]}
formula: |
  loss = max(x - z, axis=C) + sum(sin(x), axis=C)
"""
_ROWMAX_X = np.array([[0.5, 0.5 + 2.0**-24, 0.1], [0.5, 0.25, 0.1]])
_ROWMAX_Z = np.full((2, 3), 1000.0)


def test_a_near_tie_of_the_maximum_over_an_axis_is_a_kink():
    """max(x - z, axis=C) at x = 0.5 and 0.5 + 2**-24 (both float32), z = 1000: float32 rounds
    both differences to -999.5, a backend shares the gradient, the exact reference gives it
    to the second entry (verify failed correct code: 0.5 against 0).  Both entries are kinks
    of that row; the third entry (far below), the other row and sin's part are compared."""
    prog = build_program(spec_from_text(ROWMAX, "<rowmax>"))
    c = verify.CaseData("near", "test", {"x": _ROWMAX_X, "z": _ROWMAX_Z}, {}, from_reference=True)
    kinks = verify.expectations(prog, c, "float32")[2]
    want = [[True, True, False], [False, False, False]]
    assert [list(r) for r in kinks["x"]] == want and [list(r) for r in kinks["z"]] == want
    ref = reference(prog, {"x": _ROWMAX_X, "z": _ROWMAX_Z}, {})  # the exact reading: no kink
    assert not ref.kinks["x"].any() and list(ref.grads["x"][0] - np.cos(_ROWMAX_X[0])) == pytest.approx([0, 1, 0])


def test_a_near_tie_of_the_maximum_that_the_loss_does_not_feel_is_not_a_kink():
    """w * max(...) at w = 0: whichever entry the rounding picks, no gradient changes, so
    nothing is a kink (the nudge of the reduced maximum reaches the loss as zero)."""
    spec = ROWMAX.replace("loss = max(", "loss = w * max(").replace(
        "  z: {dtype: float, shape: [N, C]}\n", "  z: {dtype: float, shape: [N, C]}\n  w: {dtype: float, shape: [N]}\n")
    prog = build_program(spec_from_text(spec, "<rowmax0>"))
    c = verify.CaseData("near", "test", {"x": _ROWMAX_X, "z": _ROWMAX_Z, "w": np.array([0.0, 1.0])}, {},
                        from_reference=True)
    kinks = verify.expectations(prog, c, "float32")[2]
    assert not kinks["x"].any() and not kinks["z"].any()
    c = verify.CaseData("near", "test", {"x": _ROWMAX_X, "z": _ROWMAX_Z, "w": np.array([2.0, 1.0])}, {},
                        from_reference=True)
    assert verify.expectations(prog, c, "float32")[2]["x"][0].tolist() == [True, True, False]


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_correct_code_passes_at_a_near_tie_of_the_maximum(backend, tmp_path):
    spec = spec_from_text(ROWMAX, "<rowmax>")
    path = tmp_path / f"rowmax_{backend}.py"
    path.write_text(compile_spec(spec, get(backend)))
    mod = verify.load_module(path, f"rowmax_tie_{backend}")
    case = verify.CaseData("near", "test", {"x": _ROWMAX_X, "z": _ROWMAX_Z}, {}, from_reference=True)
    rows = verify.verify_spec(spec, {backend: mod}, {backend: verify.runner(backend)}, ("float32", "float64"),
                              ("eager",), [case])
    assert rows and all(r.ok for r in rows), [r.failures[:2] for r in rows]
