"""Stability: the naive focal loss compiles to finite, correct code at logits of 1e4 (float32),
and the extreme-input suite passes for every spec (eager here; `losscc verify --extreme`
adds graph mode)."""

import warnings
from pathlib import Path

import numpy as np
import pytest

from losscc import verify
from losscc.backends import get
from losscc.cases import CaseData
from losscc.emit import compile_spec, find_specs, load_all
from losscc.parse import build_program
from losscc.spec import load_spec, spec_from_text
from tests import known_gaps
from tests.backend_util import AVAILABLE, BACKENDS

ROOT = Path(__file__).resolve().parent.parent
SPECS = load_all(find_specs([str(ROOT / "specs")]))

NAIVE_FOCAL = """
name: naive_focal
summary: Focal loss as commonly hand-written (softmax, gather, log(p + 1e-8)).
inputs:
  logits: {dtype: float, shape: [N, C]}
  label: {dtype: int, shape: [N], domain: "[0, C)"}
params:
  alpha: {default: 0.25, min: 0}
  gamma: {default: 2.0, min: 0}
formula: |
  p = softmax(logits, axis=C)[label]
  loss = -alpha * (1 - p)**gamma * log(p + 1e-8)
"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_naive_focal_is_finite_and_correct_at_1e4(backend, mode, tmp_path):
    spec = spec_from_text(NAIVE_FOCAL, "naive_focal.yaml")
    path = tmp_path / f"naive_focal_{backend}.py"
    path.write_text(compile_spec(spec, get(backend)))
    mod = verify.load_module(path, f"naive_focal_{backend}_{mode}")
    logits = np.array([[1e4, -1e4, 0.0], [1e4, -1e4, 0.0], [3.0, 1.0, -2.0]])
    label = np.array([0, 1, 2])
    case = CaseData("logits_1e4", "test", {"logits": logits, "label": label}, {}, from_reference=True)
    exp_vals, exp_grads, _ = verify.expectations(build_program(spec), case)
    vals, grads = verify.runner(backend).run(mod, spec, case, "float32", mode, ["none", "sum", "mean"])
    for red in ("none", "sum", "mean"):
        assert np.all(np.isfinite(vals[red]))
        np.testing.assert_allclose(vals[red], exp_vals[red], rtol=1e-5)
    assert np.all(np.isfinite(grads["logits"]))
    np.testing.assert_allclose(grads["logits"], exp_grads["logits"], rtol=1e-5, atol=1e-6)
    # the row whose label has probability exp(-2e4): loss = alpha * log(1e8), not inf
    assert vals["none"][1] == pytest.approx(0.25 * np.log(1e8), rel=1e-5)


# each spec in one backend, taken in turn (the CI budget); `losscc verify --extreme` runs
# every backend and both modes
EXTREME_PLAN = [(spec, AVAILABLE[k % len(AVAILABLE)]) for k, spec in enumerate(SPECS)] if AVAILABLE else []


@pytest.mark.parametrize("spec,backend", EXTREME_PLAN, ids=lambda v: getattr(v, "name", v))
def test_extreme_inputs_eager(spec, backend):
    """Every row passes, but for the per-element check of a listed gap (tests/known_gaps.py);
    a listed gap that passes is reported as a warning, to be removed from the list."""
    rows = verify.run([spec], (backend,), dtypes=("float32",), modes=("eager",), root=ROOT, extreme=True)
    assert [r.backend for r in rows] == [backend]
    for row in rows:
        assert row.cases > 0
        bad = known_gaps.unexplained(spec.name, row.failures, row.backend)
        assert not bad, f"{row.backend}: {bad}"
        fixed = known_gaps.stale(spec.name, row.failures, row.backend)
        if fixed:
            warnings.warn(f"{spec.name}/{row.backend}: listed gaps pass here; if they pass in every "
                          f"backend, remove them from tests/known_gaps.py: {fixed}", stacklevel=1)


def test_every_backend_runs_some_extreme_spec():
    assert {b for _, b in EXTREME_PLAN} == set(AVAILABLE)


def test_a_listed_gap_excuses_only_its_per_element_check():
    some = next(iter(known_gaps.GAPS.items()))
    spec, (_, gaps) = some
    case, what = min(gaps)
    listed = f"{case}: {what} relative error 1 at element [0]: got 0, expected 1"
    assert known_gaps.unexplained(spec, [listed]) == []
    assert known_gaps.unexplained("not_listed", [listed]) == [listed]
    other = f"{case}_other: {what} relative error 1 at element [0]: got 0, expected 1"
    assert known_gaps.unexplained(spec, [other]) == [other]
    norm = f"{case}: {what} off by 3 (norm-wise) at element [0]: got 0, expected 1"
    nan = f"{case}: {what} is NaN at element [0] (expected 1)"
    assert known_gaps.unexplained(spec, [norm, nan]) == [norm, nan]
    assert (case, what) not in known_gaps.stale(spec, [listed])
    assert (case, what) in known_gaps.stale(spec, [])


def test_clip_guard_limits_logits(tmp_path):
    text = NAIVE_FOCAL.replace("name: naive_focal", "name: clipped").replace(
        "formula: |", "guards: {clip: 50}\nformula: |")
    spec = spec_from_text(text, "clipped.yaml")
    path = tmp_path / "clipped.py"
    path.write_text(compile_spec(spec, get("paddle")))
    assert "paddle.clip(logits" in path.read_text()
    mod = verify.load_module(path, "clipped_paddle")
    logits = np.array([[1e4, -1e4, 0.0], [80.0, -80.0, 0.0]])
    case = CaseData("clip", "test", {"logits": logits, "label": np.array([1, 1])}, {}, from_reference=True)
    exp_vals, exp_grads, _ = verify.expectations(build_program(spec), case)
    vals, grads = verify.runner("paddle").run(mod, spec, case, "float64", "eager", ["none"])
    np.testing.assert_allclose(vals["none"], exp_vals["none"], rtol=1e-10, atol=1e-12)
    # both rows clip to +-50, so they have the same loss; the gradient stops beyond the clip
    assert vals["none"][0] == pytest.approx(vals["none"][1], rel=1e-12)
    assert grads["logits"][0, 0] == 0.0 and grads["logits"][0, 1] == 0.0


HUBER = """
name: h
summary: Huber.
inputs:
  input: {dtype: float, shape: [N]}
  target: {dtype: float, shape: [N]}
