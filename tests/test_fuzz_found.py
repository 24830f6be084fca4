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
