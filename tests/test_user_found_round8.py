"""Defects a new user's losses found (fresh-loss trial 8, 2026-12-06), each as the smallest
spec that showed it."""

from __future__ import annotations

from pathlib import Path

import pytest

from losscc import verify
from losscc.spec import spec_from_text

POW_INT = """
name: pow_int_param
summary: Root of a positive input.
inputs:
  x: {dtype: float, shape: [N], domain: "(0, inf)"}
params:
  r: {default: 3, min: 1, max: 4}
formula: |
  loss = x**(1 / r)
"""


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_an_exponent_of_an_int_hyperparameter_is_computed_in_the_dtype(backend):
    """x**(1 / r), r an int: the exponent was Python's float 1/3, which both frameworks round
    to float32 (8e-9 off in float64); now 1 / full((), r, dtype), in eager and graph mode."""
    spec = spec_from_text(POW_INT, "p.yaml")
    rows = verify.run([spec], (backend,), dtypes=("float64",), modes=("eager", "graph"), root=Path("."))
    assert len(rows) == 2 and all(r.ok for r in rows), [r.failures[:2] for r in rows]