params:
  delta: {default: 1.0, min: 0}
formula: |
  d = abs(input - target)
  loss = where(d < delta, 0.5 * d**2, LINEAR)
"""


def test_continuity_lint():
    from losscc.lint import continuity

    def warnings(linear):
        return [w.format() for w in continuity(build_program(spec_from_text(HUBER.replace("LINEAR", linear), "h.yaml")))]

    assert warnings("delta * (d - 0.5 * delta)") == []                      # Huber is C1
    jump = warnings("delta * d")                                             # wrong linear branch
    assert len(jump) == 1 and "h.yaml:11:10: warning: the loss is discontinuous at abs(input - target) = delta" in jump[0]
    kink = warnings("delta * (2 * d - 1.5 * delta)")                          # value matches, slope does not
    assert len(kink) == 1 and "the first derivative jumps at abs(input - target) = delta" in kink[0]
    assert "[W302]" in kink[0]


def test_target_gradient_of_bce_with_logits_at_small_logits(tmp_path):
    """d/dtarget of BCE-with-logits is -logit: the pair y softplus(-x) + (1 - y) softplus(x)
    computed it as a difference of two values near log(2), an ulp of 1 off (0 at 1e-20, 1e-4
    relative at 5e-4 in float32); the rewrite softplus-pair makes it exact.  Values at
    logits of +-30 stay accurate (every term >= 0), and the gradient at 0 is sigmoid(0) - y."""
    from tests.codegen_util import check, modules

    spec = load_spec(ROOT / "specs/bce_with_logits.yaml")
    def case(name, logits, target):
        return CaseData(name, "test", {"input": np.array(logits), "target": np.array(target), "weight": None,
                                       "pos_weight": None}, {}, {}, from_reference=True)
    # separate cases: a gradient entry's floor is the largest entry of its array
    cases = [case("tiny_logits", [[1e-20, -3e-20, 2e-20]], [[0.3, 0.7, 1.0]]),
             case("small_logits", [[5e-4, -6e-4, 4e-4, 0.0]], [[0.3, 0.7, 1.0, 0.5]]),
             case("large_logits", [[30.0, -30.0, 17.0]], [[1.0, 0.0, 1.0]])]
    check(spec, modules(spec, tmp_path), cases, dtypes=("float64", "float32"))


TRIPLET = """
name: triplet_margin
summary: torch.nn.TripletMarginLoss with p = 2.
inputs:
  anchor: {dtype: float, shape: [N, D]}
  positive: {dtype: float, shape: [N, D]}
  negative: {dtype: float, shape: [N, D]}
