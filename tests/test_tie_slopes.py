"""One-sided slopes at ties size verify's allowances there (losscc/refties.py, docs/verify.md).

At a tie the reference's gradient is the convention (half to each side of max(a, b)), and
code that follows it forms that gradient from terms of the sides' size: GIoU of two equal
boxes sums terms of about 1 / height to 1e-7.  The slopes just off the tie bound the
entry's condition; the convention itself is still what is compared, so a wrong tie
convention fails as before.  Pure NumPy and the reference: no framework here.
"""

from __future__ import annotations

import numpy as np
import pytest

from losscc import compare, verify
from losscc.cases import CaseData
from losscc.parse import build_program
from losscc.reference import reference
from losscc.spec import load_spec, spec_from_text

PAIR = ("name: pair\nsummary: a maximum of two inputs\ninputs:\n  a: {dtype: float, shape: [N]}\n"
        "  b: {dtype: float, shape: [N]}\nformula: |\n  loss = max(a, b) * 3\n")


def _prog(text):
    return build_program(spec_from_text(text, "pair.yaml"))


def test_an_exact_tie_gives_the_one_sided_slopes_and_no_tie_gives_none():
    prog = _prog(PAIR)
    tied = reference(prog, {"a": np.array([1.0, 2.0]), "b": np.array([1.0, 0.0])}, {})
    assert tied.grads["a"].tolist() == pytest.approx([1.5, 3.0])  # the convention: half at the tie
    # just off the tie: a's side has slope 3 on the right, 0 on the left; the larger one counts
    assert tied.tie_slopes.grads["a"].tolist() == pytest.approx([3.0, 3.0], rel=1e-9)
    assert tied.tie_slopes.grads["b"].tolist() == pytest.approx([3.0, 0.0], abs=1e-9)
    # the value's S_i: |a| * 3 + |b| * 3 at the tie, |a| * 3 (b's slope is 0 there) apart
    assert tied.tie_slopes.condition.tolist() == pytest.approx([6.0, 6.0], rel=1e-9)
    apart = reference(prog, {"a": np.array([1.0, 2.0]), "b": np.array([0.5, 0.0])}, {})
    assert apart.tie_slopes is None


def _giou_eq_case():
    spec = load_spec("specs/giou_loss.yaml")
    prog = build_program(spec)
    boxes = np.array([[0.293, -1.926, 0.582, -0.806], [1.203, -0.641, -2.822, -2.108]])
    case = CaseData("extreme_boxes1_eq_boxes2", "extreme", {"boxes1": boxes, "boxes2": boxes.copy()},
                    {"eps": 1e-7}, {}, from_reference=True)
    vals, grads, kinks = verify.expectations(prog, case, "float32")
    return prog, case, vals, grads, kinks


def _float32(prog, case):
    """The generated formula's arithmetic, in float32 NumPy: the convention's tie split, the
    one-minus-ratio rewrite; what a correct float32 program computes at two equal boxes."""
    f = np.float32
    b1, b2 = (case.inputs[n].astype(f) for n in ("boxes1", "boxes2"))
    eps = f(1e-7)
    x1, y1, x2, y2 = b1.T
    x1g, y1g, x2g, y2g = b2.T
    inter = np.where((np.minimum(x2, x2g) > np.maximum(x1, x1g)) & (np.minimum(y2, y2g) > np.maximum(y1, y1g)),
                     (np.minimum(x2, x2g) - np.maximum(x1, x1g)) * (np.minimum(y2, y2g) - np.maximum(y1, y1g)), f(0))
    t3, t6 = (x2 - x1) * (y2 - y1), (x2g - x1g) * (y2g - y1g)
    enc = (np.maximum(x2, x2g) - np.minimum(x1, x1g)) * (np.maximum(y2, y2g) - np.minimum(y1, y1g))
    iou = inter / (t3 + t6 - inter + eps)
    t7 = np.where(iou > 0.5, (t3 + t6 - 2 * inter + eps) / (t3 + t6 - inter + eps), 1 - iou)
    return (enc + inter - t3 - t6) / (eps + enc) + t7


