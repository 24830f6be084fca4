"""A hostile committed tree cannot fool ``check`` or make ``generate`` write, truncate or
delete outside the project; every read is bounded; every printed byte is escaped.

Each test builds a small project (two specs) in a temporary directory with a sibling
``outside`` directory standing for another project, whose bytes and mtimes must not change.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from losscc import cli, emit
from losscc.backends import names
from losscc.errors import SpecError
from losscc.project import find_project
from losscc.render import HEADER_MARK, VERSION_PREFIX
from tests.cli_util import run

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("l1", "mse")
VICTIM = HEADER_MARK + " from specs/victim.yaml.\n# another project's file\nSECRET = 1\n"


def _project(base: Path) -> tuple[Path, Path]:
    root, outside = base / "proj", base / "outside"
    (root / "specs").mkdir(parents=True)
    outside.mkdir()
    for n in NAMES:
        shutil.copy(ROOT / "specs" / f"{n}.yaml", root / "specs" / f"{n}.yaml")
    (root / "pyproject.toml").write_text("[tool.losscc]\n")
    (outside / "victim.py").write_text(VICTIM)
    return root, outside


@pytest.fixture(scope="module")
def clean_tree(tmp_path_factory):
    """A generated project, built once; tests copy it."""
    base = tmp_path_factory.mktemp("clean")
    root, _ = _project(base)
    old = os.getcwd()
    os.chdir(root)
    try:
        assert cli.main(["generate", "-q"]) == 0
    finally:
        os.chdir(old)
    return root


@pytest.fixture
def proj(tmp_path, clean_tree):
    root, outside = _project(tmp_path)
    shutil.copytree(clean_tree / "generated", root / "generated", symlinks=True)
    return root, outside


def snapshot(d: Path) -> dict:
    """Bytes and mtimes of everything under `d`, links not followed."""
    out = {}
    for p in sorted(d.rglob("*")):
        st = p.lstat()
        out[p.relative_to(d).as_posix()] = (st.st_mtime_ns, os.readlink(p) if p.is_symlink()
                                            else p.read_bytes() if p.is_file() else None)
    return out


# 1. the version line is one whole \n-delimited line at its fixed position

def test_version_line_cannot_hide_code(proj, monkeypatch, capsys):
    root, _ = proj
    p = root / "generated" / "paddle" / "mse.py"
    text = p.read_text()
    lines = text.split("\n")
    k = next(i for i, ln in enumerate(lines) if ln.startswith('"""'))
    lines[k] = VERSION_PREFIX + "\x1c" + lines[k]          # the docstring's opening quotes become a comment
    tampered = "\n".join(lines)
    # what a splitlines()-based normalisation saw: the same text
    assert "".join(ln for ln in tampered.splitlines(True) if not ln.startswith(VERSION_PREFIX)) == \
        "".join(ln for ln in text.splitlines(True) if not ln.startswith(VERSION_PREFIX))
    p.write_text(tampered)
    rc, out, err = run(monkeypatch, capsys, root, "check")
    assert rc == 1 and out.splitlines() == ["stale: generated/paddle/mse.py"], out


@pytest.mark.parametrize("version, ok", [
    ("99.0.0 (sympy 2.0, jinja2 4.0)", True),
    ("99.0.0 (sympy 2.0)", False),                                    # only the exact shape
    ("coding=utf-7 +AAo-print(1)", False),                            # a coding declaration
    ("0.1.0 (sympy 1.14.0, jinja2 3.1.6) vim: set fileencoding=utf-7 :", False),
    ("1.0\r", False),
    ("1.0\x0c", False),
    ("1.0\x85", False),
])
def test_version_line_text(proj, monkeypatch, capsys, version, ok):
    root, _ = proj
    p = root / "generated" / "mindspore" / "l1.py"
    lines = p.read_bytes().split(b"\n")
    k = next(i for i, ln in enumerate(lines) if ln.startswith(VERSION_PREFIX.encode()))
    lines[k] = (VERSION_PREFIX + version).encode("utf-8")
    p.write_bytes(b"\n".join(lines))
    assert run(monkeypatch, capsys, root, "check")[0] == (0 if ok else 1)


