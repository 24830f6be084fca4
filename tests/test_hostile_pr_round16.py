"""Red-team round 16: ways around the search for generated modules outside the output folder
(losscc/strays.py) that the earlier rounds left open.

- An edited old tree whose modules end their lines in a bare ``\\r`` (Python reads it as
  line breaks) behind a first line of their own: split at ``\\n`` only, no line started with a
  header, so the folder was not a generated package and nothing in it was compared.
- An edited old tree with 4 KiB of comment before the header (only 4096 bytes were searched).
- A folder named like the output with an ``__init__.py`` or a module named like a backend
  (``examples/generated/paddle.py``, which can set ``__path__``), or a module named like the
  output (``examples/generated.py``) in another folder: ``python examples/x.py`` imports it
  in place of the checked tree; only ``examples/generated/paddle/`` (a package) was reported.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from losscc import cli
from tests.cli_util import run

ROOT = Path(__file__).resolve().parent.parent


def _project(tmp_path_factory, spec: str) -> Path:
    """A project of one catalogue spec, generated for Paddle."""
    root = tmp_path_factory.mktemp("round16") / "proj"
    (root / "specs").mkdir(parents=True)
    shutil.copy(ROOT / "specs" / f"{spec}.yaml", root / "specs" / f"{spec}.yaml")
    (root / "pyproject.toml").write_text('[tool.losscc]\nbackends = ["paddle"]\n')
    old = os.getcwd()
    os.chdir(root)
    try:
        assert cli.main(["generate", "-q"]) == 0
    finally:
        os.chdir(old)
    return root


@pytest.fixture(scope="module")
def clean_tree(tmp_path_factory):
    return _project(tmp_path_factory, "l1")


@pytest.fixture
def moved(tmp_path, clean_tree):
    """Output moved to `gen2` (up to date); the old `generated` kept, as the project imports it."""
    root = tmp_path / "proj"
    shutil.copytree(clean_tree, root, symlinks=True)
    shutil.copytree(root / "generated", root / "gen2")
    (root / "pyproject.toml").write_text('[tool.losscc]\noutput = "gen2"\nbackends = ["paddle"]\n')
    return root


def test_the_moved_tree_passes(moved, monkeypatch, capsys):
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 0, out


@pytest.mark.parametrize("hide", ["cr", "4k"])
def test_an_old_tree_hiding_its_headers_is_compared(moved, hide, monkeypatch, capsys):
    for f in (moved / "generated" / "paddle").glob("*.py"):
        data = f.read_bytes()
        if f.name == "l1.py":
            data = data.replace(b"return", b"return 0 *", 1)
        if hide == "cr":  # Python reads \r as a line break; the headers are all still there
            data = b"# -*- coding: utf-8 -*-\r" + data.replace(b"\n", b"\r")
        else:
            data = b"#" * 4100 + b"\n" + data
        f.write_bytes(data)
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 1 and "generated/paddle/l1.py (outside the output folder: a module of a generated package" in out


@pytest.mark.parametrize("entry", ["examples/gen2/paddle.py", "examples/gen2/__init__.py", "examples/gen2.py",
                                   "examples/gen2/paddle.cpython-311-x86_64-linux-gnu.so", "tools/gen2.pyc"])
def test_a_module_that_imports_in_place_of_the_output_is_reported(moved, entry, monkeypatch, capsys):
    target = moved / entry
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("import os\n__path__ = [os.path.join(os.path.dirname(__file__), '_impl')]\n")
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 1 and f"unexpected: {entry} (outside the output folder: a module" in out


def test_other_files_beside_a_folder_named_like_the_output_pass(moved, monkeypatch, capsys):
    (moved / "examples" / "gen2").mkdir(parents=True)
    (moved / "examples" / "gen2" / "notes.py").write_text("x = 1\n")
    (moved / "examples" / "gen2.md").write_text("notes\n")
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 0, out


@pytest.fixture(scope="module")
def huber_tree(tmp_path_factory):
    """A project with huber, whose generated module imports `numbers` (its float parameter)."""
    return _project(tmp_path_factory, "huber")


def _imports(root: Path) -> set[str]:
    from losscc.outtree import imported_names

    return set(imported_names({p.name: p.read_text() for p in (root / "generated" / "paddle").glob("*.py")}))


@pytest.mark.parametrize("entry", ["numbers.py", "paddle/__init__.py", "numbers.cpython-311-x86_64-linux-gnu.so"])
def test_a_module_beside_the_output_named_like_an_import_of_the_generated_code(tmp_path, huber_tree, entry,
                                                                                 monkeypatch, capsys):
    """A: `numbers.py` at the project root ran before every generated module (`python -c` puts
    the folder first on sys.path) and replaced the loss functions as they loaded."""
    root = tmp_path / "proj"
    shutil.copytree(huber_tree, root, symlinks=True)
    assert entry.split("/")[0].split(".")[0] in _imports(root)
    target = root / entry
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("import sys\n")
    rc, out, _ = run(monkeypatch, capsys, root, "check")
    name = entry.split("/")[0]
    assert rc == 1 and f"unexpected: {name} (" in out and "that the generated code imports" in out, out


def test_names_the_generated_code_does_not_import_and_namespace_folders_pass(tmp_path, huber_tree, monkeypatch,
                                                                             capsys):
    root = tmp_path / "proj"
    shutil.copytree(huber_tree, root, symlinks=True)
    (root / "helpers.py").write_text("x = 1\n")
    (root / "numbers").mkdir()  # no __init__: a namespace folder loses to the installed module
    (root / "numbers" / "notes.txt").write_text("n\n")
    rc, out, _ = run(monkeypatch, capsys, root, "check")
    assert rc == 0, out