params:
  margin: {default: 1.0, min: 0}
  eps: {default: 1.0e-6, min: 0}
  swap: {default: false}
formula: |
  d_ap = norm(anchor - positive + eps, axis=D)
  d_an = norm(anchor - negative + eps, axis=D)
  d_neg = where(swap, min(d_an, norm(positive - negative + eps, axis=D)), d_an)
  loss = max(d_ap - d_neg + margin, 0)
"""


def test_triplet_margin_at_a_far_anchor(tmp_path):
    """d(a, p) - d(a, n) at an anchor of 1e18: each distance is 1e18 and their difference,
    of size |p - n|, was lost in float32 (a loss of exactly `margin` where the truth is 0,
    gradients of +-0.6 where they are 0). difference-of-norms cancels the anchor
    symbolically (sum-into-static-select first takes the sum into swap's default branch)."""
    from tests.codegen_util import check, modules

    spec = spec_from_text(TRIPLET, "triplet_margin.yaml")
    anchor = np.array([[1e18, -2e18, 5e17], [3e4, 1e4, -2e4]])
    positive = np.array([[0.5, 1.0, -0.25], [0.75, -0.5, 2.0]])
    negative = np.array([[2.5, -4.0, 1.0], [-1.5, 0.25, 0.5]])
    far = CaseData("far_anchor", "test", {"anchor": anchor, "positive": positive, "negative": negative},
                   {"margin": 1.0, "eps": 1e-6, "swap": False}, {}, from_reference=True)
    check(spec, modules(spec, tmp_path), [far], dtypes=("float64", "float32"))


def test_a_backend_gap_excuses_that_backend_only():
    f = ("extreme_features_1e+18: gradient d/dweight off by 7.92e-05 (norm-wise) at element [0, 0]: "
         "got -2.3781976699829102, expected -2.3770313262939453")
    assert known_gaps.unexplained("arcface", [f], "jax") == []
    assert known_gaps.unexplained("arcface", [f], "paddle") == [f]
    other = f.replace("d/dweight", "d/dfeatures")
    assert known_gaps.unexplained("arcface", [other], "jax") == [other]
    assert known_gaps.stale("arcface", [], "jax") == [("extreme_features_1e+18", "gradient d/dweight")]


@pytest.mark.parametrize("formula, want", [
    ("u = y - x\n  loss = abs(0.25 - where(u < 0, 1.0, 0.0)) * u**2", []),       # u**2 is 0 at the jump
    ("u = y - x\n  loss = abs(0.25 - where(u < 0, 1.0, 0.0)) * (u**2 + 1)", ["W301"]),
    ("u = y - x\n  loss = abs(0.25 - where(u < 0, 1.0, 0.0)) * abs(u)", ["W302"]),  # pinball: a kink
    ("u = y - x\n  loss = sum(where(u < 0, 1.0, 0.0) * u**2, axis=N) + where(u < 0, 1.0, 0.0)", ["W301"]),
])
def test_continuity_is_judged_in_the_formula_around_the_select(formula, want):
    """A select whose branches differ at the boundary makes no jump where the formula around
    it (up to a reduction) multiplies it by something that is 0 there (a new user's
    pinball-weighted square had a W301 that was false)."""
    from losscc.lint import continuity
    text = ("name: q\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\n  y: {dtype: float, shape: [N]}\n"
            f"formula: |\n  {formula}\n")
    got = [w.code for w in continuity(build_program(spec_from_text(text, "q.yaml")))]
    assert got == want
