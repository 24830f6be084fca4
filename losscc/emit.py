"""Stage 7: files.  Compile specs for every backend, write them atomically, check staleness.

``generate`` renders everything in memory first; only when every spec compiled does
it write, into a temporary directory beside the output, then moves files into
place.  It never overwrites or deletes a file that lacks the losscc header, and a
lock file keeps two runs from interleaving.  ``check`` compares the same
in-memory output with the tree, ignoring only the ``losscc-version`` header line.
"""

from __future__ import annotations

import dataclasses
import difflib
import fcntl
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .backends import Backend, all_backends
from .errors import Diagnostic, Location, SpecError
from .pipeline import lower, prepare
from .render import HEADER_MARK, VERSION_PREFIX, render_init, render_module
from .spec import Spec, load_spec


def find_specs(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out += sorted(q for q in path.glob("*.yaml") if q.is_file())
        elif path.exists():
            out.append(path)
        else:
            raise SpecError([Diagnostic(Location(str(p)), "E100", "no such spec file or directory")])
    uniq = sorted(set(out), key=lambda q: (q.name, str(q)))
    return uniq


def display_path(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def with_eps(spec: Spec, eps: float | None) -> Spec:
    """The spec under a global ``--eps`` (None: as written; 0: no eps guard at all)."""
    if eps is None:
        return spec
    guards = {k: v for k, v in spec.guards.items() if k != "eps"}
    if eps > 0:
        guards["eps"] = float(eps)
    return dataclasses.replace(spec, guards=guards, overrides=spec.overrides + (("eps", repr(float(eps))),))


def load_all(paths: list[Path], problems: list | None = None, eps: float | None = None) -> list[Spec]:
    """Load and validate every spec.  With `problems` given, bad specs are left out and their
    diagnostics appended there (so later stages can still report the others' problems);
    without it, any problem raises.  `eps` is the global ``--eps`` override."""
    collect = problems is not None
    specs = []
    problems = [] if problems is None else problems
    for p in paths:
        try:
            specs.append(with_eps(load_spec(p, display_path(p)), eps))
        except SpecError as exc:
            problems += exc.diagnostics
    names: dict[str, Spec] = {}
    good = []
    for s in specs:
        ok = True
        if s.name in names:
            problems.append(Diagnostic(s.name_loc, "E160",
                                       f"spec name '{s.name}' is also used by {names[s.name].path}"))
            ok = False
        names.setdefault(s.name, s)
        if Path(s.path).stem != s.name:
            problems.append(Diagnostic(s.name_loc, "E161",
                                       f"spec name '{s.name}' must match its file name '{Path(s.path).stem}'"))
            ok = False
        if ok:
            good.append(s)
    if problems and not collect:
        raise SpecError(problems)
    return sorted(good, key=lambda s: s.name)


def module_context(spec: Spec, backend: Backend) -> dict:
    params = [f"{p.name}={p.default!r}" for p in spec.params]
    init_params = params + [f"reduction={spec.default_reduction!r}"]
    if spec.learnable:
        init_params.append(f"dtype={backend.ops['float32']}")
    check_params = [p.name for p in spec.params] + ["reduction"]
    forward = [i.name for i in spec.inputs if not i.optional] + [f"{i.name}=None" for i in spec.inputs if i.optional]
    call = [i.name for i in spec.inputs if not i.optional]
    call += [f"self.{lr.name}" for lr in spec.learnable]
    call += [i.name for i in spec.inputs if i.optional]
    call += [f"{p.name}=self.{p.name}" for p in spec.params] + ["reduction=self.reduction"]
    return dict(init_params=init_params, check_params=check_params, check_args=check_params,
                forward_params=forward, call_args=call, arg_docs=arg_docs(spec))


def arg_docs(spec: Spec) -> list[str]:
    """One 'name: description' entry per argument, for the function's docstring."""
    out = []
    for i in spec.inputs:
        text = f"{i.name}: {i.dtype} tensor of shape [{', '.join(i.shape)}]"
        if i.domain.text != "real":
            text += f", values in {i.domain.text}"
        if i.optional:
            text += f"; optional (None means {i.default} everywhere)"
        if i.broadcast:
            text += "; any shape that broadcasts" + (" (missing trailing axes added)" if i.broadcast == "left" else "")
        if i.ignore:
            text += f"; positions equal to `{i.ignore}` are ignored"
        out.append(text + "." + (f" {i.doc}" if i.doc else ""))
    for lr in spec.learnable:
        out.append(f"{lr.name}: learnable float tensor of shape [{', '.join(map(str, lr.shape))}]."
                   + (f" {lr.doc}" if lr.doc else ""))
    for p in spec.params:
        text = f"{p.name}: {p.kind}, default {p.default!r}"
        if p.min is not None:
            text += f", >= {p.min!r}"
        if p.max is not None:
            text += f", <= {p.max!r}"
        out.append(text + "." + (f" {p.doc}" if p.doc else ""))
    names = ", ".join(repr(r) for r in spec.reduction_names)
    out.append(f"reduction: one of {names}; default {spec.default_reduction!r}.")
    for r in spec.reductions:
        if r.denominator is not None:
            out.append(f"{r.name} = sum(loss) / sum({' '.join(r.denominator.text.split())})"
                       + (f": {r.doc}." if r.doc else "."))
    return out


def compile_spec(spec: Spec, backend: Backend, prepared=None) -> str:
    prep = prepared or prepare(spec)
    low = lower(prep, backend)
    written = [f"{b.name} = {' '.join(b.text.split())}" for b in spec.bindings]
    return render_module(low, spec.path, written, module_context(spec, backend))


def internal_error(spec: Spec, exc: Exception) -> Diagnostic:
    """A compiler bug met while compiling a spec: reported like any problem (exit 2, no
    traceback unless --debug), naming the spec, so a hostile spec cannot crash the run."""
    if os.environ.get("LOSSCC_DEBUG"):
        raise exc
    text = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
    return Diagnostic(spec.name_loc, "E900", f"internal compiler error ({type(exc).__name__}: {text}); "
                      "please report it with this spec")


def render_tree(specs: list[Spec], backends: tuple[Backend, ...] | None = None,
                problems: list | None = None) -> dict[str, str]:
    """All generated files, relative path -> text; raise SpecError with every problem
    (including `problems` found by earlier stages)."""
    backends = backends or all_backends()
    files: dict[str, str] = {}
    problems = list(problems or [])
    prepared = {}
    for spec in specs:
        try:
            prepared[spec.name] = prepare(spec)
            for backend in backends:
                files[f"{backend.name}/{spec.name}.py"] = compile_spec(spec, backend, prepared[spec.name])
        except SpecError as exc:
            problems += exc.diagnostics
        except (ArithmeticError, AttributeError, IndexError, KeyError, TypeError, ValueError,
                RecursionError, NotImplementedError) as exc:
            problems.append(internal_error(spec, exc))
    if problems:
        raise SpecError(problems)
    for backend in backends:
        modules = []
        for spec in specs:
            modules.append((spec.name, f"{spec.name}, {spec.class_name}"))
        files[f"{backend.name}/__init__.py"] = render_init(backend.name, modules)
    return files


def is_generated(path: Path) -> bool:
    try:
        with path.open("r", encoding="utf-8") as f:
            return f.readline().startswith(HEADER_MARK)
    except (OSError, UnicodeDecodeError):
        return False


def strip_version(text: str) -> str:
    return "".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith(VERSION_PREFIX))


@dataclass(frozen=True)
class Staleness:
    stale: list[str]
    missing: list[str]
    extra: list[str]
    foreign: list[str]          # files in the way that losscc did not write

    @property
    def clean(self) -> bool:
        return not (self.stale or self.missing or self.extra or self.foreign)


def existing_generated(out: Path, backends) -> set[str]:
    found = set()
    for b in backends:
        d = out / b.name
        if d.is_dir():
            for f in d.glob("*.py"):
                if is_generated(f):
                    found.add(f"{b.name}/{f.name}")
    return found


def compare(files: dict[str, str], out: Path, backends=None) -> Staleness:
    backends = backends or all_backends()
    stale, missing, foreign = [], [], []
    for rel, text in sorted(files.items()):
        p = out / rel
        if not p.exists():
            missing.append(rel)
        elif not is_generated(p):
            foreign.append(rel)
        elif strip_version(p.read_text(encoding="utf-8")) != strip_version(text):
            stale.append(rel)
    extra = sorted(existing_generated(out, backends) - set(files))
    return Staleness(stale, missing, extra, foreign)


def diff(files: dict[str, str], out: Path, rels: list[str]) -> str:
    chunks = []
    for rel in rels:
        p = out / rel
        old = p.read_text(encoding="utf-8").splitlines(keepends=True) if p.exists() else []
        new = files.get(rel, "").splitlines(keepends=True)
        chunks += difflib.unified_diff(old, new, f"a/{rel}", f"b/{rel}")
    return "".join(chunks)


class OutputLocked(Exception):
    pass


def write_tree(files: dict[str, str], out: Path, backends=None) -> list[str]:
    """Write all files or none; remove stale generated files; return the changed paths."""
    backends = backends or all_backends()
    out.mkdir(parents=True, exist_ok=True)
    foreign = [rel for rel in files if (out / rel).exists() and not is_generated(out / rel)]
    if foreign:
        raise SpecError([Diagnostic(Location(str(out / rel)), "E170",
                                    "refusing to overwrite a file without the losscc header")
                         for rel in foreign])
    lock_path = out / ".losscc.lock"
    with open(lock_path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise OutputLocked(f"{out}: another losscc run is writing here") from None
        changed = []
        staged = tempfile.mkdtemp(prefix=".losscc-", dir=out)
        try:
            moves = []
            for rel, text in sorted(files.items()):
                target = out / rel
                if target.exists() and target.read_text(encoding="utf-8") == text:
                    continue
                tmp = Path(staged) / rel.replace("/", "__")
                with open(tmp, "w", encoding="utf-8", newline="\n") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
                moves.append((tmp, target))
            for tmp, target in moves:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, target)
                changed.append(target.relative_to(out).as_posix())
            for rel in sorted(existing_generated(out, backends) - set(files)):
                (out / rel).unlink()
                changed.append(rel)
        finally:
            for leftover in Path(staged).glob("*"):
                leftover.unlink()
            os.rmdir(staged)
        try:
            lock_path.unlink()
        except OSError:
            pass
    return changed


def manifest(files: dict[str, str]) -> str:
    return json.dumps({k: hashlib.sha256(v.encode()).hexdigest() for k, v in sorted(files.items())}, indent=1)
