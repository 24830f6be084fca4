"""Backends are discovered units: each module of losscc.backends owns its framework's names,
table, template and runner; nothing else in the package names a framework."""

import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import losscc.backends as backends_pkg
from losscc.backends import SUPPORT_MODULES, all_backends, names
from losscc.spec import RESERVED

ROOT = Path(__file__).resolve().parent.parent
# the frameworks any backend targets, and those a backend may come to target
FRAMEWORK_WORDS = sorted({"mindspore", "paddle", "paddlepaddle", "jax"} | set(names())
                         | {m for b in all_backends() for m in b.frameworks})


def test_backends_are_the_modules_of_the_package():
    modules = sorted(p.stem for p in (ROOT / "losscc" / "backends").glob("*.py")
                     if not p.stem.startswith("_") and p.stem not in SUPPORT_MODULES)
    assert list(names()) == modules and len(modules) >= 2
    for b in all_backends():
        template = ROOT / "templates" / b.name / b.template
        assert template.read_text(encoding="utf-8").startswith('{% extends "_module.py.j2" %}'), template
        assert b.frameworks and b.runner is not None, b.name


def test_no_file_outside_a_backend_names_a_framework():
    """As words, any case, in code, comments and docstrings of losscc/ and templates/."""
    word = re.compile(r"\b(" + "|".join(FRAMEWORK_WORDS) + r")\b", re.IGNORECASE)
    own = {ROOT / "losscc" / "backends" / f"{b}.py" for b in names()}
    bad = []
    for path in sorted([*(ROOT / "losscc").rglob("*"), *(ROOT / "templates").rglob("*")]):
        rel = path.relative_to(ROOT)
        if not path.is_file() or path in own or "__pycache__" in rel.parts:
            continue
        if rel.parts[0] == "templates" and len(rel.parts) > 2 and rel.parts[1] in names():
            continue
        for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if word.search(line):
                bad.append(f"{rel}:{k}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_the_word_check_finds_a_framework_name():
    word = re.compile(r"\b(" + "|".join(FRAMEWORK_WORDS) + r")\b", re.IGNORECASE)
    assert word.search("# MindSpore's clamp") and word.search("import paddle") and not word.search("paddles")


def test_reserved_names_are_the_backends_import_names():
    for b in all_backends():
        assert b.bound_names <= RESERVED, b.name
    assert {"ms", "ops", "nn", "paddle", "F"} <= RESERVED


def test_frameworks_and_names_come_from_the_import_lines():
    ops = backends_pkg.get("paddle").ops
    b = backends_pkg.Backend(name="x", imports=("import a.b as ab", "from c.d import e, f as g", "import h"), ops=ops)
    assert b.frameworks == ("a", "c", "h")
    assert b.bound_names == {"ab", "e", "g", "h"}
    assert backends_pkg.Backend(name="y", imports=("import surely_not_installed_zz",), ops=ops).missing() == (
        "surely_not_installed_zz",)


def test_a_module_without_backend_is_refused(monkeypatch):
    fake = types.ModuleType("losscc.backends.stray")
    real = backends_pkg.importlib.import_module
    monkeypatch.setattr(backends_pkg.pkgutil, "iter_modules",
                        lambda path: [types.SimpleNamespace(name="stray")])
    monkeypatch.setattr(backends_pkg.importlib, "import_module",
                        lambda name: fake if name.endswith(".stray") else real(name))
    backends_pkg.all_backends.cache_clear()
    try:
        with pytest.raises(ImportError, match=r"losscc.backends.stray must define BACKEND"):
            backends_pkg.all_backends()
    finally:
        monkeypatch.undo()
        backends_pkg.all_backends.cache_clear()
    assert names()


def test_generating_imports_no_framework(tmp_path):
    """Backend modules import their framework only inside the runner."""
    code = ("import sys\n"
            "from losscc import emit, spec, backends\n"
            "s = spec.load_spec('specs/focal.yaml', 'specs/focal.yaml')\n"
            "for b in backends.all_backends():\n"
            "    emit.compile_spec(s, b)\n"
            "frameworks = {m for b in backends.all_backends() for m in b.frameworks}\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in frameworks | {'numpy'}))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout


def test_the_standard_library_is_no_framework():
    """A generated module may import the standard library: its names are reserved, but it is
    nothing to install, load or keep out of losscc's files."""
    import dataclasses

    from losscc.backends import get

    b = dataclasses.replace(get("paddle"), imports=("import dataclasses", "from os import path", "import paddle"))
    assert b.frameworks == ("paddle",) and not b.missing()
    assert {"dataclasses", "path", "paddle"} == b.bound_names


def test_the_install_hint_names_the_extra_of_the_backend_without_its_framework(monkeypatch, capsys):
    """E199 says which optional-dependency group of losscc installs the missing framework."""
    import dataclasses

    from losscc import commands
    from losscc.backends import get

    other = dataclasses.replace(get("paddle"), name="other", imports=("import surely_not_installed_zz",),
                                extra="other")
    monkeypatch.setattr(commands, "get_backend", lambda n: other if n == "other" else get(n))
    assert commands._verify_backends(types.SimpleNamespace(backend=["other", "paddle"])) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "surely_not_installed_zz cannot be imported" in line and "pip install 'losscc[other]'" in line, line
    assert get("paddle").extra == get("mindspore").extra == "frameworks"