def test_a_second_version_line_is_stale(proj, monkeypatch, capsys):
    root, _ = proj
    p = root / "generated" / "paddle" / "l1.py"
    p.write_text(p.read_text().replace("\nimport ", f"\n{VERSION_PREFIX}x\nimport ", 1))
    assert run(monkeypatch, capsys, root, "check")[0] == 1


# 2. files Python would import instead of the checked ones

def test_package_directory_shadowing_a_module(proj, monkeypatch, capsys):
    root, _ = proj
    pkg = root / "generated" / "paddle" / "mse"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import os\n")
    for args in (("check",), ("check", "specs/mse.yaml")):
        rc, out, err = run(monkeypatch, capsys, root, *args)
        assert rc == 1 and "unexpected: generated/paddle/mse (directory;" in out, (args, out)


def _pyc(source: str, flags: int) -> bytes:
    code = compile(source, "l1.py", "exec")
    return importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little") + b"\0" * 8 + marshal.dumps(code)


@pytest.mark.parametrize("name, flags", [
    (f"l1.{sys.implementation.cache_tag}.pyc", 0b01),   # hash-based, never checked against l1.py
    (f"l1.{sys.implementation.cache_tag}.pyc", 0b11),
    ("l1.cpython-310.pyc", 0),
])
def test_bytecode_cache_is_reported(proj, monkeypatch, capsys, name, flags):
    root, _ = proj
    cache = root / "generated" / "paddle" / "__pycache__"
    cache.mkdir()
    (cache / name).write_bytes(_pyc("print('not the checked code')\n", flags))
    rc, out, err = run(monkeypatch, capsys, root, "check", "specs/l1.yaml")
    assert rc == 1 and "unexpected: generated/paddle/__pycache__ (bytecode cache;" in out


@pytest.mark.parametrize("name", ["mse.cpython-311-x86_64-linux-gnu.so", "mse.pyc", "evil.pth", "notes.txt"])
def test_other_files_are_reported(proj, monkeypatch, capsys, name):
    root, _ = proj
    (root / "generated" / "paddle" / name).write_bytes(b"\x7fELF")
    rc, out, err = run(monkeypatch, capsys, root, "check")
    assert rc == 1 and f"unexpected: generated/paddle/{name} (file;" in out


# 3. nothing written, truncated or deleted outside the project

def test_backend_folder_linked_outside(proj, monkeypatch, capsys):
    root, outside = proj
    shutil.rmtree(root / "generated" / "paddle")
    (root / "generated" / "paddle").symlink_to(outside, target_is_directory=True)
    before, inside_before = snapshot(outside), snapshot(root)
    rc, out, err = run(monkeypatch, capsys, root, "generate")
    assert rc == 2 and "generated/paddle: error: is a symbolic link, not a directory" in err and "[E171]" in err
    assert snapshot(outside) == before and snapshot(root) == inside_before
    rc, out, err = run(monkeypatch, capsys, root, "check", "--diff")
    assert rc == 1 and "unexpected: generated/paddle (symbolic link;" in out
    assert "SECRET" not in out and "victim" not in out
    assert snapshot(outside) == before


def test_output_folder_linked_outside(proj, monkeypatch, capsys):
    root, outside = proj
    shutil.rmtree(root / "generated")
    (root / "generated").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    for cmd in ("generate", "check"):
        rc, out, err = run(monkeypatch, capsys, root, cmd)
        assert rc == 2 and "generated: error: output folder leaves the project root" in err and "[E172]" in err
    assert snapshot(outside) == before


@pytest.mark.parametrize("kind", ["link", "dir"])
def test_lock_path_cannot_be_redirected(proj, monkeypatch, capsys, kind):
    root, outside = proj
    lock = root / "generated" / ".losscc.lock"
    if kind == "link":
        lock.symlink_to(outside / "victim.py")
    else:
        lock.mkdir()
    before = snapshot(outside)
    rc, out, err = run(monkeypatch, capsys, root, "generate")
    assert rc == 0, err
    assert "generated/.losscc.lock: warning:" in err
    assert snapshot(outside) == before
    rc, out, err = run(monkeypatch, capsys, root, "check")
    assert rc == 1 and "unexpected: generated/.losscc.lock" in out


