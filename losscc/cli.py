"""Command line: ``losscc generate | check | explain | verify | docs``.

Exit status: 0 success, 1 stale output or a failed verification, 2 bad input (specs,
configuration, a hostile output tree), 3 an internal error (a compiler bug, E900
included).  No traceback is shown unless ``--debug`` is given.  ``generate`` and
``check`` read ``[tool.losscc]`` from the project's ``pyproject.toml``
(:mod:`losscc.project`); command-line flags override it.  ``-q`` prints nothing on
success; ``--format json`` prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import sys

from . import __version__
from .backends import names as backend_names
from .errors import Diagnostic, SpecError, printable



def _eps(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= v <= 0.1:
        raise argparse.ArgumentTypeError(f"{text}: must be between 0 (no eps guard) and 0.1")
    return v


def _eps_option(cmd) -> None:
    cmd.add_argument("--eps", type=_eps, default=None, metavar="E",
                     help="eps guard for every spec, overriding guards.eps and [tool.losscc] eps (0: none); "
                          "recorded in the header")


def _common_options(cmd, formats: bool = True) -> None:
    """-q and --format, shared by the commands that report (a new subcommand can call it)."""
    cmd.add_argument("-q", "--quiet", action="store_true", help="print nothing on success (errors still go to stderr)")
    if formats:
        cmd.add_argument("--format", choices=["text", "json"], default="text", help="output format")


def _tree_options(cmd) -> None:
    cmd.add_argument("specs", nargs="*", default=[],
                     help="spec files or folders (default: [tool.losscc] specs, else specs/)")
    cmd.add_argument("-o", "--output", default=None,
                     help="output folder (default: [tool.losscc] output, else generated/)")
    cmd.add_argument("--backend", action="append", choices=backend_names(),
                     help="only this backend (repeatable; default: [tool.losscc] backends, else all)")
    _eps_option(cmd)
    _common_options(cmd)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="losscc", description="Compile loss specs into framework code, one module per backend.")
    p.add_argument("--version", action="version", version=f"losscc {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="write the output folder from the specs")
    _tree_options(g)
    c = sub.add_parser("check", help="exit 1 if the output folder is not exactly what the specs produce")
    _tree_options(c)
    c.add_argument("--diff", action="store_true", help="print a patch (git apply, from the project root)")
    e = sub.add_parser("explain", help="show the formula before and after rewrites")
    e.add_argument("spec")
    _eps_option(e)
    _common_options(e, formats=False)
    v = sub.add_parser("verify", help="run the generated code against high-precision references")
    v.add_argument("specs", nargs="*", default=[],
                   help="spec files or folders (default: [tool.losscc] specs, else specs/)")
    v.add_argument("--cases", action="append", default=[], metavar="FILE.json",
                   help="extra conformance case file (for a single spec)")
    v.add_argument("--backend", action="append", choices=backend_names())
    v.add_argument("--dtype", action="append", choices=["float64", "float32"])
    v.add_argument("--mode", action="append", choices=["eager", "graph"])
    v.add_argument("--random", type=int, default=3, help="random cases per spec")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--format", choices=["table", "json"], default="table")
    v.add_argument("--norm-only", action="store_true",
                   help="only the norm-wise check, not the per-element relative one (docs/verify.md)")
    v.add_argument("--strict", action="store_true",
                   help="the per-element check as well as the norm-wise one: the default, accepted for old scripts")
    v.add_argument("--backward", choices=["autograd", "custom", "auto"],
                   help="verify with this backward for every spec instead of the spec's own (docs/backward.md)")
    v.add_argument("--extreme", action="store_true",
                   help="only the extreme-input suite (float32 unless --dtype): finite and correct")
    v.add_argument("-o", "--output", default="generated")
    _eps_option(v)
    d = sub.add_parser("docs", help="write a reference page per spec into docs/losses (--check: exit 1 if stale)")
    d.add_argument("specs", nargs="*", default=[], help="only these spec files or folders (no index; default: [tool.losscc] specs, all pages)")
    d.add_argument("--check", action="store_true", help="write nothing; exit 1 listing the stale pages")
    _common_options(d, formats=False)
    from . import commands  # new, schema

    commands.add_parsers(sub)
    for cmd in sub.choices.values():  # also after the command: `losscc verify --debug`
        cmd.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    return p


def diagnostic_json(d: Diagnostic) -> dict:
    return {"path": d.loc.path, "line": d.loc.line, "column": d.loc.col if d.loc.line else 0,
            "code": d.code, "level": d.level, "message": d.message, "hint": d.hint}


def _json(args) -> bool:
    return getattr(args, "format", None) == "json" and args.command in ("generate", "check")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.debug:
        os.environ["LOSSCC_DEBUG"] = "1"
    try:
        return _run(args)
    except SpecError as exc:
        if args.debug:
            raise
        internal = any(d.code == "E900" for d in exc.diagnostics)
        code = 3 if internal else 2
        if _json(args):
            print(json.dumps({"command": args.command, "exit": code,
                              "diagnostics": [diagnostic_json(d) for d in exc.diagnostics]}, indent=1))
        for d in exc.diagnostics:
            print(d.format(), file=sys.stderr)
        n = sum(1 for d in exc.diagnostics if d.level == "error")
        print(f"losscc: {n} error{'s' if n != 1 else ''}", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        if args.debug:
            raise
        where = f"{printable(exc.filename, False)}: " if exc.filename else ""
        print(f"losscc: error: {where}{printable(exc.strerror or str(exc))}", file=sys.stderr)
        return 2
    except Exception as exc:  # the one place a bug becomes exit status 3
        if args.debug:
            raise
        text = printable(str(exc).strip().split("\n")[0][:200], False)
        print(f"losscc: internal error: {type(exc).__name__}: {text} (run with --debug for a traceback)",
              file=sys.stderr)
        return 3


def _run(args) -> int:
    if args.command in ("generate", "check"):
        return _tree_command(args)
    if args.command == "explain":
        from . import emit
        from .pipeline import explain
        from .project import find_project
        from .spec import load_spec

        project = find_project()
        paths = emit.project_specs(project, [args.spec])
        if len(paths) != 1:
            raise SpecError([Diagnostic(emit.Location(args.spec), "E100", "explain takes one spec file")])
        (path,) = paths
        spec = load_spec(path, project.rel(path))
        text = explain(emit.with_eps(spec, project.eps if args.eps is None else args.eps))
        if not args.quiet:
            sys.stdout.write(printable(text))
        return 0
    if args.command == "docs":
        from .docpages import run_cli as docs_cli

        return docs_cli(args)
    from . import commands  # new, schema, and verify's check for the frameworks

    if args.command in commands.COMMANDS and (status := commands.run(args)) is not None:
        return status
    if args.command == "verify":
        from .verify import run_cli

        return run_cli(args)
    return 2  # pragma: no cover


def _tree_command(args) -> int:
    from . import emit
    from .project import find_project

    project = find_project()
    b = emit.build(project, args.specs, args.output, args.eps, args.backend)
    warnings = list(b.warnings)
    report: dict = {"command": args.command, "root": str(project.root), "output": b.out_rel,
                    "specs": len(b.specs), "files": len(b.files)}

    def shown(rel: str) -> str:
        return printable(posixpath.normpath(f"{b.out_rel}/{rel}") if b.out_rel != "." else rel, False)

    if args.command == "generate":
        try:
            changed = emit.write_tree(b.files, b.out, b.backends, b.full)
        except emit.OutputLocked as exc:
            print(f"losscc: {printable(str(exc), False)}", file=sys.stderr)
            return 2
        unexpected = emit.compare(b.files, b.out, b.backends, b.full, b.root).unexpected
        for rel, what in unexpected:
            warnings.append(Diagnostic(emit.Location(shown(rel)), "W171",
                                       f"{what}{'' if what.startswith(emit.STRAY) else ' not written by losscc'}; "
                                       "`losscc check` fails until it is removed",
                                       "warning"))
        report.update(changed=[shown(r) for r in changed], exit=0,
                      diagnostics=[diagnostic_json(w) for w in warnings])
        if _json(args):
            print(json.dumps(report, indent=1))
        elif not args.quiet:
            for w in warnings:
                print(w.format(), file=sys.stderr)
            print(f"losscc: {len(b.specs)} specs, {len(b.files)} files, {len(changed)} changed in {printable(b.out_rel, False)}")
        return 0
    st = emit.compare(b.files, b.out, b.backends, b.full, b.root)
    code = 0 if st.clean else 1
    report.update(clean=st.clean, exit=code, stale=[shown(r) for r in st.stale],
                  missing=[shown(r) for r in st.missing], extra=[shown(r) for r in st.extra],
                  foreign=[shown(r) for r in st.foreign],
                  unexpected=[{"path": shown(r), "what": w} for r, w in st.unexpected],
                  diagnostics=[diagnostic_json(w) for w in warnings])
    patch = emit.diff(b.files, st, b.out_rel) if args.diff else ""
    if _json(args):
        if args.diff:
            report["diff"] = patch
        print(json.dumps(report, indent=1))
        return code
    if not args.quiet:
        for w in warnings:
            print(w.format(), file=sys.stderr)
    if st.clean:
        if not args.quiet:
            print(f"losscc: {printable(b.out_rel, False)} is up to date ({len(b.files)} files)")
        return 0
    for label, items in (("stale", st.stale), ("missing", st.missing), ("extra", st.extra),
                         ("not written by losscc", st.foreign)):
        for rel in items:
            print(f"{label}: {shown(rel)}")
    for rel, what in st.unexpected:
        print(f"unexpected: {shown(rel)} ({what}; generate never writes it)")
    sys.stdout.write(patch)
    stale = st.stale or st.missing or st.extra or st.foreign
    hints = (["run `losscc generate` to update"] if stale else []) + (
        ["remove the unexpected entries by hand (generate leaves them alone)"] if st.unexpected else [])
    print("losscc: " + "; ".join(hints), file=sys.stderr)
    if any("bytecode" in what for _, what in st.unexpected):
        print("losscc: to keep Python's caches out of the tree, set PYTHONPYCACHEPREFIX (or "
              "PYTHONDONTWRITEBYTECODE=1) where the generated modules are imported", file=sys.stderr)
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
