"""Red-team round 15 against verify's allowances: wrong results that passed.

1. One loss element that is not finite (or one huge element) made every entry of every
   sample a kink: the other samples' gradients, all zeroed, passed (poisson_nll's own extreme
   case `extreme_input_1e+04` did so).  An entry is now blind only to the elements it feeds
   (by the layout, or all where the loss couples its elements), and its rounding noise comes
   from the elements it moves (losscc/refdiff.py).
2. The value's condition S_i spread a shared input's (or a learnable's) derivative of the
   summed loss over every element: one sample's 1e7 let another's value be off by 5.  S_i is
   now the reference's per element, sum of |x_j| |d l_i / d x_j|.
Pure NumPy and the reference: no framework here.
"""

from __future__ import annotations

import numpy as np

from losscc import compare, verify
from losscc.cases import CaseData
from losscc.draws import extreme_cases
from losscc.parse import build_program
from losscc.spec import load_spec, spec_from_text

REDS = ("none", "sum", "mean")


def _row():
    return type("Row", (), {"value_err": 0.0, "value_rel": None, "grad_err": 0.0, "grad_rel": None,
                            "skipped_kinks": 0})()


def _fails(prog, inputs, dtype, wrong_vals=None, wrong_grads=None, source="random"):
    case = CaseData("c", source, {k: np.asarray(v, dtype=float) for k, v in inputs.items()}, {}, {},
                    from_reference=True)
    vals, grads, kinks = verify.expectations(prog, case, dtype)
    got_v = {r: np.asarray(vals[r], float) for r in REDS}
    got_g = {n: np.asarray(g, float) for n, g in grads.items()}
    if wrong_vals:
        got_v["none"] = wrong_vals(got_v["none"])
        got_v["sum"], got_v["mean"] = got_v["none"].sum(), got_v["none"].mean()
    if wrong_grads:
        got_g.update(wrong_grads(got_g))
    ordinary = compare._check_case(_row(), case, got_v, got_g, vals, grads, kinks, dtype, REDS, prog=prog,
                                   strict=True)
    extreme = compare._extreme_check(case, got_v, got_g, vals, grads, kinks, dtype, REDS, prog=prog, strict=True)
    right = compare._check_case(_row(), case, {r: np.asarray(vals[r], float) for r in REDS},
                                {n: np.asarray(g, float) for n, g in grads.items()}, vals, grads, kinks, dtype,
                                REDS, prog=prog, strict=True)
    assert right == [], right  # the right answer still passes
    return ordinary, extreme


def _prog(text):
    return build_program(spec_from_text(text, "x.yaml"))




def test_an_infinite_element_leaves_the_other_samples_gradients_compared():
    prog = _prog("name: b\nsummary: s\ninputs:\n  p: {dtype: float, shape: [N], domain: \"[0, 1]\"}\n"
                 "  x: {dtype: float, shape: [N]}\n  y: {dtype: float, shape: [N]}\nformula: |\n"
                 "  loss = -log(p) + (x - y)**2\n")
    inputs = {"p": [0.0, 0.5, 0.25, 0.75], "x": [1.0, 2.0, 3.0, 4.0], "y": [0.0, 0.5, 1.0, 1.5]}
    for dtype in ("float32", "float64"):
        ordinary, extreme = _fails(prog, inputs, dtype, wrong_grads=lambda g: {n: np.zeros_like(v) for n, v in g.items()})
        assert ordinary and extreme, dtype


def test_poisson_nll_at_its_own_extreme_case_compares_the_finite_sample():
    spec = load_spec("specs/poisson_nll.yaml")
    prog = build_program(spec)
    (case,) = [c for c in extreme_cases(spec, 0) if c.id == "extreme_input_1e+04"]
    vals, grads, kinks = verify.expectations(prog, case, "float64")
    assert not np.asarray(kinks["input"]).reshape(-1)[np.isfinite(np.asarray(grads["input"]).reshape(-1))].all()
    zero = {n: np.zeros_like(np.asarray(g, float)) for n, g in grads.items()}
    got_v = {r: np.asarray(vals[r], float) for r in vals}
    fails = compare._extreme_check(case, got_v, zero, vals, grads, kinks, "float64", tuple(vals), prog=prog,
                                   strict=True)
    assert any("gradient d/dinput" in f for f in fails), fails


def test_a_shared_input_adds_to_each_element_only_what_it_moves_of_it():
    prog = _prog("name: sh\nsummary: s\ninputs:\n  x: {dtype: float, shape: [N]}\n  y: {dtype: float, shape: [N]}\n"
                 "  t: {dtype: float, shape: []}\nformula: |\n  loss = x + t * y\n")
    inputs = {"x": [1.0, 2.0, 3.0, 4.0], "y": [1e7, 0.0, 0.0, 0.0], "t": 1.0}
    ordinary, extreme = _fails(prog, inputs, "float32", wrong_vals=lambda v: v + np.array([0.0, 5.0, 5.0, 5.0]))
    assert any("value (none)" in f for f in ordinary) and any("value (none)" in f for f in extreme)


def test_a_value_where_the_reference_overflows_is_held_to_inf():
    """`exp(x) - 1` at x = 100 in float32: inf (or as large, or NaN) passes, -1 does not."""
    prog = _prog("name: o\nsummary: s\ninputs:\n  x: {dtype: float, shape: [N]}\nformula: |\n  loss = exp(x) - 1\n")
    case = CaseData("c", "extreme", {"x": np.array([100.0, 1.0])}, {}, {}, from_reference=True)
    vals, grads, kinks = verify.expectations(prog, case, "float32")

    def fails(none):
        got = {"none": np.asarray(none, float)}
        return compare._extreme_check(case, got, {n: np.asarray(g, float) for n, g in grads.items()}, vals, grads,
                                      kinks, "float32", ("none",), prog=prog, strict=True)

    e1 = float(np.expm1(np.float32(1.0)))
    assert fails([np.inf, e1]) == [] and fails([np.nan, e1]) == [] and fails([3e38, e1]) == []
    bad = fails([-1.0, e1])
    assert bad and "overflows float32" in bad[0]


def test_the_extreme_suite_moves_learnables_too():
    """Fresh-loss trial 15: learnables were drawn near 0 in every case, so a learnable logit
    scale never made a batch confident in any check.  Each learnable now takes 1e-4, 3 and 10
    (times a draw in [0.5, 1]), with its signs drawn and flipped, the inputs left as drawn."""
    spec = load_spec("specs/uncertainty_multitask.yaml")
    cases = {c.id: c for c in extreme_cases(spec, 0)}
    (name,) = [lr.name for lr in spec.learnable]
    tags = [f"extreme_{name}_{s}{f}" for s in ("1e-04", "3e+00", "1e+01") for f in ("", "_flipped")]
    assert all(t in cases for t in tags), sorted(cases)
    base = cases[tags[2]]
    assert np.all(np.abs(base.learnable[name]) >= 1.5) and np.all(np.abs(base.learnable[name]) <= 3.0)
    assert np.array_equal(cases[tags[3]].learnable[name], -base.learnable[name])
    others = [c for t, c in cases.items() if t not in tags]
    assert all(np.array_equal(c.learnable[name], others[0].learnable[name]) for c in others)