def test_giou_of_equal_boxes_in_float32_passes_and_a_wrong_value_still_fails():
    prog, case, vals, grads, kinks = _giou_eq_case()
    assert grads.ties is not None  # every coordinate is tied with its twin
    none = _float32(prog, case).astype(float)
    assert none[1] == 0.0 and vals["none"][1] > 1e-8  # the inverted pair cancels in float32
    got = {"none": none, "sum": float(none.sum()), "mean": float(none.mean())}
    ok = compare._extreme_check(case, got, {n: np.asarray(g) for n, g in grads.items()}, vals, grads, kinks,
                                "float32", ("none", "sum", "mean"), prog=prog, strict=True)
    assert ok == []
    wrong = dict(got, none=none + np.array([0.0, 0.05]))  # 5% of a unit-sized term: not rounding
    bad = compare._extreme_check(case, wrong, {n: np.asarray(g) for n, g in grads.items()}, vals, grads, kinks,
                                 "float32", ("none",), prog=prog, strict=True)
    assert bad and "value (none)" in bad[0]


def test_a_wrong_tie_convention_still_fails():
    prog, case, vals, grads, kinks = _giou_eq_case()
    right = {n: np.asarray(g, dtype=float) for n, g in grads.items()}
    assert compare._extreme_check(case, vals, right, vals, grads, kinks, "float32", ("none",), prog=prog,
                                  strict=True) == []
    # all of a tie's gradient to one side (a framework's max without the split): off by a side's slope
    lopsided = {n: g + grads.ties.grads[n] * 0.5 for n, g in right.items()}
    fails = compare._extreme_check(case, vals, lopsided, vals, grads, kinks, "float32", ("none",), prog=prog,
                                   strict=True)
    assert any("gradient d/dboxes1" in f for f in fails)


def test_the_slopes_are_held_to_the_work_limits(monkeypatch):
    """No allowance (the stricter check) past the case's work limit or the spec's budget for
    allowances, which the slopes share with the gradient conditions."""
    from losscc import limits
    from losscc import reference as refmod

    prog = _prog(PAIR)
    inputs = {"a": np.array([1.0, 2.0]), "b": np.array([1.0, 0.0])}
    with refmod.spec_budget():
        refmod._COND_SPENT[-1] = limits.MAX_CONDITION_SPEC_WORK
        assert reference(prog, inputs, {}, charge=True).tie_slopes is None
        assert reference(prog, inputs, {}, charge=False).tie_slopes is not None  # drawn cases: not charged
    with refmod.spec_budget():
        assert reference(prog, inputs, {}, charge=True).tie_slopes is not None
        assert refmod._COND_SPENT[-1] > 0
    monkeypatch.setattr(limits, "MAX_REFERENCE_WORK", refmod.reference_work(prog, inputs, {}, 9))
    assert reference(prog, inputs, {}).tie_slopes is None  # 1 + 2 * 4 runs fit, 1 + 4 * 4 do not


def test_a_condition_at_its_tie_adds_no_jump():
    """A `where` at its condition's tie stays on the branch taken: only that branch feeds the
    gradient, and the other branch's size (or a jump) is no rounding error of the program."""
    prog = _prog("name: jump\nsummary: a jump beside a tie\ninputs:\n  x: {dtype: float, shape: [N]}\n"
                 "  y: {dtype: float, shape: [N]}\nformula: |\n  loss = where(x > 1, 1e6 * x, x) + max(y, 0.5)\n")
    ref = reference(prog, {"x": np.array([1.0, 1.0]), "y": np.array([0.5, 2.0])}, {})
    assert ref.tie_slopes is not None  # max(y, 0.5) is tied at y = 0.5
    assert ref.tie_slopes.grads["x"].tolist() == pytest.approx([1.0, 1.0], rel=1e-9)  # not 1e6
    assert ref.tie_slopes.grads["y"].tolist() == pytest.approx([1.0, 1.0], rel=1e-9)
    only_jump = reference(prog, {"x": np.array([1.0, 1.0]), "y": np.array([2.0, 2.0])}, {})
    assert only_jump.tie_slopes is None  # a condition's tie alone computes nothing


