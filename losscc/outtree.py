"""The committed output tree, compared and written as a tree, never through a link.

The expected tree is computed in memory: relative path (``<backend>/<module>.py``) ->
text.  The output folder must hold exactly those files, byte for byte, except the one
``losscc-version`` header line, matched as a whole ``\\n``-delimited line at the position
the expected text has it.  Anything else generate would not write (directories, links,
bytecode caches, other files) is *unexpected* and makes ``check`` fail.

All access goes through directory file descriptors opened with ``O_NOFOLLOW``: links
are reported, never followed; every read is bounded before it happens (``lstat``, size
limit, a bounded read of a regular file); writes go to an ``O_EXCL`` temporary file in
the same directory and are moved into place with ``os.replace``.  A run that writes
holds an exclusive ``flock`` on the output directory itself, so no lock file exists
that a link could redirect.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .render import HEADER_MARK, VERSION_PREFIX

MAX_FILE_BYTES = 4 * 1024 * 1024   # one committed file
MAX_ENTRIES = 10000                # entries of one output directory
# the version line's exact shape (render.version_line): versions only, no ':' or '=' (so it can
# never read as a `coding:` declaration) and nothing else printable ASCII would allow
_V = rb"[0-9A-Za-z.+!_-]{1,40}"
VERSION_LINE = re.compile(re.escape(VERSION_PREFIX.encode()) + _V + rb" \(sympy " + _V + rb", jinja2 " + _V + rb"\)")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class TreeError(Exception):
    """A hostile or unusable output tree; `problems` are (relative path, message)."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{p}: {m}" for p, m in problems))


class OutputLocked(Exception):
    pass


@dataclass(frozen=True)
class Report:
    stale: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)       # generated files no spec produces
    foreign: list[str] = field(default_factory=list)     # a file without the header where one is expected
    unexpected: list[tuple[str, str]] = field(default_factory=list)  # (path, what it is)
    current: dict = field(default_factory=dict)          # rel -> committed bytes (regular files read)

    @property
    def clean(self) -> bool:
        return not (self.stale or self.missing or self.extra or self.foreign or self.unexpected)


def version_index(expected: bytes) -> int | None:
    """Position of the version header line in the expected text (it sits in the header)."""
    for k, line in enumerate(expected.split(b"\n")[:8]):
        if line.startswith(VERSION_PREFIX.encode()):
            return k
    return None


def same(expected: str, data: bytes) -> bool:
    """Whether committed `data` is `expected` up to the version header line's text."""
    want = expected.encode("utf-8")
    if data == want:
        return True
    k = version_index(want)
    a, b = want.split(b"\n"), data.split(b"\n")
    if k is None or len(a) != len(b):
        return False
    return all(x == y for i, (x, y) in enumerate(zip(a, b)) if i != k) and VERSION_LINE.fullmatch(b[k]) is not None


