"""The regeneration check: generate/check on the project's tree and on temporary copies."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from losscc import emit
from losscc.backends import all_backends, names
from losscc.render import VERSION_PREFIX

ROOT = Path(__file__).resolve().parent.parent


def cli(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "losscc", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def test_project_tree_is_current():
    r = cli("check")
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_spec_has_every_backend():
    specs = sorted(p.stem for p in (ROOT / "specs").glob("*.yaml"))
    for backend in names():
        files = sorted(p.stem for p in (ROOT / "generated" / backend).glob("*.py") if p.stem != "__init__")
        assert files == specs


@pytest.fixture
def project(tmp_path):
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    shutil.copytree(ROOT / "tests" / "data", tmp_path / "tests" / "data")
    return tmp_path


def tree_bytes(d: Path) -> dict:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_deterministic_across_hash_seeds_and_order(project):
    outs = []
    order = sorted(str(p.relative_to(project)) for p in (project / "specs").glob("*.yaml"))
    for seed, specs in (("0", order), ("1", order[::-1]), ("12345", order[3:] + order[:3])):
        out = project / f"out{seed}"
        r = cli("generate", *specs, "-o", str(out), cwd=project, env={"PYTHONHASHSEED": seed})
        assert r.returncode == 0, r.stderr
        outs.append(tree_bytes(out))
    assert outs[0] == outs[1] == outs[2]
    assert outs[0] == {k: v for k, v in tree_bytes(ROOT / "generated").items() if not k.startswith(".")}


def test_check_reports_stale_missing_and_extra(project):
    out = project / "generated"
    assert cli("generate", "-o", str(out), cwd=project).returncode == 0
    assert cli("check", "-o", str(out), cwd=project).returncode == 0
    (out / "paddle" / "huber.py").write_text((out / "paddle" / "huber.py").read_text() + "# edited\n")
    (out / "mindspore" / "focal.py").unlink()
    extra = out / "paddle" / "old_loss.py"
    extra.write_text((out / "paddle" / "mse.py").read_text())
    user_file = out / "paddle" / "my_helpers.py"
    user_file.write_text("def helper():\n    return 1\n")
    r = cli("check", "--diff", "-o", str(out), cwd=project)
    assert r.returncode == 1
    assert "stale: " in r.stdout and "paddle/huber.py" in r.stdout
    assert "missing: " in r.stdout and "mindspore/focal.py" in r.stdout
    assert "extra: " in r.stdout and "paddle/old_loss.py" in r.stdout
    assert "unexpected: generated/paddle/my_helpers.py (file;" in r.stdout
    assert "-# edited" in r.stdout  # the unified diff
    r = cli("generate", "-o", str(out), cwd=project)
    assert r.returncode == 0
    assert "generated/paddle/my_helpers.py: warning: file not written by losscc" in r.stderr
    assert not extra.exists(), "generate removes stale generated files"
    assert user_file.read_text() == "def helper():\n    return 1\n", "a user's file is never touched"
    r = cli("check", "-o", str(out), cwd=project)
    assert r.returncode == 1 and r.stdout.splitlines() == ["unexpected: generated/paddle/my_helpers.py "
                                                           "(file; generate never writes it)"]
    user_file.unlink()
    assert cli("check", "-o", str(out), cwd=project).returncode == 0


def test_version_only_header_change_is_not_stale(project):
    out = project / "generated"
    assert cli("generate", "-o", str(out), cwd=project).returncode == 0
    p = out / "mindspore" / "huber.py"
    text = p.read_text()
    assert VERSION_PREFIX in text
    lines = [(VERSION_PREFIX + "99.0.0 (sympy 2.0.0, jinja2 4.0.0)") if ln.startswith(VERSION_PREFIX) else ln for ln in text.splitlines()]
    p.write_text("\n".join(lines) + "\n")
    assert cli("check", "-o", str(out), cwd=project).returncode == 0


def test_generate_refuses_to_overwrite_a_foreign_file(project):
    out = project / "generated"
    (out / "paddle").mkdir(parents=True)
    mine = out / "paddle" / "huber.py"
    mine.write_text("# my own huber\n")
    r = cli("generate", "-o", str(out), cwd=project)
    assert r.returncode == 2
    assert "without the losscc header" in r.stderr
    assert mine.read_text() == "# my own huber\n"
    assert not (out / "mindspore").exists(), "nothing is written when any file is refused"


def test_generated_files_are_self_contained_and_formatted():
    import ast

    allowed = {b.name: set(b.frameworks) for b in all_backends()}
    for backend, roots in allowed.items():
        for path in (ROOT / "generated" / backend).glob("*.py"):
            text = path.read_text()
            assert text.endswith("\n") and not text.endswith("\n\n"), path
            assert "\r" not in text and "\t" not in text, path
            assert all(len(line) <= 110 for line in text.splitlines()), path
            assert all(line == line.rstrip() for line in text.splitlines()), path
            tree = ast.parse(text)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    mods = {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom):
                    if node.level:  # the package __init__ imports its own modules
                        assert path.name == "__init__.py"
                        continue
                    mods = {node.module.split(".")[0]}
                else:
                    continue
                assert mods <= roots | set(sys.stdlib_module_names), (path, mods)


def test_render_tree_matches_committed_files():
    specs = emit.load_all(emit.find_specs([str(ROOT / "specs")]))
    files = emit.render_tree(specs)
    st = emit.compare(files, ROOT / "generated")
    assert st.clean, st