def _checks(text, inputs, wrong_vals=None, wrong_grads=None, dtype="float32"):
    """(extreme failures, ordinary failures) of a wrong result against the reference, and
    whether the point had a tie."""
    prog = _prog(text)
    case = CaseData("c", "extreme", {k: np.asarray(v, dtype=float) for k, v in inputs.items()}, {}, {},
                    from_reference=True)
    vals, grads, kinks = verify.expectations(prog, case, dtype)
    got_v = {"none": np.asarray(vals["none"], float)}
    got_g = {n: np.asarray(g, float) for n, g in grads.items()}
    if wrong_vals:
        got_v["none"] = wrong_vals(got_v["none"])
    if wrong_grads:
        got_g.update(wrong_grads(got_g))
    row = type("Row", (), {"value_err": 0.0, "value_rel": None, "grad_err": 0.0, "grad_rel": None,
                           "skipped_kinks": 0})()
    return (compare._extreme_check(case, got_v, got_g, vals, grads, kinks, dtype, ("none",), prog=prog, strict=True),
            compare._check_case(row, case, got_v, got_g, vals, grads, kinks, dtype, ("none",), prog=prog,
                                strict=True), grads.ties is not None)


STEEP = ("name: steep\nsummary: a steep stretch beside a tie\ninputs:\n  x: {dtype: float, shape: [N]}\n"
         "  c: {dtype: float, shape: [N]}\n  z: {dtype: float, shape: [N]}\nformula: |\n"
         "  loss = x + exp(1e7 * (x - c)) + abs(z)\n")


def test_a_steep_stretch_near_the_point_is_no_allowance():
    """Red-team: a 1e-5 step reached exp(1e7 (x - c)) 42 ulps away and made 4.8e26 the slope
    of an entry whose gradient is 1, while the only tie was abs(z) of another sample: a value
    25 times off passed.  The step is now the gradient's own (1e-15 relative)."""
    inputs = {"x": [0.5, 1.0, 1e7], "c": [3.0, 1 + 42 * 2.0 ** -23, 2e7], "z": [0.0, 1.0, 1.0]}
    ext, ordinary, tied = _checks(STEEP, inputs, wrong_vals=lambda v: v + np.array([0.0, 50.0, 0.0]))
    assert tied and ext and ordinary
    ext, ordinary, _ = _checks(STEEP, inputs, wrong_grads=lambda g: {"x": g["x"] + np.array([0.0, 15.0, 0.0])})
    assert ordinary


def test_a_kink_near_the_point_is_no_tie():
    """Red-team: max(x, 1e8 (x - c)) with its kink 8 ulps from x is a near tie, not an exact
    one: no slopes (its gradient is a kink, not compared), and a value 45% off fails."""
    text = ("name: near\nsummary: a kink near the point\ninputs:\n  x: {dtype: float, shape: [N]}\n"
            "  c: {dtype: float, shape: [N]}\nformula: |\n  loss = max(x, 1e8 * (x - c)) + 1\n")
    inputs = {"x": [0.5, 1.0, 1e6], "c": [3.0, 1 + 8 * 2.0 ** -23, 2e6]}
    ext, ordinary, tied = _checks(text, inputs, wrong_vals=lambda v: v + np.array([0.0, 0.9, 0.0]))
    assert not tied and ext and ordinary


def test_one_samples_tie_is_no_allowance_for_another_samples_value():
    """Red-team: a shared scalar t in w * abs(t - y), tied in sample 0 with w = 1e6, spread its
    slope of 1e6 over every sample's S_i, and samples 1-3 off by 0.9 passed.  S_i now takes
    each element's own one-sided slopes."""
    text = ("name: leak\nsummary: a shared input\ninputs:\n  x: {dtype: float, shape: [N]}\n"
            "  w: {dtype: float, shape: [N]}\n  y: {dtype: float, shape: [N]}\n  t: {dtype: float, shape: []}\n"
            "formula: |\n  loss = x + w * abs(t - y)\n")
    inputs = {"x": [1.0, 2.0, 3.0, 4.0], "w": [1e6, 0.0, 0.0, 0.0], "y": [1.0, 5.0, 7.0, 9.0], "t": 1.0}
    ext, ordinary, tied = _checks(text, inputs, wrong_vals=lambda v: v + np.array([0.0, 0.9, 0.9, 0.9]))
    assert tied and ordinary and "element [1]" in ordinary[0]
