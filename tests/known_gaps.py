"""Known per-element accuracy shortfalls of the extreme-input suite, each with its reason.

`losscc verify --extreme` holds every entry to its own size (docs/verify.md, "Per element,
relative"). The entries below fail that check for a reason of float32, of a framework's
kernel or of the check's own floor, not of a wrong formula; docs/verify.md ("What still
fails") gives each reason with a command that reproduces it. A gap is
(spec, case id, quantity), in whichever backend (MindSpore's float32 kernels fail some of
them on one run and not on the next), and excuses the per-element check of that array only:
its norm-wise check, NaN and inf must still pass, any failure not listed fails the test,
and a listed gap that passes fails it too (remove it: the list only shrinks).
"""

from __future__ import annotations

import re

# the reasons, named once (docs/verify.md, "What still fails")
SUBNORMAL = "a value or gradient that is subnormal in float32, rounded differently by each kernel"
NORM = ("inputs of 1e18: the gradient of a normalisation (x / |x|, N**-1/2, DIoU's rho**2 / c**2) "
        "holds |x|**-3 or c**-4 (1e-54, 1e-72), which underflows float32")
# spec -> (reason, {(case id, quantity), ...}), as measured by `losscc verify --extreme`
# (float32, eager) on 2026-12-05, with the gradient-condition floor
GAPS: dict[str, tuple[str, frozenset]] = {
    "asymmetric_loss": (SUBNORMAL, frozenset({
        ('extreme_logits_tie0', 'value (none)'),
    })),
    "cosine_embedding": (NORM, frozenset({  # JAX (eager): 4e-2 relative on entries of 5e-20
        ('extreme_input1_1e+18', 'gradient d/dinput1'),
    })),
    "diou_loss": (NORM, frozenset({
        ('extreme_boxes1_1e+18', 'gradient d/dboxes1'),
        ('extreme_boxes1_1e+18', 'gradient d/dboxes2'),
        ('extreme_boxes2_1e+18', 'gradient d/dboxes1'),
        ('extreme_boxes2_1e+18', 'gradient d/dboxes2'),
    })),
    "info_nce": (NORM, frozenset({
        ('extreme_query_1e+18', 'gradient d/dquery'),
    })),
    "nt_xent": (NORM, frozenset({
        ('extreme_z_i_1e+18', 'gradient d/dz_i'),
        ('extreme_z_j_1e+18', 'gradient d/dz_j'),
    })),
}

# (spec, backend) -> (reason, {(case id, quantity), ...}): failures of one backend's kernels
# that the norm-wise check sees too, so they excuse the whole array in that backend only
# (measured with `losscc verify --extreme --backend B` on 2026-12-05; docs/verify.md)
JAX_NORM = ("JAX at features of 1e18: the weight gradient of a normalised product is 4e-5 to 8e-5 "
            "off norm-wise in float32 (2e-7 at features of 1); Paddle and MindSpore pass")
BACKEND_GAPS: dict[tuple[str, str], tuple[str, frozenset]] = {
    ("arcface", "jax"): (JAX_NORM, frozenset({('extreme_features_1e+18', 'gradient d/dweight')})),
    ("cosface", "jax"): (JAX_NORM, frozenset({('extreme_features_1e+18', 'gradient d/dweight')})),
}

_FAILURE = re.compile(r"^(?P<case>[^:]+): (?P<what>.+?) (?:relative|absolute) error ")
_NORMWISE = re.compile(r"^(?P<case>[^:]+): (?P<what>.+?) off by \S+ \(norm-wise\)")


def parse(failure: str) -> tuple[str, str] | None:
    """(case id, quantity) of a per-element failure; None for any other (norm-wise, NaN, inf)."""
    m = _FAILURE.match(failure)
    return (m["case"], m["what"]) if m else None


def _parse_any(failure: str) -> tuple[str, str] | None:
    """(case id, quantity) of a per-element or norm-wise failure."""
    m = _FAILURE.match(failure) or _NORMWISE.match(failure)
    return (m["case"], m["what"]) if m else None


def unexplained(spec: str, failures, backend: str | None = None) -> list[str]:
    """The failures that no listed gap of `spec` (in `backend`) excuses."""
    listed = GAPS.get(spec, ("", frozenset()))[1]
    whole = BACKEND_GAPS.get((spec, backend), ("", frozenset()))[1]
    return [f for f in failures if parse(f) not in listed and _parse_any(f) not in whole]


def stale(spec: str, failures, backend: str | None = None) -> list[tuple[str, str]]:
    """The listed gaps of `spec` (and of `spec` in `backend`) that did not fail (in any of the
    rows whose `failures` are given)."""
    seen = {parse(f) for f in failures}
    seen_any = {_parse_any(f) for f in failures}
    return sorted([g for g in GAPS.get(spec, ("", frozenset()))[1] if g not in seen]
                  + [g for g in BACKEND_GAPS.get((spec, backend), ("", frozenset()))[1] if g not in seen_any])
