"""verify catches what it is for: a wrong expected value and a wrong operator mapping."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from losscc import verify
from losscc.backends import get
from losscc.emit import compile_spec
from losscc.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent


def test_compare_tolerances():
    assert verify.compare([1.0 + 1e-11], [1.0], "float64")[0]
    assert not verify.compare([1.0 + 1e-9], [1.0], "float64")[0]
    assert verify.compare([1.0 + 5e-6], [1.0], "float32")[0]
    assert not verify.compare([1.0 + 5e-5], [1.0], "float32")[0]
    assert not verify.compare([np.nan], [1.0], "float64")[0]
    assert not verify.compare([1.0, 2.0], [1.0], "float64")[0]
    # atol is relative to the array's largest magnitude: a cancelled tiny entry next to 1e6
    assert verify.compare([1e6, 1e-7], [1e6, 0.0], "float64")[0]
    assert not verify.compare([1.0, 1e-7], [1.0, 0.0], "float64")[0]


def test_perturbed_expected_value_fails(tmp_path):
    doc = json.loads((ROOT / "tests/data/conformance/mse.json").read_text())
    doc["cases"] = doc["cases"][:1]
    doc["cases"][0]["expected"]["mean"] *= 1 + 1e-7
    bad = tmp_path / "mse_perturbed.json"
    bad.write_text(json.dumps(doc))
    args = ["verify", "specs/mse.yaml", "--cases", str(bad), "--random", "0", "--dtype", "float64",
            "--mode", "eager"]
    r = subprocess.run([sys.executable, "-m", "losscc", *args], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "random_2d: value (mean) off by" in r.stdout
    # and the unperturbed file passes
    doc["cases"][0]["expected"]["mean"] /= 1 + 1e-7
    bad.write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, "-m", "losscc", *args], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def _rows_with_backend(spec, backend, tmp_path):
    path = tmp_path / f"{spec.name}_{backend.name}.py"
    path.write_text(compile_spec(spec, backend))
    mod = verify.load_module(path, f"mutant_{backend.name}_{spec.name}_{abs(hash(str(tmp_path)))}")
    runner = verify.RUNNERS[backend.name]()
    cases = verify.collect_cases(spec, ROOT, [], 2, 0)
    return verify.verify_spec(spec, {backend.name: mod}, {backend.name: runner}, ("float64",), ("eager",), cases)


def test_swapped_operator_mapping_fails(tmp_path):
    """log lowered as log1p: verify must fail, while the true table passes."""
    spec = load_spec(ROOT / "specs/kl_div.yaml", "specs/kl_div.yaml")
    for name in ("mindspore", "paddle"):
        good = get(name)
        bad = dataclasses.replace(good, ops={**good.ops, "log": good.ops["log1p"]})
        assert all(r.ok for r in _rows_with_backend(spec, good, tmp_path))
        rows = _rows_with_backend(spec, bad, tmp_path)
        assert not any(r.ok for r in rows)
        assert any("value" in f for r in rows for f in r.failures)


def test_missing_guard_fails(tmp_path):
    """Without the untaken-branch guard, smooth_l1's gradient at beta == 0 is NaN (0 * inf from
    d**2 / beta in the branch not taken): verify says so."""
    from losscc import pipeline

    spec = load_spec(ROOT / "specs/smooth_l1.yaml", "specs/smooth_l1.yaml")
    assert all(r.ok for r in _rows_with_backend(spec, get("paddle"), tmp_path))
    original = pipeline.guard_branches
    pipeline.guard_branches = lambda expr, prog, fired=None, memo=None: expr
    try:
        rows = _rows_with_backend(spec, get("paddle"), tmp_path)
    finally:
        pipeline.guard_branches = original
    assert any("gradient" in f and "edge_beta0_is_l1" in f for r in rows for f in r.failures)


def test_json_report_and_exit_status():
    r = subprocess.run([sys.executable, "-m", "losscc", "verify", "specs/huber.yaml", "--random", "1",
                        "--dtype", "float32", "--mode", "eager", "--format", "json"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(r.stdout)
    assert {(x["backend"], x["dtype"], x["mode"]) for x in rows} == {("mindspore", "float32", "eager"),
                                                                    ("paddle", "float32", "eager")}
    assert all(x["verdict"] == "pass" and x["cases"] > 0 for x in rows)
