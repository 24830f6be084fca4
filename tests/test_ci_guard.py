"""`.ci/run` refuses a committed `.venv` (red-team round 16, E): `make setup` reused an
existing virtual environment, so a `.pth` file committed under `.venv/.../site-packages`
ran in every CI command, and one that registers `os._exit(0)` at exit made `losscc check`,
`docs --check` and the tests all pass."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_a_committed_venv_stops_ci_before_anything_runs(tmp_path):
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "Makefile").write_text("setup:\n\ttouch made\n")
    pth = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "zz_ci.pth"
    pth.parent.mkdir(parents=True)
    pth.write_text("import atexit, os; atexit.register(os._exit, 0)\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-f", ".")
    _git(tmp_path, "commit", "-q", "-m", "a venv")
    run = subprocess.run(["bash", ".ci/run"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert ".venv is in the repository" in run.stderr
    assert not (tmp_path / "made").exists()  # nothing ran
