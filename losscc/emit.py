"""Stage 7: files.  Compile specs for every backend, write them atomically, check staleness.

``generate`` renders everything in memory first; only when every spec compiled and the
output tree holds nothing it refuses does it write (:mod:`losscc.outtree`: temporary
files moved into place, no link followed, an flock on the output folder).  It never
overwrites or deletes a file that lacks the losscc header.  ``check`` compares the same
in-memory tree with the committed one, ignoring only the ``losscc-version`` header line.
A run on some specs (or some backends) touches only their files; its package
``__init__`` lists those specs and every other module the output already holds (of the
configured specs folder, when it has specs), so it never imports a missing module.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from . import checks, dropin, outtree, strays
from .strays import STRAY  # noqa: F401  (the unexpected entries that strays reports begin with it)
from .backends import Backend, all_backends
from .backward_emit import custom_context, fallback_warnings
from .backends import get as get_backend
from .errors import Diagnostic, Location, SpecError, printable
from .lint import continuity
from .outtree import Report
from .pipeline import lower, prepare
from .project import Project, inside, project_relative, require_inside
from .render import render_init, render_module
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


def project_specs(project: Project, args: list[str]) -> list[Path]:
    """The spec files named by `args` (files or folders, relative to the current directory)
    or, without any, those of the configured specs folder.  A path that leaves the project
    (after resolving symlinks) or is not a regular file is an error naming it."""
    root = project.root
    problems, out = [], []

    def refuse(path: Path, shown: str) -> bool:
        if inside(root, path):
            return False
        problems.append(Diagnostic(Location(printable(shown, False)), "E172",
                                   "spec path leaves the project root (after resolving symbolic links)"))
        return True

    for arg in args or [os.path.relpath(root / project.specs)]:
        path = Path(arg)
        if not path.exists() and not path.is_symlink():
            problems.append(Diagnostic(Location(arg), "E100", "no such spec file or directory"))
        elif refuse(path, arg):
            continue
        elif path.is_dir():
            for q in sorted(path.glob("*.yaml")):
                if not refuse(q, str(q)) and stat.S_ISREG(q.stat().st_mode):
                    out.append(q)
        elif stat.S_ISREG(path.stat().st_mode):
            out.append(path)
        else:
            problems.append(Diagnostic(Location(arg), "E100", "not a regular file"))
    if problems:
        raise SpecError(problems)
    return sorted(set(out), key=lambda q: (q.name, str(q)))


SPEC_NAME = re.compile(r"[a-z][a-z0-9_]*")


def package_names(project: Project, specs: list[Spec]) -> list[str]:
    """The modules a backend package lists: every spec of the configured specs folder (by
    file name, so a one-spec run need not load the others) and the specs being compiled."""
    names = {s.name for s in specs}
    folder = project.root / project.specs
    if folder.is_dir() and inside(project.root, folder):
        names |= {q.stem for q in folder.glob("*.yaml")
                  if SPEC_NAME.fullmatch(q.stem) and inside(project.root, q) and q.is_file()}
    return sorted(names)


def subset_package(folder: list[str], specs: list[Spec], present: set[str]) -> list[str]:
    """The modules a subset run's ``__init__`` lists: the specs compiled, and the modules the
    output already holds -- those of the configured specs folder when it has any (an extra
    generated file stays out, as in a full run), else every generated one."""
    keep = present & set(folder) if folder else present
    return sorted({s.name for s in specs} | {n for n in keep if SPEC_NAME.fullmatch(n)})


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


def load_all(paths: list[Path], problems: list | None = None, eps: float | None = None,
             root: Path | None = None, backward: str = "") -> list[Spec]:
    """Load and validate every spec.  With `problems` given, bad specs are left out and their
    diagnostics appended there (so later stages can still report the others' problems);
    without it, any problem raises.  `eps` is the global ``--eps`` override.  With `root`,
    specs are named by their path relative to it (as the generated headers record them);
    otherwise relative to the current directory.  `backward`: the project's default for
    specs without a ``backward`` field."""
    collect = problems is not None
    specs = []
    problems = [] if problems is None else problems
    for p in paths:
        try:
            shown = project_relative(root, p) if root else display_path(p)
            spec = with_eps(load_spec(p, shown), eps)
            specs.append(dataclasses.replace(spec, backward=backward) if backward and not spec.backward else spec)
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
    d = dropin.of(spec, backend.name)
    init = dropin.init_params(spec, backend.name, backend.ops["float32"] if spec.learnable else None)
    check_params = [p.name for p in spec.params] + ["reduction"]
    forward = dropin.forward_params(spec, backend.name)
    return dict(init_params=init, check_params=check_params, check_args=check_params,
                convert_lines=checks.convert_lines(spec),
                forward_params=forward, call_args=dropin.call_args(spec, backend.name), ctor_inputs=dropin.ctor_inputs(spec, backend.name), arg_docs=arg_docs(spec, d),
                entry_lines=dropin.alias_lines(spec, backend.name),
                init_entry_lines=dropin.init_alias_lines(spec, backend.name),
                input_params=dropin.input_check_params(spec), input_checks=dropin.input_checks(spec, backend),
                input_constants=dropin.input_constants(spec, backend),
                scalar_lines=(dropin.scalar_lines(spec, backend) + dropin.cast_lines(spec, backend)
                              + dropin.unbatched_lines(spec, backend)),
                class_aliases=list(d.classes), replaces=list(d.replaces), custom=None,
                attr=lambda name: dropin.attribute(name, backend.name))


def arg_docs(spec: Spec, d=None) -> list[str]:
    """One 'name: description' entry per argument, for the function's docstring."""
    out = []
    aliases = dict(d.aliases) if d is not None else {}

    def named(n: str) -> str:
        return f"{n} (or {aliases[n]})" if n in aliases else n

    for i in spec.inputs:
        text = f"{named(i.name)}: {i.dtype} tensor of shape {spec.shape_text(i)}"
        if i.scalar:
            text += " or a number (the same everywhere)"
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
        text = f"{named(p.name)}: {p.kind}, default {p.default!r}"
        text += "".join(f", {b}" for b in p.bound_words())
        out.append(text + "." + (f" {p.doc}" if p.doc else ""))
    names = ", ".join(repr(r) for r in spec.reduction_names)
    out.append(f"reduction: one of {names}; default {spec.default_reduction!r}.")
    if d is not None and dropin.IGNORED in d.function + d.init:
        out.append(f"{dropin.IGNORED}: accepted and ignored, as in the built-in.")
    for r in spec.reductions:
        if r.denominator is not None:
            out.append(f"{r.name} = sum(loss) / sum({' '.join(r.denominator.text.split())})"
                       + (f": {r.doc}." if r.doc else "."))
    return out


def compile_spec(spec: Spec, backend: Backend, prepared=None) -> str:
    prep = prepared or prepare(spec)
    low = lower(prep, backend)
    shape_helper = backend.helpers.get("shape")
    if dropin.scalar_lines(spec, backend) and shape_helper and shape_helper not in low.helpers:
        low.helpers = [shape_helper] + list(low.helpers)
    written = [f"{b.name} = {' '.join(b.text.split())}" for b in spec.bindings]
    context = module_context(spec, backend)
    context["custom"] = custom_context(prep, backend, low.helpers)  # the symbolic backward, where chosen
    source = render_module(low, spec.path, written, context)
    # a module that would not import (a syntax error, or a duplicate argument that only the
    # compiler sees) is a compiler bug (E900), not a file to write
    compile(source, f"{spec.name}.py", "exec", dont_inherit=True)
    return source


def internal_error(spec: Spec, exc: Exception) -> Diagnostic:
    """A compiler bug met while compiling a spec: reported like any problem (exit 2, no
    traceback unless --debug), naming the spec, so a hostile spec cannot crash the run."""
    if os.environ.get("LOSSCC_DEBUG"):
        raise exc
    text = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
    return Diagnostic(spec.name_loc, "E900", f"internal compiler error ({type(exc).__name__}: {text}); "
                      "please report it with this spec")


def render_tree(specs: list[Spec], backends: tuple[Backend, ...] | None = None,
                problems: list | None = None, package: list[str] | None = None,
                warnings: list | None = None) -> dict[str, str]:
    """All generated files, relative path -> text; raise SpecError with every problem
    (including `problems` found by earlier stages).  `package`: backend name -> the module
    names its ``__init__`` lists (default: those of `specs`); `warnings`, when given,
    receives the continuity warnings and W310 (``backward: custom`` keeping autograd)."""
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
    problems += package_clashes(specs, package)
    if warnings is not None:  # W301/W302 on the programs prepare built, then W310
        warnings += [w for s in specs if s.name in prepared for w in continuity(prepared[s.name].prog)]
        warnings += fallback_warnings([s for s in specs if s.name in prepared], backends, prepared)
    if problems:
        raise SpecError(problems)
    for backend in backends:
        names = package[backend.name] if package is not None else [spec.name for spec in specs]
        modules = [(name, backend.exports({"function": name, "class": class_name(name)})) for name in names]
        losses = [(name, class_name(name)) for name, exported in modules if class_name(name) in exported]
        files[f"{backend.name}/__init__.py"] = render_init(backend.name, modules, losses)
    return files


def package_clashes(specs: list[Spec], package: dict[str, list[str]] | None) -> list[Diagnostic]:
    """E162 for modules of one package whose classes share a name (`mse_` and `mse` both
    define `Mse`: the later import would replace the other's class in the exports and in
    LOSSES); a spec named like the package's own `get_loss` is E120 already."""
    by_name = {s.name: s for s in specs}
    listed = {n for names in (package or {}).values() for n in names} | set(by_name)
    owner: dict[str, str] = {}
    out = []
    for name in sorted(listed):
        loc = by_name[name].name_loc if name in by_name else Location(f"{name}.py")
        cls = class_name(name)
        if cls in owner:
            other = by_name[owner[cls]].path if owner[cls] in by_name else f"the module {owner[cls]}.py"
            out.append(Diagnostic(loc, "E162", f"spec name '{name}' gives the class name '{cls}', which "
                                               f"{other} ('{owner[cls]}') has too; rename one"))
        owner.setdefault(cls, name)
    return out


def class_name(name: str) -> str:
    """The class a module defines (as :attr:`Spec.class_name`)."""
    return "".join(part.capitalize() for part in name.split("_") if part)


def compare(files: dict[str, str], out: Path, backends=None, full: bool = True, root: Path | None = None) -> Report:
    """The committed tree at `out` against the expected `files` (see :mod:`losscc.outtree`);
    with the project's `root` and `full`, generated modules elsewhere in it count as
    unexpected (see :mod:`losscc.strays`)."""
    names = tuple(b.name for b in (backends or all_backends()))
    try:
        report = outtree.inspect(files, out, names, full)
    except outtree.TreeError as exc:
        raise _tree_error(exc, out) from None
    if full and root is not None:
        report.unexpected.extend(strays.find(root, out, files, names))
    return report


def _tree_error(exc: outtree.TreeError, out: Path) -> SpecError:
    diags = []
    for rel, msg in exc.problems:
        shown = (out / rel).as_posix() if rel != "." else out.as_posix()
        if msg == "E170":
            diags.append(Diagnostic(Location(shown), "E170", "refusing to overwrite a file without the losscc header"))
        else:
            diags.append(Diagnostic(Location(shown), "E171", msg))
    return SpecError(diags)


def _lines(text: str) -> list[str]:
    """Lines split at \\n only (not at the other breaks str.splitlines() knows), printable."""
    parts = text.split("\n")
    lines = [printable(p) + "\n" for p in parts[:-1]]
    return lines + ([printable(parts[-1])] if parts[-1] else [])


def diff(files: dict[str, str], report: Report, prefix: str) -> str:
    """A patch of the stale, missing and extra files that ``git apply`` accepts from the
    project root (`prefix`: the output folder relative to it).  Only regular files read
    without following a link are shown; control characters are escaped."""
    chunks: list[str] = []
    for rel in sorted(report.stale + report.missing + report.extra):
        path = printable(f"{prefix}/{rel}" if prefix not in ("", ".") else rel, False)  # a name is text too
        old = report.current.get(rel)
        old_lines = _lines(old.decode("utf-8", "backslashreplace")) if old is not None else []
        new_lines = _lines(files[rel]) if rel in files else []
        a = f"a/{path}" if old is not None else "/dev/null"
        b = f"b/{path}" if rel in files else "/dev/null"
        for line in difflib.unified_diff(old_lines, new_lines, a, b):
            chunks.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(chunks)


OutputLocked = outtree.OutputLocked


def write_tree(files: dict[str, str], out: Path, backends=None, full: bool = True) -> list[str]:
    """Write all files or none; on a full run remove generated files no spec produces;
    return the changed paths.  Links are never followed (see :mod:`losscc.outtree`)."""
    names = tuple(b.name for b in (backends or all_backends()))
    try:
        return outtree.write(files, out, names, full)
    except outtree.TreeError as exc:
        raise _tree_error(exc, out) from None


@dataclass(frozen=True)
class Build:
    """The expected output of one generate/check run."""

    files: dict[str, str]
    specs: list[Spec]
    backends: tuple[Backend, ...]
    full: bool          # the whole tree is in scope (every configured spec and backend)
    out: Path           # the output folder, resolved
    out_rel: str        # the output folder relative to the project root
    root: Path          # the project root
    warnings: list      # W301/W302 (continuity) and W310 (`backward: custom` keeping autograd)


def build(project: Project, spec_args: list[str], output: str | None = None, eps: float | None = None,
          backends: list[str] | None = None, problems: list | None = None) -> Build:
    """Load and compile: `spec_args`, `output` (relative to the current directory), `eps` and
    `backends` are the command line's, overriding the project's configuration."""
    root = project.root
    out = output_folder(project, output)
    problems = [] if problems is None else problems
    specs = load_all(project_specs(project, spec_args), problems, project.eps if eps is None else eps, root=root,
                     backward=project.backward)
    chosen = tuple(get_backend(b) for b in (backends or project.backends))
    # the whole tree is in scope when the run covers every spec of the configured folder and
    # every configured backend, however they were named (`check specs`, `--backend` each)
    folder = package_names(project, [])
    covered = bool(folder) and {s.name for s in specs} >= set(folder)
    full = (not spec_args or covered) and {b.name for b in chosen} >= set(project.backends)
    package = None if full else {b.name: subset_package(folder, specs, outtree.generated_modules(out, b.name))
                                 for b in chosen}
    warnings: list = []
    files = render_tree(specs, chosen, problems=problems, package=package, warnings=warnings)
    return Build(files, specs, chosen, full, out, project_relative(root, out) if inside(root, out) else out.as_posix(),
                 root, warnings)


def output_folder(project: Project, output: str | None) -> Path:
    """The resolved output folder: `output` (relative to the current directory) or the
    configured one.  A folder named inside the project must stay there after resolving
    symbolic links (E172); one the command line names outside the project is the user's
    choice and is used as given."""
    path = Path(output) if output is not None else project.root / project.output
    shown = printable(output if output is not None else project.output, False)
    written = Path(os.path.abspath(path))
    if output is not None and not written.is_relative_to(project.root):
        return path.resolve()
    resolved = require_inside(project.root, path, shown, "output folder")
    _no_link_below(project.root, Path(os.getcwd()) / path, shown)
    return resolved


def _no_link_below(root: Path, given: Path, shown: str) -> None:
    """E172 where the output folder, or a folder the path passes through below the root, is a
    symbolic link: Python imports the package by the name as written, and what sits beside that
    name (a ``generated.py`` that wins over the folder) is judged beside the link, not its
    target.  `given` is absolute and not normalised: ``lnk/../generated`` passes through
    ``lnk`` even though the normalised text does not name it."""
    cur = Path(given.anchor)
    for part in given.parts[1:]:
        cur = cur / part
        inside = Path(os.path.abspath(cur))
        if part in (".", "..") or inside == root or not inside.is_relative_to(root):
            continue
        if cur.is_symlink():
            raise SpecError([Diagnostic(Location(shown), "E172", f"output folder: "
                                        f"{printable(project_relative(root, inside), False)} is a symbolic link; "
                                        "name the real folder (Python imports the package by the name as written)")])