def test_module_file_linked_outside(proj, monkeypatch, capsys):
    root, outside = proj
    target = root / "generated" / "paddle" / "mse.py"
    target.unlink()
    target.symlink_to(outside / "victim.py")
    (root / "generated" / "paddle" / "old_loss.py").symlink_to(outside / "victim.py")
    before = snapshot(outside)
    rc, out, err = run(monkeypatch, capsys, root, "generate")
    assert rc == 2 and "generated/paddle/mse.py: error: is a symbolic link" in err
    assert snapshot(outside) == before
    rc, out, err = run(monkeypatch, capsys, root, "check", "--diff")
    assert rc == 1 and "SECRET" not in out
    assert "unexpected: generated/paddle/mse.py (symbolic link;" in out
    assert "unexpected: generated/paddle/old_loss.py (symbolic link;" in out
    assert snapshot(outside) == before


def test_spec_linked_outside_is_refused(proj, monkeypatch, capsys):
    root, outside = proj
    (outside / "evil.yaml").write_text("name: evil\nsummary: SECRET_SPEC\n")
    (root / "specs" / "evil.yaml").symlink_to(outside / "evil.yaml")
    for args in (("generate",), ("check",), ("check", "specs/evil.yaml"), ("check", "../outside/evil.yaml"),
                 ("explain", "specs/evil.yaml")):
        rc, out, err = run(monkeypatch, capsys, root, *args)
        assert rc == 2, args
        assert "spec path leaves the project root" in err and "[E172]" in err
        assert "SECRET_SPEC" not in out + err


# 4. bounded reads

BOUNDED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from losscc.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_reads_are_bounded(proj):
    root, _ = proj
    d = root / "generated"
    (d / "paddle" / "mse.py").unlink()
    (d / "paddle" / "mse.py").symlink_to("/dev/zero")
    with open(d / "paddle" / "l1.py", "r+b") as f:     # a sparse 8 GB file carrying the header
        f.truncate(8 << 30)
    (d / "mindspore" / "mse.py").unlink()
    os.mkfifo(d / "mindspore" / "mse.py")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args, code in ((["check", "--diff"], 1), (["generate"], 2)):
        r = subprocess.run([sys.executable, "-c", BOUNDED, *args], cwd=root, capture_output=True, text=True,
                           timeout=20, env=env)
        assert r.returncode == code, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        if code == 1:
            assert "unexpected: generated/paddle/mse.py (symbolic link;" in r.stdout
            assert "unexpected: generated/paddle/l1.py (larger than" in r.stdout
            assert "unexpected: generated/mindspore/mse.py (special file;" in r.stdout


# 5. hostile shapes are errors, all or nothing

def test_backend_path_is_a_file(proj, monkeypatch, capsys):
    root, _ = proj
    shutil.rmtree(root / "generated")
    (root / "generated").mkdir()
    (root / "generated" / "paddle").write_text("not a folder\n")
    rc, out, err = run(monkeypatch, capsys, root, "generate")
    assert rc == 2 and "generated/paddle: error: is a file, not a directory" in err
    assert sorted(p.name for p in (root / "generated").iterdir()) == ["paddle"], "nothing written, no lock left"
    rc, out, err = run(monkeypatch, capsys, root, "check")
    assert rc == 1 and "unexpected: generated/paddle (file;" in out


def test_non_utf8_after_8k(proj, monkeypatch, capsys):
    root, _ = proj
    p = root / "generated" / "paddle" / "mse.py"
    data = p.read_bytes()
    p.write_bytes(data + b"# padding\n" * 1000 + b"\xff\x1b[2J\n")   # the bad byte after 10 KB
    rc, out, err = run(monkeypatch, capsys, root, "check", "--diff")
    assert rc == 1 and "stale: generated/paddle/mse.py" in out
    assert "\\xff\\x1b[2J" in out and "\x1b" not in out


# 6. everything printed is escaped

def test_control_characters_in_names_are_escaped(proj, monkeypatch, capsys):
    root, _ = proj
    (root / "generated" / "paddle" / "evil\x1b[2J\u202e.py").write_text("x = 1\n")
    rc, out, err = run(monkeypatch, capsys, root, "check", "--format", "text")
    assert rc == 1 and "unexpected: generated/paddle/evil\\x1b[2J\\u202e.py (file;" in out
    assert "\x1b" not in out + err and "\u202e" not in out + err
    shutil.copy(root / "specs" / "l1.yaml", root / "specs" / "l1\x1b[31m.yaml")
    rc, out, err = run(monkeypatch, capsys, root, "generate")
    assert rc == 2 and "l1\\x1b[31m" in err and "\x1b" not in out + err


