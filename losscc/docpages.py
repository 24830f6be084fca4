"""``losscc docs``: a reference page per spec, an index, and the check that they are current.

Per spec ``docs/losses/<name>.md`` (summary, description, the formula as written and as
computed in LaTeX, the signature per backend, parameters, semantic notes, verify results
from the committed ``docs/verify.json`` (:mod:`losscc.docresults`), extreme-suite results
from the committed ``docs/stability.json``, a plot), the plot's data
``docs/losses/data/<name>.json`` and its image ``docs/losses/img/<name>.png``, and
``docs/losses/index.md``.  Pages and data are text that :func:`build_docs` computes from the
specs alone (no framework, no matplotlib); ``--check`` compares them with the files and
asks that each image exists.  Images are drawn (matplotlib) only when their data changed or
they are missing, so the check does not depend on image bytes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import sympy as sp
from sympy.printing.latex import LatexPrinter

from . import docbuiltin, docresults, dropin, functions
from .backends import get as get_backend
from .docplots import data_text, plot_data, render_png
from .emit import class_name, compile_spec
from .errors import Diagnostic, Location, SpecError
from .casefile import loads_bounded
from .files import read_bounded
from .pipeline import lower, prepare
from .spec import Spec

DOCS_DIR = "docs/losses"
MAX_PAGE_BYTES = 4 * 1024 * 1024
STABILITY = "docs/stability.json"


@dataclass
class Docs:
    """What ``losscc docs`` writes: text files (relative path -> text) and plot data."""

    texts: dict = field(default_factory=dict)     # rel path -> text (pages, index, data)
    images: dict = field(default_factory=dict)    # rel png path -> plot data (dict)
    full: bool = True                             # all specs: the index, and foreign files reported


# --------------------------------------------------------------------------- LaTeX


class _Latex(LatexPrinter):
    """SymPy's LaTeX printer; the language's own nodes print as named functions."""

    def _print_Gather(self, e, **kwargs):
        return rf"{self._print(e.args[0])}_{{[{self._print(e.args[1])}]}}"

    def _print_Component(self, e, **kwargs):  # boxes1[0]: the name may have a subscript already
        return rf"{self._print(e.args[0])}\lbrack {e.args[1]} \rbrack"

    def _print_Item(self, e, **kwargs):
        return rf"{self._print(e.args[0])}_{{{e.args[1]}}}"

    def _print_Size(self, e, **kwargs):
        return rf"\lvert {e.args[0]} \rvert"

    def _print_Function(self, e, exp=None):
        name = type(e).__name__
        if name in _LATEX_KNOWN:
            return super()._print_Function(e, exp)
        f = functions.of_node(e)
        if f is not None and f.printer == "axis":  # sum(x, axis=C): sum over C
            text = (rf"\operatorname{{{_tex_name(f.name)}}}_{{{self._print(e.args[1])}}}"
                    rf"\left({self._print(e.args[0])}\right)")
        else:
            args = ", ".join(self._print(a) for a in e.args)
            text = rf"\operatorname{{{_tex_name(f.name if f is not None else name.lower())}}}\left({args}\right)"
        return rf"{text}^{{{exp}}}" if exp else text

    def _print_Where(self, e, exp=None):
        c, x, y = (self._print(a) for a in e.args)
        text = rf"\begin{{cases}} {x} & \text{{if}}\: {c} \\ {y} & \text{{otherwise}} \end{{cases}}"
        return rf"\left({text}\right)^{{{exp}}}" if exp else text


_LATEX_KNOWN = {"exp", "log", "sin", "cos", "tan", "tanh", "sinh", "cosh", "Abs", "Max", "Min", "sqrt",
                "sign", "floor", "ceiling", "Heaviside"}


def _tex_name(name: str) -> str:
    return name.replace("_", r"\_")


def latex(expr) -> str:
    """`expr` in LaTeX; a name with an underscore (label_smoothing) prints whole, not subscripted."""
    names = {x: rf"\mathit{{{_tex_name(x.name)}}}" for x in expr.free_symbols
             if isinstance(x, sp.Symbol) and "_" in x.name}
    return _Latex({"order": "none", "symbol_names": names}).doprint(expr)


# --------------------------------------------------------------------------- pages


def _stability(root: Path) -> list:
    path = root / STABILITY
    if not path.is_file():
        return []
    try:
        data = loads_bounded(read_bounded(path, 16 * 1024 * 1024, "stability report", STABILITY))
    except ValueError as exc:  # not JSON (or not UTF-8): a bad committed file, not a bug
        line, col = getattr(exc, "lineno", 1), getattr(exc, "colno", 1)
        raise SpecError([Diagnostic(Location(STABILITY, line, col), "E175", f"not valid JSON: {exc}")]) from None
    recs = data.get("records") if isinstance(data, dict) else None
    return recs if isinstance(recs, list) else []


def _extreme_rows(spec: Spec, records: list) -> list[str]:
    rows = []
    for r in records:
        if not isinstance(r, dict) or r.get("spec") != spec.name:
            continue
        cells = [docresults.cell(r.get(k)) for k in ("backend", "mode", "kind", "passed", "total")]
        rows.append("| {} | {} | {} | {} / {} |".format(*cells))
    return sorted(rows)


def _signatures(spec: Spec, prep) -> list[str]:
    out = []
    for name in _backends():
        backend = get_backend(name)
        low = lower(prep, backend)
        init = dropin.init_params(spec, name, backend.ops["float32"] if spec.learnable else None)
        source = compile_spec(spec, backend, prep)
        stateful = "    def __init__(" in source  # else the class holds the hyperparameters only
        if not stateful:
            init = [p for p in init if not p.startswith("dtype=")]
        d = dropin.of(spec, name)
        note = ([f"also: {', '.join(d.classes)}"] if d.classes else []) + ([] if stateful else ["holds no tensors"])
        out += [f"**{name}** (`generated.{name}.{spec.name}`)", "", "```python",
                f"def {spec.name}({', '.join(low.signature)})",
                f"class {class_name(spec.name)}({', '.join(init)})" + (f"  # {'; '.join(note)}" if note else ""),
                "```", ""]
    return out


def _backends() -> list[str]:
    from .backends import names

    return list(names())


def _param_rows(spec: Spec) -> list[str]:
    rows = ["| name | kind | default | bounds | meaning |", "|---|---|---|---|---|"]
    for p in spec.params:
        bounds = " ".join(p.bound_words()) or "-"
        rows.append(f"| `{p.name}` | {p.kind} | `{p.default!r}` | {bounds} | {_cell(p.doc)} |")
    for lr in spec.learnable:
        rows.append(f"| `{lr.name}` | learnable [{', '.join(map(str, lr.shape))}] | init `{lr.init!r}` | - | "
                    f"{_cell(lr.doc)} |")
    rows.append(f"| `reduction` | one of {', '.join(f'`{r}`' for r in spec.reduction_names)} | "
                f"`{spec.default_reduction!r}` | - | how the per-element loss is reduced |")
    return rows


def _input_rows(spec: Spec) -> list[str]:
    rows = ["| name | dtype | shape | values | notes |", "|---|---|---|---|---|"]
    for i in spec.inputs:
        notes = []
        if i.optional:
            notes.append(f"optional (None: {i.default!r} everywhere)")
        if i.broadcast:
            notes.append("broadcasts")
        if i.ignore:
            notes.append(f"positions equal to `{i.ignore}` are ignored")
        if i.doc:
            notes.append(i.doc)
        rows.append(f"| `{i.name}` | {i.dtype} | {spec.shape_text(i)} | {_cell(i.domain.text)} | "
                    f"{_cell('; '.join(notes))} |")
    return rows


def _cell(text: str) -> str:
    return docresults.cell(text)


def _notes(spec: Spec, prep) -> list[str]:
    out = []
    for r in spec.reductions:
        if r.denominator is not None:
            out.append(f"- `{r.name}` divides the summed loss by `sum({' '.join(r.denominator.text.split())})`"
                       + (f": {r.doc}." if r.doc else "."))
    eps = spec.guards.get("eps")
    if eps:
        out.append(f"- eps guard: `{eps!r}` (log and division arguments are kept at least this far from 0).")
    rules = sorted({f.rule for f in prep.fired})
    if rules:
        out.append("- rewrites and guards applied: " + ", ".join(f"`{r}`" for r in rules) + ".")
    for b in _backends():
        d = dropin.of(spec, b)
        if d.replaces:
            out.append(f"- {b}: stands in for " + ", ".join(f"`{x}`" for x in d.replaces)
                       + (" (a 0-D input is one element of the batch)" if d.unbatched else "") + ".")
    return out or ["- none beyond the description."]


def page(spec: Spec, data: dict | None, records: list, results: dict | None = None) -> str:
    prep = prepare(spec)
    lines = [f"# {spec.name}", "", f"{spec.summary}", "", " ".join(spec.description.split()), "",
             "## Formula", "", "As written:", "", "```text"]
    lines += [f"{b.name} = {' '.join(b.text.split())}" for b in spec.bindings]
    lines += ["```", "", "Per-element loss as written (bindings inlined):", ""] + _math(prep.prog.loss)
    lines += ["As computed (after the stable rewrites and guards):", ""] + _math(prep.loss)
    if prep.none is not None:
        lines += [f"With {', '.join(f'`{n}`' for n in prep.none.inputs)} None:", ""] + _math(prep.none.loss)
    lines += ["## Signature", ""] + _signatures(spec, prep)
    lines += ["## Inputs", ""] + _input_rows(spec) + ["", "## Parameters", ""] + _param_rows(spec) + [""]
    lines += ["## Notes", ""] + _notes(spec, prep) + [""]
    lines += docresults.section(spec, results or {})
    lines += ["## Extreme-input suite: generated code, built-ins and naive code", ""]
    rows = _extreme_rows(spec, records)
    if rows:
        lines += [f"From `{STABILITY}` (`python -m benchmarks.extreme`: float32, finite and correct at "
                  "extreme inputs):", "",
                  "| backend | mode | code | passed |", "|---|---|---|---|"] + rows + [""]
    else:
        lines += [f"Not in `{STABILITY}`.", ""]
    lines += ["## Plot", ""]
    if data is None:
        lines += ["No plot: no case with a float input to sweep, or the case is above a quarter of the limit "
                  "'reference_work' (docs/errors.md).", ""]
    else:
        lines += [f"The loss summed over case `{data['case']}` and its gradient, as `{data['element']}` "
                  f"sweeps [{data['x'][0]}, {data['x'][-1]}] with everything else fixed; computed by the "
                  f"reference evaluator (data: [data/{spec.name}.json](data/{spec.name}.json))."
                  + (f" Dashed: the built-in `{data['builtin']['call']}` ({_drawn_label()}, float64, its "
                     "gradient from the framework's autograd) on the same inputs." if "builtin" in data else ""), "",
                  f"![{spec.name}: loss and gradient](img/{spec.name}.png)", ""]
    return "\n".join(lines)


MATH_CHARS = 20_000  # one formula's LaTeX on a page: the pages stay far below MAX_PAGE_BYTES


def _math(e) -> list[str]:
    """A display formula, or a note where its LaTeX (bindings inlined, a tree) is too long to read."""
    text = latex(e)
    if len(text) > MATH_CHARS:
        return [f"(its LaTeX has {len(text)} characters, over {MATH_CHARS}: see the formula as written "
                "above, or `losscc explain`)", ""]
    return ["$$", text, "$$", ""]


def _drawn_label() -> str:
    b = docbuiltin.drawing_backend()
    return b.label or b.name if b else "the framework"


def index(specs: list[Spec]) -> str:
    backends = _backends()
    head = "| loss | summary | " + " | ".join(f"{b} built-ins" for b in backends) + " | composes |"
    names = {s.name for s in specs}
    lines = ["# Losses", "", "One page per spec of `specs/`, generated by `losscc docs`.", "", head,
             "|" + "---|" * (3 + len(backends))]
    for s in specs:
        cells = [f"[{s.name}]({s.name}.md)", _cell(s.summary)]
        for b in backends:
            cells.append(", ".join(f"`{x}`" for x in dropin.of(s, b).replaces) or "-")
        cells.append(", ".join(f"[{c}]({c}.md)" for c in _calls(s, names)) or "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _calls(spec: Spec, names: set[str]) -> list[str]:
    """The other specs this one calls in its formula (composition): names of `names`
    written as a call in a binding."""
    called = set()
    for b in spec.bindings:
        called |= {m.group(1) for m in _CALL.finditer(b.text)}
    return sorted((called & names) - {spec.name})


_CALL = re.compile(r"\b([a-z_][a-z0-9_]*)\s*\(")


# --------------------------------------------------------------------------- build, check, write


def build_docs(specs: list[Spec], root: Path, full: bool = True, frameworks: bool = False) -> Docs:
    """The pages, data and images of `specs`; with `full` (every spec of the project) the
    index too, and files of other names count as foreign.  With `frameworks`, the plots'
    built-in curves are computed where the framework is installed; otherwise, and where it
    is not, they are carried over from the committed data files."""
    records = _stability(root)
    results = docresults.load(root)
    docs = Docs(full=full)
    for spec in specs:
        data = plot_data(spec, root, docbuiltin.compute if frameworks else None)
        if data is not None and "builtin" not in data:
            old = _read(root / DOCS_DIR, f"data/{spec.name}.json")
            try:
                kept = docbuiltin.carried(data, loads_bounded(old), spec) if old else None
            except ValueError:  # an unreadable committed file: --check reports it out of date
                kept = None
            if kept is not None:
                data["builtin"] = kept
        docs.texts[f"{spec.name}.md"] = page(spec, data, records, results)
        if data is not None:
            docs.texts[f"data/{spec.name}.json"] = data_text(data)
            docs.images[f"img/{spec.name}.png"] = data
    if full:
        docs.texts["index.md"] = index(specs)
    return docs


_ENTRIES_READ = 100_000  # entries of one docs folder looked at, at most


def _existing(out: Path) -> set[str]:
    """Every entry of the pages' folder and its data and img folders (a folder other than
    those two as ``name/``): the folder is the writer's, so a file of any other name or
    type is foreign (an ``.html`` or ``.svg`` a site generator would publish)."""
    found = set()
    for sub in ("", "data", "img"):
        d = out / sub if sub else out
        if not d.is_dir() or d.is_symlink():
            continue
        with os.scandir(d) as it:
            for k, e in enumerate(it):
                if k >= _ENTRIES_READ:  # fail closed: what was not read is reported as one entry
                    found.add(f"{sub}/..." if sub else "...")
                    break
                name = f"{sub}/{e.name}" if sub else e.name
                if e.is_dir(follow_symlinks=False):
                    if sub or e.name not in ("data", "img"):
                        found.add(name + "/")
                else:
                    found.add(name)
    return found


def _read(out: Path, rel: str) -> str | None:
    path = out / rel
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return read_bounded(path, MAX_PAGE_BYTES, "page", f"{DOCS_DIR}/{rel}").decode("utf-8")
    except (SpecError, UnicodeDecodeError):
        return "\0unreadable"


def stale(docs: Docs, out: Path) -> list[tuple[str, str]]:
    """(relative path, why) of every file that is missing, different or not written by docs."""
    out_list = []
    for rel, text in sorted(docs.texts.items()):
        have = _read(out, rel)
        if have != text:
            out_list.append((rel, "missing" if have is None else "out of date"))
    for rel in sorted(docs.images):
        p = out / rel
        if p.is_symlink() or not p.is_file():
            out_list.append((rel, "missing"))
    for rel in sorted(_existing(out) - set(docs.texts) - set(docs.images) if docs.full else ()):
        out_list.append((rel, "not written by losscc docs"))
    return out_list


def write_docs(docs: Docs, out: Path) -> list[str]:
    """Write what changed; images only where their data changed or they are missing.  The
    files not written by docs are removed.  Returns the changed paths."""
    no_links(out)
    changes = stale(docs, out)
    changed_data = {rel for rel, _ in changes if rel.startswith("data/")}
    images = {rel: data for rel, data in docs.images.items()
              if f"data/{Path(rel).stem}.json" in changed_data or (rel, "missing") in changes}
    pngs = {rel: render_png(data) for rel, data in images.items()}  # all drawn before anything is written
    for d in (out, out / "data", out / "img"):
        d.mkdir(parents=True, exist_ok=True)
    for rel, why in changes:
        if why == "not written by losscc docs":
            if not rel.endswith(("/", "...")):  # a foreign folder stays, and is reported
                (out / rel).unlink()
        elif rel in docs.texts:
            _atomic(out / rel, docs.texts[rel].encode("utf-8"))
    for rel, blob in pngs.items():
        _atomic(out / rel, blob)
    return sorted({rel for rel, _ in changes} | set(pngs))


def no_links(out: Path) -> None:
    """E173 where the pages' folder or its data or img folder is a symbolic link: neither the
    writer nor the check (which reads the data files and looks for the images) follows one."""
    for d in (out, out / "data", out / "img"):
        if d.is_symlink():
            raise SpecError([Diagnostic(Location(f"{DOCS_DIR}/{d.relative_to(out).as_posix()}".rstrip("/.")),
                                        "E173", "the docs folder may not be a symbolic link")])


def _atomic(path: Path, blob: bytes) -> None:
    """`blob` written to a new file beside `path` (created with O_EXCL under a random name, so
    a committed link at a predictable temporary name is never written through) and moved
    over `path` (which replaces a link there, never its target)."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_cli(args) -> int:
    """``losscc docs [--check] [specs...]``: 0 written or current, 1 stale (with --check)."""
    import sys

    from . import emit
    from .errors import printable
    from .project import find_project, require_inside

    project = find_project()
    specs = emit.load_all(emit.project_specs(project, args.specs), root=project.root)
    out = project.root / DOCS_DIR
    require_inside(project.root, out, DOCS_DIR, "the docs folder")  # a linked docs/ included
    no_links(out)
    docs = build_docs(specs, project.root, full=not args.specs, frameworks=not args.check)
    if args.check:
        found = stale(docs, out)
        for rel, why in found:
            print(f"{why}: {printable(f'{DOCS_DIR}/{rel}', False)}")
        if found:
            print("losscc: run `losscc docs` to update", file=sys.stderr)
            return 1
        if not args.quiet:
            print(f"losscc: {DOCS_DIR} is up to date ({len(docs.texts) + len(docs.images)} files)")
        return 0
    changed = write_docs(docs, out)
    if not args.quiet:
        print(f"losscc: {len(specs)} specs, {len(changed)} changed in {DOCS_DIR}")
    return 0
