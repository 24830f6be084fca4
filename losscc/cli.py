"""Command line: ``losscc generate | check | explain | verify``.

Exit status: 0 success, 1 stale output or a failed verification, 2 bad input.
No traceback is shown for bad input unless ``--debug`` is given.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .errors import SpecError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="losscc", description="Compile loss specs into MindSpore and Paddle code.")
    p.add_argument("--version", action="version", version=f"losscc {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="write generated/ from specs/")
    g.add_argument("specs", nargs="*", default=["specs"])
    g.add_argument("-o", "--output", default="generated")
    c = sub.add_parser("check", help="exit 1 if generated/ is not what specs/ produce")
    c.add_argument("specs", nargs="*", default=["specs"])
    c.add_argument("-o", "--output", default="generated")
    c.add_argument("--diff", action="store_true", help="print a unified diff")
    e = sub.add_parser("explain", help="show the formula before and after rewrites")
    e.add_argument("spec")
    for cmd in (g, c, e):
        _eps_option(cmd)
    v = sub.add_parser("verify", help="run the generated code against high-precision references")
    v.add_argument("specs", nargs="*", default=["specs"])
    v.add_argument("--cases", action="append", default=[], metavar="FILE.json",
                   help="extra conformance case file (for a single spec)")
    v.add_argument("--backend", action="append", choices=["mindspore", "paddle"])
    v.add_argument("--dtype", action="append", choices=["float64", "float32"])
    v.add_argument("--mode", action="append", choices=["eager", "graph"])
    v.add_argument("--random", type=int, default=3, help="random cases per spec")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--format", choices=["table", "json"], default="table")
    v.add_argument("--extreme", action="store_true",
                   help="only the extreme-input suite (float32 unless --dtype): finite and correct")
    v.add_argument("-o", "--output", default="generated")
    _eps_option(v)
    from . import commands  # new, schema

    commands.add_parsers(sub)
    return p


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
                     help="eps guard for every spec, overriding guards.eps (0: none); recorded in the header")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.debug:
        import os

        os.environ["LOSSCC_DEBUG"] = "1"
    try:
        return _run(args)
    except SpecError as exc:
        if args.debug:
            raise
        for d in exc.diagnostics:
            print(d.format(), file=sys.stderr)
        n = sum(1 for d in exc.diagnostics if d.level == "error")
        print(f"losscc: {n} error{'s' if n != 1 else ''}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _run(args) -> int:
    from . import emit

    if args.command in ("generate", "check"):
        problems: list = []
        specs = emit.load_all(emit.find_specs(args.specs), problems, eps=args.eps)
        files = emit.render_tree(specs, problems=problems)
        from .lint import continuity
        from .parse import build_program

        for spec in specs:
            for w in continuity(build_program(spec)):
                print(w.format(), file=sys.stderr)
        out = Path(args.output)
        if args.command == "generate":
            try:
                changed = emit.write_tree(files, out)
            except emit.OutputLocked as exc:
                print(f"losscc: {exc}", file=sys.stderr)
                return 2
            print(f"losscc: {len(specs)} specs, {len(files)} files, {len(changed)} changed in {out}")
            return 0
        st = emit.compare(files, out)
        if st.clean:
            print(f"losscc: {out} is up to date ({len(files)} files)")
            return 0
        for label, items in (("stale", st.stale), ("missing", st.missing), ("extra", st.extra),
                             ("not written by losscc", st.foreign)):
            for rel in items:
                print(f"{label}: {out / rel}")
        if args.diff:
            sys.stdout.write(emit.diff(files, out, st.stale + st.missing + st.extra))
        print("losscc: run `losscc generate` to update", file=sys.stderr)
        return 1
    if args.command == "explain":
        from .pipeline import explain
        from .spec import load_spec

        sys.stdout.write(explain(emit.with_eps(load_spec(args.spec, emit.display_path(Path(args.spec))), args.eps)))
        return 0
    from . import commands  # new, schema, and verify's check for the frameworks

    if args.command in commands.COMMANDS and (status := commands.run(args)) is not None:
        return status
    if args.command == "verify":
        from .verify import run_cli

        return run_cli(args)
    return 2  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
