"""A pull request that moves ``[tool.losscc] output`` and edits the old tree cannot pass ``check``.

The old tree is what the project's code still imports; ``check`` of the new folder alone would
pass.  A full ``check`` reports every losscc-generated module elsewhere in the project that is
not the file the specs produce (losscc/strays.py).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from losscc import cli, strays
from tests.cli_util import run

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("l1", "mse")


@pytest.fixture(scope="module")
def clean_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("strays") / "proj"
    (root / "specs").mkdir(parents=True)
    for n in NAMES:
        shutil.copy(ROOT / "specs" / f"{n}.yaml", root / "specs" / f"{n}.yaml")
    (root / "pyproject.toml").write_text('[tool.losscc]\nbackends = ["paddle", "mindspore"]\n')
    old = os.getcwd()
    os.chdir(root)
    try:
        assert cli.main(["generate", "-q"]) == 0
    finally:
        os.chdir(old)
    return root


@pytest.fixture
def moved(tmp_path, clean_tree):
    """The attack's tree: output moved to `gen2` (up to date), the old `generated` kept."""
    root = tmp_path / "proj"
    shutil.copytree(clean_tree, root, symlinks=True)
    shutil.copytree(root / "generated", root / "gen2")
    (root / "pyproject.toml").write_text('[tool.losscc]\noutput = "gen2"\nbackends = ["paddle", "mindspore"]\n')
    return root


def _edit(path: Path, before: bytes = b"") -> None:
    path.write_bytes(before + path.read_bytes().replace(b"return", b"return 0 *", 1))


def test_an_untouched_old_tree_or_build_copy_passes(moved, monkeypatch, capsys):
    shutil.copytree(moved / "generated", moved / "build" / "lib" / "pkg")
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 0, out


def test_an_edited_old_tree_fails_check(moved, monkeypatch, capsys):
    _edit(moved / "generated" / "paddle" / "l1.py")
    rc, out, err = run(monkeypatch, capsys, moved, "check")
    assert rc == 1
    assert "unexpected: generated/paddle/l1.py (outside the output folder: a module of a generated package" in out
    assert "Traceback" not in out + err
    rc, out, _ = run(monkeypatch, capsys, moved, "check", "--format", "json")
    assert rc == 1
    assert [u["path"] for u in json.loads(out)["unexpected"]] == ["generated/paddle/l1.py"]
    # generate leaves it alone and warns
    rc, _, err = run(monkeypatch, capsys, moved, "generate")
    assert rc == 0 and "generated/paddle/l1.py" in err and "W171" in err
    assert "not written by losscc" not in err


@pytest.mark.parametrize("before", [b"\xef\xbb\xbf", b"\n\n", b"# -*- coding: utf-8 -*-\n", b"  \n#!/usr/bin/env python\n"])
def test_the_header_is_found_behind_a_bom_blank_lines_or_comments(moved, before, monkeypatch, capsys):
    _edit(moved / "generated" / "mindspore" / "mse.py", before)
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 1 and "generated/mindspore/mse.py" in out


def test_a_module_no_spec_produces_is_reported(moved, monkeypatch, capsys):
    src = (moved / "generated" / "paddle" / "l1.py").read_text()
    (moved / "tools").mkdir()
    (moved / "tools" / "l1_old.py").write_text(src)
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 1 and "tools/l1_old.py (outside the output folder: a losscc-generated module that no spec" in out


def test_an_old_tree_with_headers_stripped_is_found_by_its_neighbours(moved, monkeypatch, capsys):
    """One module of the old tree edited and its header removed: the backend folder still
    holds losscc-generated modules (its __init__), so every module in it is compared."""
    path = moved / "generated" / "paddle" / "l1.py"
    path.write_text("\n".join(line for line in path.read_text().split("\n") if not line.startswith("# "))
                    .replace("return", "return 0 *", 1))
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 1 and "generated/paddle/l1.py (outside the output folder: a module of a generated package" in out


def test_a_package_named_like_the_output_shadows_it(moved, monkeypatch, capsys):
    """examples/gen2/paddle/__init__.py without any header: `python examples/x.py` imports
    it in place of the checked gen2 (red-team round 14)."""
    pkg = moved / "examples" / "gen2" / "paddle"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("import os\n")
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 1 and "examples/gen2/paddle/__init__.py (outside the output folder: a module of a generated" in out


@pytest.mark.parametrize("entry", ["l1.cpython-312.pyc", "l1.abi3.so", "__pycache__/", "l1/"])
def test_bytecode_extensions_and_packages_in_an_old_tree_are_reported(moved, entry, monkeypatch, capsys):
    target = moved / "generated" / "paddle" / entry.rstrip("/")
    if entry.endswith("/"):
        target.mkdir()
        (target / "__init__.py").write_text("")
    else:
        target.write_bytes(b"\0")
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 1 and f"generated/paddle/{entry.rstrip('/')} (outside the output folder:" in out


def test_a_users_own_backend_named_folder_is_left_alone(moved, monkeypatch, capsys):
    pkg = moved / "src" / "models" / "paddle"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .net import Net\n")
    (pkg / "net.py").write_text("class Net:\n    pass\n")
    (pkg / "__pycache__").mkdir()
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 0, out


def test_installed_packages_and_vcs_folders_are_not_searched(moved, monkeypatch, capsys):
    for d in (".venv/lib/python3.12/site-packages/pkg/paddle", ".git/objects/paddle"):
        (moved / d).mkdir(parents=True)
        shutil.copy(moved / "generated" / "paddle" / "l1.py", moved / d / "l1.py")
        _edit(moved / d / "l1.py")
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 0, out


def test_links_are_not_followed(moved, tmp_path, monkeypatch, capsys):
    outside = tmp_path / "outside" / "paddle"
    outside.mkdir(parents=True)
    shutil.copy(moved / "generated" / "paddle" / "l1.py", outside / "l1.py")
    _edit(outside / "l1.py")
    os.symlink(outside.parent, moved / "elsewhere")
    os.symlink(".", moved / "loop")
    os.symlink(outside / "l1.py", moved / "l1_link.py")
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 0, out


def test_a_subset_check_does_not_search(moved, monkeypatch, capsys):
    _edit(moved / "generated" / "paddle" / "l1.py")
    rc, out, _ = run(monkeypatch, capsys, moved, "check", "specs/mse.yaml")
    assert rc == 0, out


def test_the_walk_fails_closed(moved, monkeypatch, capsys):
    monkeypatch.setattr(strays, "MAX_ENTRIES", 5)
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 1 and "not all searched" in out
    monkeypatch.setattr(strays, "MAX_ENTRIES", 10**6)
    monkeypatch.setattr(strays, "MAX_DEPTH", 1)
    rc, out, _ = run(monkeypatch, capsys, moved, "check")
    assert rc == 1 and "nested deeper than 1" in out
