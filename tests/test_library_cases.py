"""The library case files: unchanged, with their provenance, every case claimed by one spec.

tests/data/library holds values and gradients computed by other libraries (PyTorch,
Keras, optax, scikit-learn, SciPy) in float64 for losses written from those libraries' docs; see
its README.md. test_conformance.py runs every spec with references, these included.
"""

import hashlib
import json
import re
from pathlib import Path

import pytest

from losscc import verify
from losscc.cases import reference_cases
from losscc.backends import names
from losscc.emit import find_specs, load_all
from tests.backend_util import AVAILABLE

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "library"
SPECS = load_all(find_specs([str(ROOT / "specs")]))
HELD = load_all(find_specs([str(DATA / "held")]))  # held out of specs/: held/README.md says why
FILES = sorted(DATA.glob("*.json"))
LIBRARIES = ("torch ", "torchvision ", "keras ", "optax ", "scikit-learn ", "kornia ", "scipy ")


def test_case_files_are_unchanged():
    sums = dict(reversed(line.split()) for line in (DATA / "SHA256SUMS").read_text().splitlines())
    assert sorted(sums) == [f.name for f in FILES]
    for f in FILES:
        assert hashlib.sha256(f.read_bytes()).hexdigest() == sums[f.name], f.name


def test_every_file_names_its_library_version_and_call():
    for f in FILES:
        doc = json.loads(f.read_text())
        assert doc["loss"] == f.stem
        assert doc["library"].startswith(LIBRARIES) and re.search(r"\d+\.\d+", doc["library"]), f.name
        assert doc["reference"] and doc["semantics"], f.name
        assert len(doc["cases"]) >= 2, f.name
        for case in doc["cases"]:
            assert set(case["expected"]) >= {"none", "mean"}, (f.name, case["id"])


def test_every_case_is_claimed_once_by_the_spec_of_its_name():
    claimed: dict[tuple[str, str], str] = {}
    for spec in SPECS + HELD:
        for ref in spec.references:
            if Path(ref.file).parent.as_posix() != "tests/data/library":
                continue
            doc = json.loads((ROOT / ref.file).read_text())
            assert doc["loss"] == spec.name, (ref.file, spec.name)
            for cid in ref.cases or tuple(c["id"] for c in doc["cases"]):
                key = (Path(ref.file).name, cid)
                assert key not in claimed, f"{key} claimed by {claimed.get(key)} and {spec.name}"
                claimed[key] = spec.name
    every = {(f.name, c["id"]) for f in FILES for c in json.loads(f.read_text())["cases"]}
    assert set(claimed) == every, sorted(every - set(claimed))


def test_the_generators_stay_out_of_losscc():
    """The libraries that made the files are not losscc's dependencies, nor imported by it."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    for name in ("torch", "keras", "optax", "jax", "scikit-learn", "sklearn", "scipy"):
        if name not in names():  # a backend's framework is its own optional extra
            assert not re.search(rf'"{name}[<>=~ ;"]', pyproject), name
        for src in (ROOT / "losscc").rglob("*.py"):
            if src.parent.name == "backends" and src.stem == name:
                continue  # the backend's own module (its runner imports the framework)
            assert not re.search(rf"^\s*(import|from) {name}\b", src.read_text(), re.MULTILINE), (src, name)


@pytest.mark.parametrize("spec", HELD, ids=lambda s: s.name)
def test_held_specs_pass_their_library_cases(spec):
    rows = verify.run([spec], dtypes=("float64",), modes=("eager",), n_random=0, root=ROOT)
    assert len(rows) == len(AVAILABLE)
    for row in rows:
        assert row.cases == len(reference_cases(spec, ROOT)) + len(spec.cases)
        assert row.ok, row.failures
