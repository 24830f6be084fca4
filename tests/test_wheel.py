"""losscc as an installed tool: build the sdist and the wheel (from the sdist), install the
wheel non-editable into a fresh virtual environment *without* the frameworks, and run the
installed ``losscc`` in temporary projects outside this repository.

The install resolves SymPy, Jinja2, PyYAML, mpmath and black from the package index
(pip's cache makes repeated runs fast).  A source checkout with the frameworks blocked
on the import path checks ``verify``'s message without a wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from losscc.backends import names

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "losscc", "templates", "specs")
TEMPLATES = sorted(p.relative_to(ROOT / "templates").as_posix() for p in (ROOT / "templates").rglob("*.j2"))
CATALOGUE = sorted(p.name for p in (ROOT / "specs").glob("*.yaml"))
TIMEOUT = 300


def _clean_env(**extra) -> dict:
    """The environment of a user's shell: no PYTHONPATH pointing into this checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def _run(cmd, cwd, env=None, timeout=TIMEOUT):
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env or _clean_env())


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:  # a copy, so that building leaves the checkout as it is
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(p, src / name)
    dist = tmp / "dist"
    r = _run([sys.executable, "-m", "build", "--outdir", dist, src], cwd=tmp)  # sdist, then the wheel from it
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "SetuptoolsDeprecationWarning" not in r.stdout + r.stderr
    (wheel,) = dist.glob("losscc-*.whl")
    (sdist,) = dist.glob("losscc-*.tar.gz")
    venv = tmp / "venv"
    r = _run([sys.executable, "-m", "venv", venv], cwd=tmp)
    assert r.returncode == 0, r.stderr
    r = _run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", wheel], cwd=tmp)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return SimpleNamespace(wheel=wheel, sdist=sdist, bin=venv / "bin", losscc=venv / "bin" / "losscc",
                           python=venv / "bin" / "python", src=src, venv=venv)


