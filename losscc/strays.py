"""Generated modules outside the output folder: what a pull request that moves the output leaves.

``check`` compares the configured output folder with what the specs produce.  A pull request
can point ``[tool.losscc] output`` at a new folder, generate there, and edit the old tree,
which the project's code still imports: the check of the new folder passes.  So a full
``check`` also looks through the whole project for Python files that carry losscc's header
lines anywhere in their first bytes (a byte-order mark, a blank line or a comment put before
the header does not hide it) and reports every one that is not, byte for byte up to the
version line, the file the specs produce at the same ``<backend>/<module>.py``.  An
identical copy (a ``build/lib`` copy of the current tree) is harmless and passes.

The walk goes through directory file descriptors opened with ``O_NOFOLLOW`` and never
follows a link; it skips the output folder itself, version-control folders and installed
packages (``site-packages``, ``dist-packages``: a tree a project imports by its own path
cannot sit there), and fails closed when the project holds more than `MAX_ENTRIES` entries
or folders deeper than `MAX_DEPTH`.  A header stripped from every line of an edited file is
not detected: that edit shows in the pull request's diff as the removal of the do-not-edit
header (docs/security.md).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from . import outtree
from .render import HEADER_MARK, VERSION_PREFIX

MAX_ENTRIES = 1_000_000    # entries looked at in the whole project, at most
MAX_DEPTH = 64             # folder nesting, at most
# bytes of a file searched for the header lines: all of a module the output could hold (4096
# let a 4 KiB comment before the header hide an edited old tree)
HEAD_BYTES = outtree.MAX_FILE_BYTES
SKIPPED = frozenset({".git", ".hg", ".svn", "site-packages", "dist-packages", "__pycache__"})
MARKS = (HEADER_MARK.encode(), VERSION_PREFIX.encode(), b"# losscc-spec-sha256:")
SUFFIXES = (".py", ".pyw", ".pyi")
STRAY = "outside the output folder:"  # how each report begins
IMPORTABLE = (".py", ".pyw", ".pyc", ".pyo", ".so", ".pyd")

class _Budget:
    def __init__(self) -> None:
        self.left = MAX_ENTRIES


# Python ends a source line at \r\n, \r or \n: a module whose lines end in a bare \r (one line
# to a split at \n) hid its header lines behind a first line of its own
_LINES = re.compile(rb"\r\n|\r|\n")


def _marked(head: bytes) -> bool:
    """Whether one of losscc's header lines starts a line of `head` (a line as Python reads it)."""
    lines = _LINES.split(head)
    return any(line.lstrip(b"\xef\xbb\xbf \t\r\f").startswith(m) for line in lines for m in MARKS)


def find(root: Path, out: Path, expected: dict[str, str], backends: tuple[str, ...]) -> list[tuple[str, str]]:
    """(path relative to `out`, what it is) for each stray generated module of the project."""
    try:
        out_st = os.stat(out, follow_symlinks=False)
        skip = {(out_st.st_dev, out_st.st_ino)}
    except OSError:
        skip = set()
    try:
        fd = os.open(root, outtree._DIR)
    except OSError:
        return []
    found: list[tuple[str, str]] = []
    parent = os.path.relpath(out.parent, root)
    out_parent = None if parent.startswith("..") else "" if parent == "." else parent
    try:
        _walk(fd, "", 0, skip, _Budget(), expected, set(backends), found, out.name, out_parent)
    finally:
        os.close(fd)
    return sorted((os.path.relpath(os.path.join(root, p), out), what) for p, what in found)


