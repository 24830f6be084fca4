"""benchmarks.extreme: the extreme-input suite run on generated code, built-ins and naive versions.

Small and fast: focal loss in MindSpore eager only (the full comparison is
`python -m benchmarks.extreme`, results in docs/stability.md)."""

import numpy as np
import pytest

from benchmarks import extreme as X
from losscc.cases import extreme_cases
from losscc.emit import find_specs, load_all


@pytest.fixture(scope="module")
def focal(root):
    return next(s for s in load_all(find_specs([str(root / "specs")])) if s.name == "focal")


@pytest.fixture(scope="module")
def focal_records(focal):
    recs = X.evaluate([focal], backends=("mindspore",), modes=("eager",))
    return {r["kind"]: r for r in recs}


def test_generated_focal_passes_every_extreme_case(focal, focal_records):
    gen = focal_records["generated"]
    ids = [c.id for c in extreme_cases(focal)]
    assert list(gen["cases"]) == ids == ["extreme_logits_1e-04", "extreme_logits_1e+02", "extreme_logits_1e+04",
                                         "extreme_logits_1e+18", "extreme_logits_near_tie"]
    assert gen["passed"] == gen["strict_passed"] == gen["total"] == 5
    assert gen["ordinary_case"]["pass"] and not gen["no_gradient"] and not gen["not_compared"]
    # MindSpore's nn.FocalLoss (scaled by alpha) is stable here too
    assert focal_records["builtin"]["passed"] == 5


def test_naive_focal_fails_at_logits_1e4(focal_records):
    naive = focal_records["naive"]
    assert naive["ordinary_case"]["pass"]  # same loss as the spec on tame inputs ...
    case = naive["cases"]["extreme_logits_1e+04"]  # ... but not at |logits| ~ 1e4
    assert not case["pass"]
    assert case["classes"] == ["wrong value", "wrong gradient"]
    assert any(m.startswith("extreme_logits_1e+04: value (none) off by") for m in case["messages"])
    assert any("gradient d/dlogits off by" in m for m in case["messages"])
    # near-equal and tiny logits are tame for the naive form too; the three large magnitudes are not
    assert naive["passed"] == 2 and naive["failures_by_primary_class"] == {"wrong value": 3}


def test_naive_focal_saturates_at_log_1e8(focal):
    """Why: softmax underflows to exactly 0 for every row's true class, so the naive loss is
    -alpha * log(0 + 1e-8) = 4.6 per row (the reference: 82 to 3678) and its gradient is 0
    (the reference: +-alpha)."""
    e = next(e for e in X.expectations32(focal, extreme_cases(focal)) if e.case.id == "extreme_logits_1e+04")
    runner = X.BuiltRunner("mindspore", X.CONTENDERS["focal"]["naive"]["mindspore"], "eager")
    vals, grads, errors = runner.outputs(focal, e.case, ["none"], ["logits"])
    assert not errors
    np.testing.assert_allclose(vals["none"], -0.25 * np.log(1e-8), rtol=1e-6)
    assert np.all(e.vals["none"] > 80)
    assert np.all(grads["logits"] == 0)
    assert np.abs(e.grads["logits"]).max() == pytest.approx(0.25)


def test_classify_and_failed_outputs():
    msgs = ["c: value (mean) differs from the reference by 3", "c: gradient d/dx is not finite where the reference is",
            "unsupported: c: gradient: TypeError: no"]
    assert X._classify(msgs) == ["unsupported", "non-finite gradient", "wrong value"]
    assert X._failed_outputs(msgs) == ({"mean"}, {"x"})
