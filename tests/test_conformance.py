"""The conformance suite: files unchanged, every case claimed by a spec, and all pass.

The case files in tests/data/conformance are the external oracle (PyTorch and Paddle
built-ins in float64); see PROVENANCE.md there.
"""

import hashlib
import json
from pathlib import Path

import pytest

from losscc import verify
from losscc.backends import names
from losscc.cases import reference_cases
from losscc.emit import find_specs, load_all
from tests.test_verify_all import BASE

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "conformance"
SPECS = load_all(find_specs([str(ROOT / "specs")]))


def test_case_files_are_unchanged():
    for line in (DATA / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name


def test_every_case_of_every_file_is_claimed_once():
    claimed: dict[tuple[str, str], str] = {}
    for spec in SPECS:
        for ref in spec.references:
            if Path(ref.file).parent.as_posix() != "tests/data/conformance":
                continue  # tests/data/library: test_library_cases.py
            doc = json.loads((ROOT / ref.file).read_text())
            ids = ref.cases or tuple(c["id"] for c in doc["cases"])
            for cid in ids:
                key = (Path(ref.file).name, cid)
                assert key not in claimed, f"{key} claimed by {claimed.get(key)} and {spec.name}"
                claimed[key] = spec.name
    every = {(f.name, c["id"]) for f in DATA.glob("*.json") for c in json.loads(f.read_text())["cases"]}
    assert set(claimed) == every, sorted(every - set(claimed))


def test_spec_names_follow_the_files():
    names = {s.name for s in SPECS}
    for f in DATA.glob("*.json"):
        assert json.loads(f.read_text())["loss"] in names


# test_verify_all.py runs every spec eagerly in BASE in float64 with every claimed case, so
# each spec here takes one of the other backends in turn
OTHERS = tuple(b for b in names() if b != BASE)
REFERENCED = [s for s in SPECS if s.references]
PLAN = [(s, OTHERS[k % len(OTHERS)] if OTHERS else BASE) for k, s in enumerate(REFERENCED)]


@pytest.mark.parametrize("spec,backend", PLAN, ids=lambda v: getattr(v, "name", v))
def test_conformance_float64(spec, backend):
    """Every claimed case passes in another backend (in turn), float64, eager (graph mode:
    test_verify; `losscc verify` runs every backend)."""
    rows = verify.run([spec], (backend,), dtypes=("float64",), modes=("eager",), n_random=0, root=ROOT)
    assert len(rows) == 1
    for row in rows:
        assert row.cases == len(reference_cases(spec, ROOT)) + len(spec.cases)
        assert row.ok, row.failures