def _walk(dfd: int, rel: str, depth: int, skip: set, budget: _Budget, expected: dict[str, str],
          backends: set[str], found: list, out_name: str, out_parent: str | None = None) -> None:
    if depth > MAX_DEPTH:
        found.append((rel, f"folders nested deeper than {MAX_DEPTH}: not searched for generated modules "
                           "outside the output folder (check fails closed)"))
        return
    with os.scandir(dfd) as it:
        entries = []
        for e in it:
            budget.left -= 1
            if budget.left < 0:
                found.append((rel, f"a project of more than {MAX_ENTRIES} entries: not all searched for "
                                   "generated modules outside the output folder (check fails closed)"))
                return
            entries.append(e)
    kinds = {}
    for e in sorted(entries, key=lambda e: e.name):
        try:
            kinds[e.name] = e.stat(follow_symlinks=False)
        except OSError:
            continue
    heads = {n: outtree.read_regular(n, dfd, HEAD_BYTES, prefix=True) or b"" for n, st in kinds.items()
             if stat.S_ISREG(st.st_mode) and n.endswith(SUFFIXES)}
    parts = rel.split("/")
    # a backend folder of a generated package: beside a losscc-generated module, or in a
    # folder named like the output (Python may import it in the output's place)
    tree = parts[-1] in backends and (any(_marked(h) for h in heads.values())
                                      or (len(parts) > 1 and parts[-2] == out_name))
    for name, st in kinds.items():
        path = f"{rel}/{name}" if rel else name
        shadow = _shadow(name, st, parts, rel, backends, out_name, out_parent)
        if shadow:
            found.append((path, shadow))
            continue
        if stat.S_ISDIR(st.st_mode):
            if tree:  # a package or a bytecode cache in a generated package shadows its modules
                found.append((path, f"{STRAY} a folder in a generated package, imported before its modules"))
            elif name not in SKIPPED and (st.st_dev, st.st_ino) not in skip:
                _descend(dfd, name, path, depth, skip, budget, expected, backends, found, out_name, out_parent)
                if budget.left < 0:
                    return
        elif name in heads and (tree or _marked(heads[name])):
            what = _stray(name, dfd, parts[-1], expected, backends, tree)
            if what:
                found.append((path, what))
        elif tree and name.endswith(IMPORTABLE):
            found.append((path, f"{STRAY} an importable file in a generated package that generate never writes"))


def _shadow(name: str, st, parts: list[str], rel: str, backends: set[str], out_name: str,
            out_parent: str | None) -> str | None:
    """What an entry is when Python would import it in place of the output package or one of its
    backend packages from another folder of ``sys.path`` (a script's folder): a module named like
    the output (``examples/generated.py``, ``.so``: a module wins over a namespace folder), and in a
    folder named like the output an ``__init__`` (it runs first and can set ``__path__``) or a
    module named like a backend (``examples/generated/<backend>.py``).  The output's own parent
    folder is outtree's (reported there as ``../generated.py``)."""
    if stat.S_ISDIR(st.st_mode) or not name.endswith(IMPORTABLE):
        return None
    stem = name.split(".")[0]
    if stem == out_name and rel != out_parent:
        return f"{STRAY} a module named like the output folder, imported in its place from this folder"
    if len(parts) and parts[-1] == out_name and (stem == "__init__" or stem in backends):
        return f"{STRAY} a module in a folder named like the output, imported before the generated packages"
    return None


def _descend(dfd, name, path, depth, skip, budget, expected, backends, found, out_name, out_parent) -> None:
    try:
        sub = os.open(name, outtree._DIR, dir_fd=dfd)
    except OSError:
        return
    try:
        _walk(sub, path, depth + 1, skip, budget, expected, backends, found, out_name, out_parent)
    finally:
        os.close(sub)


def _stray(name: str, dfd: int, backend: str, expected: dict[str, str], backends: set[str],
           tree: bool) -> str | None:
    key = f"{backend}/{name}"
    what = "a module of a generated package" if tree else "a losscc-generated module"
    if backend in backends and key in expected:
        data = outtree.read_regular(name, dfd)
        if data is not None and outtree.same(expected[key], data):
            return None
        return f"{STRAY} {what} that differs from the specs' {key}, which the project may import instead"
    return f"{STRAY} {what} that no spec of this project produces"