def _kind(st: os.stat_result) -> str:
    m = st.st_mode
    if stat.S_ISLNK(m):
        return "symbolic link"
    if stat.S_ISDIR(m):
        return "directory"
    if stat.S_ISREG(m):
        return "file"
    return "special file"


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def read_regular(name: str, dir_fd: int, limit: int = MAX_FILE_BYTES, prefix: bool = False) -> bytes | None:
    """The bytes of a regular file of at most `limit` bytes, else None (never follows a link);
    with `prefix`, its first `limit` bytes whatever its size."""
    st = _lstat(name, dir_fd)
    if st is None or not stat.S_ISREG(st.st_mode) or (st.st_size > limit and not prefix):
        return None
    try:
        fd = os.open(name, _READ, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return data[:limit] if prefix else data if len(data) <= limit else None
    finally:
        os.close(fd)


def _has_header(name: str, dir_fd: int) -> bool:
    """Whether a regular file starts with the losscc header (only its first bytes are read)."""
    head = read_regular(name, dir_fd, len(HEADER_MARK), prefix=True)
    return head is not None and head.startswith(HEADER_MARK.encode())


def _entries(dir_fd: int, shown: str) -> list[os.DirEntry]:
    out = []
    with os.scandir(dir_fd) as it:
        for e in it:
            out.append(e)
            if len(out) > MAX_ENTRIES:
                raise TreeError([(shown, f"more than {MAX_ENTRIES} entries")])
    return sorted(out, key=lambda e: e.name)


def _open_dir(name: str, dir_fd: int) -> int | None:
    try:
        return os.open(name, _DIR, dir_fd=dir_fd)
    except OSError:
        return None


def generated_modules(out: Path, backend: str) -> set[str]:
    """The modules of `out`/`backend` that losscc wrote (regular ``.py`` files with the
    header, ``__init__`` aside), read without following a link; empty when there is none."""
    try:
        out_fd = os.open(out, _DIR)
    except OSError:
        return set()
    try:
        bfd = _open_dir(backend, out_fd)
        if bfd is None:
            return set()
        try:
            return {e.name[:-3] for e in _entries(bfd, backend)
                    if e.name.endswith(".py") and e.name != "__init__.py" and e.is_file(follow_symlinks=False)
                    and _has_header(e.name, bfd)}
        finally:
            os.close(bfd)
    finally:
        os.close(out_fd)


def _related(name: str, modules: set[str] | None) -> bool:
    """Whether an entry can stand in for one of `modules` (None: every entry counts)."""
    return modules is None or name == "__pycache__" or name.split(".")[0] in modules


_IMPORTABLE = (".py", ".pyc", ".pyo", ".pyw", ".so", ".pyd")
_SIBLINGS_READ = 100_000  # entries of the output's parent folder looked at, at most


_IMPORT = re.compile(r"^(?:import|from)\s+([A-Za-z_]\w*)", re.M)


def imported_names(expected: dict[str, str]) -> frozenset[str]:
    """The top-level names the generated modules import (`numbers`, `dataclasses`, the framework)."""
    return frozenset(m for text in expected.values() for m in _IMPORT.findall(text))


def _shadowing_siblings(out: Path, imported: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """Entries beside the output folder that Python imports in its place: the folder has no
    ``__init__.py`` (a namespace package), and a module ``generated.py`` (``.pyc``, ``.so``, an
    extension module of any interpreter or platform, ``generated.cpython-312-x86_64-linux-gnu.so``
    or ``generated.cp311-win_amd64.pyd``) in the same folder wins over a namespace folder of
    that name.  So does a module or a regular package named like one the generated code
    imports (`imported`): the folder is first on ``sys.path`` where `python -c` runs there,
    and a ``numbers.py`` beside it ran before every generated module (red-team round 16).
    Reported as ``../<name>``."""
    try:
        pfd = os.open(out.parent, _DIR)
    except OSError:
        return []
    try:
        found = []
        with os.scandir(pfd) as it:
            for k, e in enumerate(it):
                if k >= _SIBLINGS_READ:  # fail closed: an entry not looked at may shadow the output
                    found.append(("../", f"a folder of more than {_SIBLINGS_READ} entries; the entries "
                                  "beside the output folder that Python could import instead were not all read"))
                    break
                if e.name.startswith(out.name + ".") and e.name.endswith(_IMPORTABLE):
                    found.append((f"../{e.name}", _kind(e.stat(follow_symlinks=False))
                                  + ", imported instead of the output package"))
                elif e.name.split(".")[0] in imported and _importable_here(pfd, e):
                    found.append((f"../{e.name}", _kind(e.stat(follow_symlinks=False))
                                  + f", imported instead of the module '{e.name.split('.')[0]}' "
                                  "that the generated code imports"))
        return sorted(found)
    finally:
        os.close(pfd)


def _importable_here(pfd: int, e: os.DirEntry) -> bool:
    """A module file, a folder holding an ``__init__`` (a regular package; a namespace folder
    loses to the installed module), or a link (not followed: reported)."""
    if "." in e.name:
        return e.name.endswith(_IMPORTABLE)
    try:
        m = os.stat(e.name, dir_fd=pfd, follow_symlinks=False).st_mode
    except OSError:
        return True  # unreadable: fail closed
    return stat.S_ISLNK(m) or (stat.S_ISDIR(m) and _has_init(pfd, e.name))


def _has_init(pfd: int, name: str) -> bool:
    try:
        fd = os.open(name, _DIR, dir_fd=pfd)
    except OSError:
        return True
    try:
        return any(n.split(".")[0] == "__init__" and n.endswith(_IMPORTABLE) for n in os.listdir(fd))
    finally:
        os.close(fd)


def inspect(expected: dict[str, str], out: Path, backends: tuple[str, ...], full: bool) -> Report:
    """Compare the output folder with the expected files.  `full`: the whole tree is in scope
    (extra generated files and unexpected top-level entries count); otherwise only the
    expected modules and entries that could shadow them."""
    r = Report()
    r.unexpected.extend(_shadowing_siblings(out, imported_names(expected)))
    if not out.exists() and not out.is_symlink():
        r.missing.extend(sorted(expected))
        return r
    try:
        root_fd = os.open(out, _DIR)
    except OSError as exc:
        raise TreeError([(".", f"cannot open the output folder: {exc.strerror}")]) from None
    try:
        if full:
            for e in _entries(root_fd, "."):
                if e.name not in backends or e.is_symlink() or not e.is_dir(follow_symlinks=False):
                    r.unexpected.append((e.name, _kind(e.stat(follow_symlinks=False))))
        for b in backends:
            names = {rel.split("/", 1)[1]: rel for rel in expected if rel.startswith(b + "/")}
            st = _lstat(b, root_fd)
            if st is None or not stat.S_ISDIR(st.st_mode):
                if st is not None and not full:
                    r.unexpected.append((b, _kind(st)))
                r.missing.extend(sorted(names.values()))
                continue
            bfd = _open_dir(b, root_fd)
            if bfd is None:
                raise TreeError([(b, "cannot open the directory")])
            try:
                _inspect_backend(r, b, bfd, names, expected, full)
            finally:
                os.close(bfd)
    finally:
        os.close(root_fd)
    for lst in (r.stale, r.missing, r.extra, r.foreign, r.unexpected):
        lst.sort()
    return r


def _inspect_backend(r: Report, b: str, bfd: int, names: dict[str, str], expected: dict[str, str],
                     full: bool) -> None:
    modules = None if full else {n.split(".")[0] for n in names}
    seen = set()
    for e in _entries(bfd, b):
        rel = f"{b}/{e.name}"
        st = e.stat(follow_symlinks=False)
        if e.name in names and stat.S_ISREG(st.st_mode):
            seen.add(e.name)
            data = read_regular(e.name, bfd)
            if data is None:
                r.unexpected.append((rel, f"larger than {MAX_FILE_BYTES} bytes"))
            elif not data.startswith(HEADER_MARK.encode()):
                r.foreign.append(rel)
            else:
                r.current[rel] = data
                if not same(expected[rel], data):
                    r.stale.append(rel)
            continue
        if not _related(e.name, modules):
            continue
        if e.name in names:
            seen.add(e.name)
            r.unexpected.append((rel, _kind(st)))
            continue
        if full and stat.S_ISREG(st.st_mode) and e.name.endswith(".py") and _has_header(e.name, bfd):
            data = read_regular(e.name, bfd)
            if data is None:
                r.unexpected.append((rel, f"larger than {MAX_FILE_BYTES} bytes"))
            else:
                r.extra.append(rel)
                r.current[rel] = data
            continue
        r.unexpected.append((rel, "bytecode cache" if e.name == "__pycache__" and stat.S_ISDIR(st.st_mode)
                             else _kind(st)))
    r.missing.extend(rel for name, rel in names.items() if name not in seen)


def _lock(fd: int, out: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise OutputLocked(f"{out}: another losscc run is writing here") from None


def plan(expected: dict[str, str], out_fd: int, backends: tuple[str, ...], full: bool):
    """(writes, removals, problems): what generate would do, checked before anything is written."""
    problems: list[tuple[str, str]] = []
    writes: list[str] = []
    removals: list[str] = []
    for b in backends:
        st = _lstat(b, out_fd)
        names = {rel.split("/", 1)[1]: rel for rel in expected if rel.startswith(b + "/")}
        if st is None:
            writes += sorted(names.values())
            continue
        if not stat.S_ISDIR(st.st_mode):
            problems.append((b, f"is a {_kind(st)}, not a directory; refusing to write through it"))
            continue
        bfd = _open_dir(b, out_fd)
        if bfd is None:
            problems.append((b, "cannot open the directory"))
            continue
        try:
            for name, rel in sorted(names.items()):
                st = _lstat(name, bfd)
                if st is None:
                    writes.append(rel)
                elif not stat.S_ISREG(st.st_mode):
                    problems.append((rel, f"is a {_kind(st)}; refusing to write through it"))
                else:
                    data = read_regular(name, bfd)
                    if not _has_header(name, bfd):
                        problems.append((rel, "E170"))
                    elif data != expected[rel].encode("utf-8"):
                        writes.append(rel)
            if full:
                for e in _entries(bfd, b):
                    if e.name in names or not e.name.endswith(".py") or not e.is_file(follow_symlinks=False):
                        continue
                    if _has_header(e.name, bfd):
                        removals.append(f"{b}/{e.name}")
        finally:
            os.close(bfd)
    return writes, removals, problems


def write(expected: dict[str, str], out: Path, backends: tuple[str, ...], full: bool) -> list[str]:
    """Write the expected files (all or none), remove stale generated files on a full run;
    return the changed paths.  Raise TreeError (nothing written) for a tree it refuses."""
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        out_fd = os.open(out, _DIR)
    except OSError as exc:
        raise TreeError([(".", f"cannot open the output directory: {exc.strerror}")]) from None
    try:
        _lock(out_fd, out)
        writes, removals, problems = plan(expected, out_fd, backends, full)
        if problems:
            if created:
                os.rmdir(out)
            raise TreeError(problems)
        return _apply(expected, out_fd, writes, removals)
    finally:
        os.close(out_fd)  # releases the lock


def _apply(expected: dict[str, str], out_fd: int, writes: list[str], removals: list[str]) -> list[str]:
    fds: dict[str, int] = {}
    staged: list[tuple[str, str, str]] = []   # (backend, temp name, final name)
    try:
        for rel in writes:
            b, name = rel.split("/", 1)
            if b not in fds:
                if _lstat(b, out_fd) is None:
                    os.mkdir(b, dir_fd=out_fd)
                fd = _open_dir(b, out_fd)
                if fd is None:
                    raise TreeError([(b, "is not a directory")])
                fds[b] = fd
            tmp = f".{name}.{secrets.token_hex(6)}.losscc-tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                         0o666, dir_fd=fds[b])
            staged.append((b, tmp, name))
            with os.fdopen(fd, "wb") as f:
                f.write(expected[rel].encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
        for b, tmp, name in staged:
            os.replace(tmp, name, src_dir_fd=fds[b], dst_dir_fd=fds[b])
        staged = []
        for rel in removals:
            b, name = rel.split("/", 1)
            bfd = fds.get(b) or _open_dir(b, out_fd)
            if bfd is None:
                continue
            fds[b] = bfd
            st = _lstat(name, bfd)
            if st is not None and stat.S_ISREG(st.st_mode):
                os.unlink(name, dir_fd=bfd)
        return sorted(writes + removals)
    finally:
        for b, tmp, _ in staged:
            try:
                os.unlink(tmp, dir_fd=fds[b])
            except OSError:
                pass
        for fd in fds.values():
            os.close(fd)