# a fuzzer over committed tree layouts

ENTRY_NAMES = ["mse", "mse.py", "l1.py", "__init__.py", "__pycache__", "x.py", "mse.so", "a.pth", ".hidden",
               "mse.cpython-311.pyc", "README"]
MUTATIONS = st.lists(st.tuples(
    st.sampled_from(["file", "header_file", "dir", "link_in", "link_out", "link_dangling", "fifo", "insert",
                     "truncate", "version_ctrl"]),
    st.sampled_from(["", "paddle", "mindspore"]),
    st.sampled_from(ENTRY_NAMES),
    st.integers(0, 10_000),
), min_size=1, max_size=3)


def _mutate(out: Path, outside: Path, kind: str, where: str, name: str, n: int) -> bool:
    """Apply one mutation; False if it did not apply (nothing changed)."""
    d = out / where
    if not d.is_dir() or d.is_symlink():
        return False
    p = d / name
    modules = sorted(q for q in d.glob("*.py") if q.is_file() and not q.is_symlink()
                     and VERSION_PREFIX.encode() in q.read_bytes()) if where else []  # generated ones
    if kind in ("insert", "truncate", "version_ctrl"):
        if not modules:
            return False
        q = modules[n % len(modules)]
        data = q.read_bytes()
        lines = data.split(b"\n")
        k = next(i for i, ln in enumerate(lines) if ln.startswith(VERSION_PREFIX.encode()))
        start = sum(len(ln) + 1 for ln in lines[:k])
        if kind == "version_ctrl":
            lines[k] += bytes([n % 32])
            q.write_bytes(b"\n".join(lines))
            return True
        if kind == "truncate":
            q.write_bytes(data[: n % len(data)])
            return True
        i = n % len(data)
        if start <= i <= start + len(lines[k]):
            i = start + len(lines[k]) + 1
        q.write_bytes(data[:i] + b"\x00" + data[i:])   # an inserted byte: two never cancel
        return True
    if p.exists() or p.is_symlink():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
    if kind == "file":
        p.write_bytes(b"x = 1\n")
    elif kind == "header_file":
        p.write_text(HEADER_MARK + " from specs/gone.yaml.\n")
    elif kind == "dir":
        p.mkdir()
        if n % 2:
            (p / "__init__.py").write_text("")
    elif kind == "link_in":
        p.symlink_to(out / "paddle" / "l1.py")
    elif kind == "link_out":
        p.symlink_to(outside / "victim.py")
    elif kind == "link_dangling":
        p.symlink_to(outside / "nothing")
    elif kind == "fifo":
        os.mkfifo(p)
    return True


@pytest.fixture(scope="module")
def expected(clean_tree):
    old = os.getcwd()
    os.chdir(clean_tree)
    try:
        return emit.build(find_project(clean_tree), [])
    finally:
        os.chdir(old)


