"""`losscc verify` over every spec, float64 and float32, at a CI-sized budget.

This is the main job (`make verify` runs the whole matrix: every backend, both modes, three
random cases). Here every spec runs eagerly in the cheapest backend, and once more in one
(backend, mode) pair taken in turn, so that each pair (compiled modes included) verifies
every k-th spec; with the spec's own cases, every claimed conformance case and one random case;
float64 eagerly in the cheapest backend, float32 in the pair.
"""

from pathlib import Path

import pytest

from losscc import verify
from losscc.emit import find_specs, load_all
from tests.backend_util import AVAILABLE

ROOT = Path(__file__).resolve().parent.parent
SPECS = load_all(find_specs([str(ROOT / "specs")]))
PAIRS = [(b, m) for b in AVAILABLE for m in ("graph", "eager")]
BASE = "paddle" if "paddle" in AVAILABLE else (AVAILABLE[0] if AVAILABLE else None)
DTYPES = ("float64", "float32")


def _plan():
    """(spec, backend, mode, dtypes): each spec eagerly in BASE in float64, and in float32 in
    one pair taken in turn (BASE eager included)."""
    out = []
    for k, spec in enumerate(SPECS):
        backend, mode = PAIRS[k % len(PAIRS)]
        if (backend, mode) == (BASE, "eager"):
            out.append((spec, BASE, "eager", DTYPES))
        else:
            out.append((spec, backend, mode, ("float32",)))
            out.append((spec, BASE, "eager", ("float64",)))
    return out


@pytest.mark.skipif(not AVAILABLE, reason="no backend's framework is installed")
@pytest.mark.parametrize("spec,backend,mode,dtypes", _plan(), ids=lambda v: getattr(v, "name", "-".join(v) if isinstance(v, tuple) else v))
def test_verify(spec, backend, mode, dtypes):
    rows = verify.run([spec], (backend,), dtypes=dtypes, modes=(mode,), n_random=1, root=ROOT)
    assert {(r.backend, r.dtype, r.mode) for r in rows} == {(backend, d, mode) for d in dtypes}
    for row in rows:
        assert row.cases > 0
        assert row.ok, f"{row.backend}/{row.dtype}/{row.mode}: {row.failures}"


def test_every_pair_verifies_some_spec():
    plan = _plan()
    assert {(b, m) for _, b, m, _ in plan} == set(PAIRS) or len(SPECS) < len(PAIRS)
    assert {(b, m) for _, b, m, ds in plan if "float32" in ds} == set(PAIRS) or len(SPECS) < len(PAIRS)
    assert all({d for s2, _, _, ds in plan if s2 is s for d in ds} == set(DTYPES) for s in SPECS)
