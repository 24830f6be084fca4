"""The project: its root, its ``[tool.losscc]`` configuration and the paths inside it.

The root is the directory of the nearest ``pyproject.toml`` (searching upward from the
current directory) that has a ``[tool.losscc]`` table; without one, the nearest ancestor
holding a ``pyproject.toml`` or ``.git``; else the current directory.  Every path losscc
records or writes is relative to the root, so a run gives the same bytes from any folder
of the project, and no path (after resolving symlinks) may leave it.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .backends import names as backend_names
from .errors import Diagnostic, Location, SpecError, did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

KEYS = ("specs", "output", "eps", "backends", "backward")
MAX_PYPROJECT_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Project:
    root: Path                       # resolved
    pyproject: Path | None = None    # the file holding [tool.losscc], if any
    specs: str = "specs"             # relative to the root
    output: str = "generated"        # relative to the root
    eps: float | None = None
    backends: tuple[str, ...] = field(default_factory=backend_names)
    backward: str = "autograd"       # the default of specs without a backward field (docs/backward.md)

    def rel(self, path: Path) -> str:
        """`path` (inside the project) relative to the root, in POSIX form."""
        return project_relative(self.root, path)


def _error(path: Path, line: int, key: str, message: str, code: str = "E190") -> SpecError:
    where = f"[tool.losscc] {key}: " if key else ""
    return SpecError([Diagnostic(Location(os.path.relpath(path), line, 1 if line else 0), code, where + message)])


def _read_toml(path: Path) -> tuple[dict, str]:
    try:
        if path.is_symlink():  # a link could make losscc read (and quote) a file outside the project
            raise _error(path, 0, "", "is a symbolic link; losscc reads only a regular pyproject.toml", "E191")
        if path.stat().st_size > MAX_PYPROJECT_BYTES:
            raise _error(path, 0, "", f"larger than {MAX_PYPROJECT_BYTES} bytes", "E191")
        with path.open("rb") as f:
            raw = f.read(MAX_PYPROJECT_BYTES + 1)
        text = raw.decode("utf-8")
        return tomllib.loads(text), text
    except OSError as exc:
        raise _error(path, 0, "", f"cannot read: {exc.strerror}", "E191") from None
    except UnicodeDecodeError:
        raise _error(path, 0, "", "not UTF-8", "E191") from None
    except RecursionError:
        raise _error(path, 0, "", "nested too deeply to read", "E191") from None
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise _error(path, int(m.group(1)) if m else 0, "", f"TOML syntax: {exc}", "E191") from None


def _key_line(text: str, key: str) -> int:
    """Line of `key = ...` inside the [tool.losscc] table (best effort; 0 if not found)."""
    inside = False
    for n, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if s.startswith("["):
            inside = s.replace(" ", "") == "[tool.losscc]"
        elif inside and re.match(rf"{re.escape(key)}\s*=", s):
            return n
    m = re.search(r"^\s*\[tool\.losscc\]", text, re.MULTILINE)
    return text[: m.start()].count("\n") + 1 if m else 0


def _inside_path(root: Path, value, key: str, where: Path, line: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _error(where, line, key, "expected a non-empty string (a path relative to the project root)")
    p = Path(value)
    if p.is_absolute() or ".." in p.parts or "\\" in value or "\x00" in value:
        raise _error(where, line, key, f"{value!r} must be a relative path inside the project")
    if not inside(root, root / p):
        raise _error(where, line, key, f"{value!r} leaves the project root (through a symbolic link)")
    return p.as_posix()


def parse_config(root: Path, pyproject: Path, table, text: str) -> Project:
    """The Project a ``[tool.losscc]`` table describes; bad values raise SpecError (E190)."""
    if not isinstance(table, dict):
        raise _error(pyproject, _key_line(text, ""), "", "[tool.losscc] must be a table")
    for key in table:
        if key not in KEYS:
            hint = did_you_mean(key, KEYS)
            raise _error(pyproject, _key_line(text, key), key,
                         f"unknown key (known: {', '.join(KEYS)})" + (f"; {hint}" if hint else ""))
    kw: dict = {}
    for key in ("specs", "output"):
        if key in table:
            kw[key] = _inside_path(root, table[key], key, pyproject, _key_line(text, key))
    if "eps" in table:
        v = table["eps"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 0.1:
            raise _error(pyproject, _key_line(text, "eps"), "eps",
                         "expected a number between 0 (no eps guard) and 0.1")
        kw["eps"] = float(v)
    if "backends" in table:
        v = table["backends"]
        line = _key_line(text, "backends")
        if not isinstance(v, list) or not v or not all(isinstance(b, str) for b in v):
            raise _error(pyproject, line, "backends", f"expected a non-empty list of {', '.join(backend_names())}")
        for b in v:
            if b not in backend_names():
                raise _error(pyproject, line, "backends", f"unknown backend {b!r} (known: {', '.join(backend_names())})")
        if len(set(v)) != len(v):
            raise _error(pyproject, line, "backends", "a backend is listed twice")
        kw["backends"] = tuple(b for b in backend_names() if b in v)
    if "backward" in table:
        from .backward import MODES

        if table["backward"] not in MODES:
            raise _error(pyproject, _key_line(text, "backward"), "backward", f"expected one of {', '.join(MODES)}")
        kw["backward"] = table["backward"]
    return Project(root=root, pyproject=pyproject, **kw)


def find_project(cwd: Path | None = None) -> Project:
    """The project containing `cwd` (default: the current directory)."""
    start = (cwd or Path.cwd()).resolve()
    fallback = None
    for d in (start, *start.parents):
        py = d / "pyproject.toml"
        if py.is_file() or py.is_symlink():
            data, text = _read_toml(py)
            tool = data.get("tool", {})
            if isinstance(tool, dict) and "losscc" in tool:
                return parse_config(d, py, tool["losscc"], text)
        if fallback is None and (py.is_file() or (d / ".git").exists()):
            fallback = d
    return Project(root=fallback or start)


def inside(root: Path, path: Path) -> bool:
    """Whether `path`, with every symlink resolved, lies in the (resolved) root."""
    try:
        Path(path).resolve().relative_to(root.resolve())
        return True
    except (ValueError, OSError, RuntimeError):
        return False


def project_relative(root: Path, path: Path) -> str:
    """`path` relative to the root: lexically if it lies there as written, else resolved."""
    p = Path(os.path.abspath(path))
    try:
        return p.relative_to(root).as_posix()
    except ValueError:
        return Path(path).resolve().relative_to(root).as_posix()


def require_inside(root: Path, path: Path, shown: str, what: str) -> Path:
    """The resolved `path`; a SpecError (E172) naming `shown` if it leaves the project."""
    if not inside(root, path):
        raise SpecError([Diagnostic(Location(shown), "E172",
                                    f"{what} leaves the project root {root} (after resolving symbolic links)")])
    return Path(path).resolve()


def resolve_reference(root: Path, spec_path: str, text: str, loc: Location | None = None) -> Path:
    """The file a spec's ``references: - file:`` names.  Reference paths are relative to the
    project root (so ``tests/data/x.json`` means the same from every spec); one that leaves
    the root, also through a symlink, is an error (E150) naming the spec file and line."""
    where = loc or Location(spec_path)
    p = Path(text)
    if p.is_absolute() or ".." in p.parts or "\\" in text or "\x00" in text:
        raise SpecError([Diagnostic(where, "E150", f"reference file {text!r} must be a relative path inside the project")])
    target = root / p
    if not inside(root, target):
        raise SpecError([Diagnostic(where, "E150", f"reference file {text!r} leaves the project root "
                                    "(through a symbolic link)")])
    return target