@settings(derandomize=True, max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(MUTATIONS)
def test_fuzz_tree_layouts_never_pass(clean_tree, expected, mutations):
    b = expected
    with tempfile.TemporaryDirectory() as tmp:
        out, outside = Path(tmp) / "generated", Path(tmp) / "outside"
        outside.mkdir()
        (outside / "victim.py").write_text(VICTIM)
        shutil.copytree(clean_tree / "generated", out, symlinks=True)
        applied = [m for m in mutations if _mutate(out, outside, *m)]
        if not applied:
            return
        try:
            report = emit.compare(b.files, out, b.backends, full=True)
        except SpecError:
            return
        assert not report.clean, applied
        assert (outside / "victim.py").read_text() == VICTIM


def test_output_folder_is_a_file(proj, monkeypatch, capsys):
    root, _ = proj
    shutil.rmtree(root / "generated")
    (root / "generated").write_text("x\n")
    for cmd in ("generate", "check"):
        rc, out, err = run(monkeypatch, capsys, root, cmd)
        assert rc == 2 and "generated: error: cannot open the output" in err and "[E171]" in err, err
    assert (root / "generated").read_text() == "x\n"


def test_large_stale_generated_file_is_extra_and_pruned(proj, monkeypatch, capsys):
    root, _ = proj
    old = root / "generated" / "paddle" / "old_loss.py"
    old.write_text((root / "generated" / "paddle" / "mse.py").read_text() + "# padding\n" * 2000)
    rc, out, err = run(monkeypatch, capsys, root, "check")
    assert rc == 1 and out.splitlines() == ["extra: generated/paddle/old_loss.py"]
    assert run(monkeypatch, capsys, root, "generate")[0] == 0
    assert not old.exists()
    assert run(monkeypatch, capsys, root, "check")[0] == 0


def test_an_output_folder_named_outside_is_used_as_given(proj, monkeypatch, capsys):
    root, outside = proj
    rc, out, err = run(monkeypatch, capsys, root, "generate", "-o", str(outside / "gen"), "specs/l1.yaml")
    assert rc == 0, err
    assert (outside / "gen" / "paddle" / "l1.py").is_file()
    assert run(monkeypatch, capsys, root, "check", "-o", "../outside/gen", "specs/l1.yaml")[0] == 0



# found by a review of the merged tree: the package __init__'s version line as a coding
# declaration, partial-looking runs that cover everything, unescaped folder names

def test_init_version_line_cannot_declare_an_encoding(proj, monkeypatch, capsys):
    """Python reads a `coding:` declaration on lines 1-2; in UTF-7 `+AAo-` is a newline."""
    root, _ = proj
    p = root / "generated" / "paddle" / "__init__.py"
    lines = p.read_text().split("\n")
    k = next(i for i, ln in enumerate(lines) if ln.startswith(VERSION_PREFIX))
    assert k >= 2  # below the lines Python reads a coding declaration from
    lines[k] = VERSION_PREFIX + 'coding=utf-7 +AAo-print("PWNED")'
    p.write_text("\n".join(lines))
    rc, out, _ = run(monkeypatch, capsys, root, "check")
    assert rc == 1 and "stale: generated/paddle/__init__.py" in out


@pytest.mark.parametrize("args", [["specs"], [a for b in names() for a in ("--backend", b)],
                                  ["specs/l1.yaml", "specs/mse.yaml"]])
def test_a_run_that_covers_everything_is_a_full_check(proj, monkeypatch, capsys, args):
    root, _ = proj
    (root / "generated" / "__init__.py").write_text('print("PWNED")\n')
    (root / "generated" / "paddle" / "evil.py").write_text('print("PWNED")\n')
    rc, out, _ = run(monkeypatch, capsys, root, "check", *args)
    assert rc == 1 and "generated/__init__.py" in out and "generated/paddle/evil.py" in out, out


def test_output_folder_name_is_escaped(proj, monkeypatch, capsys):
    root, _ = proj
    name = "gen\x1b[31m\u202e"
    rc, out, err = run(monkeypatch, capsys, root, "generate", "-o", name)
    assert rc == 0 and "\x1b" not in out + err and "\u202e" not in out + err
    rc, out, err = run(monkeypatch, capsys, root, "check", "-o", name)
    assert rc == 0 and "\x1b" not in out + err and "\\x1b" in out


def test_deeply_nested_toml_is_a_config_error(proj, monkeypatch, capsys):
    root, _ = proj
    with open(root / "pyproject.toml", "a") as f:
        f.write("[tool.deep]\na = " + "[" * 50000 + "]" * 50000 + "\n")
    rc, out, err = run(monkeypatch, capsys, root, "check")
    assert rc == 2 and "[E191]" in err and "Traceback" not in err


def test_symlinked_pyproject_is_not_followed(proj, monkeypatch, capsys):
    root, outside = proj
    (outside / "other.toml").write_text("[tool.losscc]\nSECRET_KEY_abc123 = 1\n")
    (root / "pyproject.toml").unlink()
    (root / "pyproject.toml").symlink_to(outside / "other.toml")
    rc, out, err = run(monkeypatch, capsys, root, "check")
    assert rc == 2 and "[E191]" in err and "symbolic link" in err and "SECRET_KEY" not in out + err