def test_wheel_and_sdist_are_complete(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for t in TEMPLATES:
        assert f"losscc/templates/{t}" in names
    for s in CATALOGUE:
        assert f"losscc/catalogue/{s}" in names
    assert "losscc/spec.schema.json" in names
    assert "losscc-0.1.0.dist-info/licenses/LICENSE" in names
    assert not [n for n in names if n.startswith(("tests/", "generated/", "templates/", "specs/"))]
    meta = zipfile.ZipFile(installed.wheel).read("losscc-0.1.0.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in meta
    with tarfile.open(installed.sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    for need in ("LICENSE", "README.md", "pyproject.toml", "losscc/spec.schema.json", "losscc/cli.py",
                 *(f"templates/{t}" for t in TEMPLATES), *(f"specs/{s}" for s in CATALOGUE)):
        assert need in members, need


def test_installed_package_is_the_wheel_without_frameworks(installed, tmp_path):
    r = _run([installed.python, "-c", textwrap.dedent("""
        import importlib.util, losscc, losscc.render
        print(losscc.__file__)
        print(losscc.render.TEMPLATES)
        print([m for m in ("mindspore", "paddle", "numpy") if importlib.util.find_spec(m)])
    """)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    pkg, templates, frameworks = r.stdout.splitlines()
    assert "site-packages" in pkg and str(ROOT) not in pkg
    assert "site-packages" in templates and str(ROOT) not in templates
    assert frameworks == "[]"


def test_installed_generate_and_check_in_a_plain_folder(installed, tmp_path):
    for name in ("focal.yaml", "mse.yaml"):
        shutil.copy(ROOT / "specs" / name, tmp_path / name)
    r = _run([installed.losscc, "generate", "focal.yaml", "mse.yaml", "-o", "out"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # the same bytes as this checkout's compiler gives for the same project
    r2 = _run([sys.executable, "-m", "losscc", "generate", "focal.yaml", "mse.yaml", "-o", "out_src"],
              cwd=tmp_path, env=_clean_env(PYTHONPATH=str(ROOT)))
    assert r2.returncode == 0, r2.stderr
    out = {p.relative_to(tmp_path / "out").as_posix(): p.read_bytes() for p in (tmp_path / "out").rglob("*.py")}
    assert sorted(out) == sorted(f"{b}/{n}.py" for b in names() for n in ("__init__", "focal", "mse"))
    assert out == {p.relative_to(tmp_path / "out_src").as_posix(): p.read_bytes()
                   for p in (tmp_path / "out_src").rglob("*.py")}
    r = _run([installed.losscc, "check", "focal.yaml", "mse.yaml", "-o", "out"], cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    (tmp_path / "out" / "paddle" / "mse.py").write_bytes(out["paddle/mse.py"] + b"# edited\n")
    r = _run([installed.losscc, "check", "focal.yaml", "mse.yaml", "-o", "out"], cwd=tmp_path)
    assert r.returncode == 1 and "mse.py" in r.stdout


def test_installed_new_schema_and_verify(installed, tmp_path):
    r = _run([installed.losscc, "new", "my_loss"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "specs" / "my_loss.yaml").is_file()
    r = _run([installed.losscc, "new", "my_focal", "--from", "focal"], cwd=tmp_path)  # the shipped catalogue
    assert r.returncode == 0, r.stderr
    r = _run([installed.losscc, "generate", "specs", "-o", "out"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "paddle" / "my_loss.py").is_file()
    assert (tmp_path / "out" / "mindspore" / "my_focal.py").is_file()
    r = _run([installed.losscc, "schema"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert r.stdout == (ROOT / "losscc" / "spec.schema.json").read_text(encoding="utf-8")
    r = _run([installed.losscc, "verify", "specs/my_loss.yaml"], cwd=tmp_path)
    assert r.returncode == 2
    assert r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert "pip install 'losscc[frameworks,jax]'" in line
    assert all(m in line for m in ("mindspore", "paddle", "jax", "numpy")), line


def test_installed_in_a_configured_project(installed, tmp_path):
    """A user project with ``[tool.losscc]``: every command finds the configured folders
    from the root and from a subfolder."""
    project = tmp_path / "project"
    specs = project / "losses" / "specs"
    specs.mkdir(parents=True)
    (project / "src" / "app").mkdir(parents=True)
    (project / "pyproject.toml").write_text(textwrap.dedent("""\
        [project]
        name = "app"
        version = "0.1"

        [tool.losscc]
        specs = "losses/specs"
        output = "src/app/losses"
    """), encoding="utf-8")
    for name in ("focal.yaml", "mse.yaml"):
        shutil.copy(ROOT / "specs" / name, specs / name)
    sub = project / "src" / "app"
    r = _run([installed.losscc, "generate"], cwd=sub)
    assert r.returncode == 0, r.stdout + r.stderr
    out = project / "src" / "app" / "losses"
    assert (out / "paddle" / "focal.py").is_file() and (out / "mindspore" / "mse.py").is_file()
    for cwd in (project, sub):
        r = _run([installed.losscc, "check"], cwd=cwd)
        assert r.returncode == 0, (cwd, r.stdout + r.stderr)
    r = _run([installed.losscc, "new", "my_loss"], cwd=project)
    assert r.returncode == 0, r.stderr
    assert (specs / "my_loss.yaml").is_file()
    r = _run([installed.losscc, "check"], cwd=sub)
    assert r.returncode == 1  # the new spec has no generated code yet
    r = _run([installed.losscc, "generate"], cwd=project)
    assert r.returncode == 0, r.stderr
    assert (out / "paddle" / "my_loss.py").is_file()
    r = _run([installed.losscc, "check"], cwd=sub)
    assert r.returncode == 0, r.stdout + r.stderr
    # headers name the spec by its path from the project root, whatever the current folder
    assert "# Generated by losscc from losses/specs/focal.yaml." in (out / "paddle" / "focal.py").read_text()
    # a one-spec run touches and reports that spec only; -q prints nothing
    (out / "paddle" / "mse.py").unlink()
    before = (out / "paddle" / "focal.py").stat().st_mtime_ns
    r = _run([installed.losscc, "generate", "-q", "../../losses/specs/mse.yaml"], cwd=sub)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stdout + r.stderr
    assert (out / "paddle" / "mse.py").is_file() and (out / "paddle" / "focal.py").stat().st_mtime_ns == before
    (out / "paddle" / "focal.py").write_text("# Generated by losscc\n", encoding="utf-8")  # stale
    r = _run([installed.losscc, "check", "--format", "json", "losses/specs/mse.yaml"], cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert not report["stale"], report
    r = _run([installed.losscc, "check", "--format", "json"], cwd=project)
    assert r.returncode == 1 and json.loads(r.stdout)["stale"] == ["src/app/losses/paddle/focal.py"], r.stdout


def test_editable_install_reads_the_checkout(installed, tmp_path):
    """``pip install -e``: templates and catalogue come from the source tree's own folders."""
    venv = tmp_path / "venv"
    shutil.copytree(installed.venv, venv, symlinks=True)  # the dependencies are there already
    python = venv / "bin" / "python"
    r = _run([python, "-m", "pip", "install", "--quiet", "--no-deps", "-e", installed.src], cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = _run([python, "-c", "import losscc.render, losscc.resources as r; "
              "print(losscc.render.TEMPLATES); print(r.data_dir('catalogue'))"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [str(installed.src / "templates"), str(installed.src / "specs")]
    shutil.copy(ROOT / "specs" / "mse.yaml", tmp_path / "mse.yaml")
    r = _run([python, "-m", "losscc", "generate", "mse.yaml", "-o", "out"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "paddle" / "mse.py").is_file()


BLOCKER = """\
import importlib.abc
import sys

BLOCKED = {blocked!r}


class _Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _Blocker())
"""


@pytest.mark.parametrize("blocked, args, named, not_named", [
    (("mindspore", "paddle", "jax", "numpy"), [], ["mindspore", "paddle", "jax", "numpy", "losscc[frameworks,jax]"],
     []),
    (("paddle",), ["--backend", "paddle"], ["paddle", "losscc[frameworks]"], ["mindspore", "numpy", "jax"]),
    (("mindspore",), ["--backend", "mindspore", "--backend", "paddle"], ["mindspore", "losscc[frameworks]"],
     ["paddle", "numpy"]),
    (("jax",), ["--backend", "jax"], ["jax", "losscc[jax]"], ["losscc[frameworks", "numpy"]),
])
def test_verify_without_frameworks_from_a_checkout(tmp_path, blocked, args, named, not_named):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER.format(blocked=set(blocked)), encoding="utf-8")
    env = _clean_env(PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    r = _run([sys.executable, "-c", "import mindspore"], cwd=tmp_path, env=env)
    assert r.returncode != 0 or "mindspore" not in blocked  # the blocker works
    r = _run([sys.executable, "-m", "losscc", "verify", str(ROOT / "specs" / "mse.yaml"), *args],
             cwd=tmp_path, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    (line,) = r.stderr.splitlines()
    assert "[E199]" in line
    assert all(m in line for m in named), line
    assert not any(m in line for m in not_named), line


def test_verify_skips_a_default_backend_without_its_framework(tmp_path):
    """Of the default backends, one whose framework cannot be imported is skipped with a
    one-line note; the others are verified."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER.format(blocked={"paddle"}), encoding="utf-8")
    env = _clean_env(PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    r = _run([sys.executable, "-m", "losscc", "verify", "specs/mse.yaml", "--dtype", "float64", "--mode", "eager"],
             cwd=ROOT, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("losscc: ")]
    assert notes == ["losscc: note: skipping backend paddle: paddle cannot be imported"], r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("mse ")]
    assert [row[1] for row in rows] == ["jax", "mindspore"] and rows[0][-1] == "pass", r.stdout


def test_pre_commit_hooks():
    import re

    import yaml

    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    assert set(hooks) == {"losscc-check", "losscc-generate"}
    for hook_id, command in (("losscc-check", "check"), ("losscc-generate", "generate")):
        h = hooks[hook_id]
        assert h["entry"] == f"losscc {command}" and h["language"] == "python"
        assert h["pass_filenames"] is True and h["require_serial"] is True
        files = re.compile(h["files"])  # pre-commit searches with Python's re
        for path in ("specs/focal.yaml", "losses/specs/my_loss.yml"):
            assert files.search(path), path
        for path in ("pyproject.toml", ".pre-commit-config.yaml", "generated/paddle/focal.py",
                     "specs/sub/x.yaml", "docs/specs.yaml", "specs/focal.yaml.orig"):
            assert not files.search(path), path
