"""`losscc verify` over every spec: both backends, float64 and float32, eager and graph mode.

This is the main job at a CI-sized budget: the spec's own cases, every claimed conformance
case and one random case per spec (`make verify` runs three).
"""

from pathlib import Path

import pytest

from losscc import verify
from losscc.emit import find_specs, load_all
from tests.backend_util import AVAILABLE

ROOT = Path(__file__).resolve().parent.parent
SPECS = load_all(find_specs([str(ROOT / "specs")]))


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_verify(spec, mode):
    rows = verify.run([spec], AVAILABLE, dtypes=("float64", "float32"), modes=(mode,), n_random=1, root=ROOT)
    assert {(r.backend, r.dtype) for r in rows} == {(b, d) for b in AVAILABLE
                                                   for d in ("float64", "float32")}
    for row in rows:
        assert row.cases > 0
        assert row.ok, f"{row.backend}/{row.dtype}/{row.mode}: {row.failures}"
