"""Commands for using losscc in a project: ``new`` and ``schema``, and the check that
``verify`` can import the frameworks (before anything imports NumPy).

:mod:`losscc.cli` adds these subcommands with :func:`add_parsers` and hands them to
:func:`run`.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from .backends import get as get_backend
from .backends import names as backend_names

COMMANDS = ("new", "schema", "verify")


def add_parsers(sub) -> None:
    n = sub.add_parser("new", help="write a starter spec (or a copy of a catalogue spec) into the specs folder")
    n.add_argument("name", help="the new loss's name (snake_case, also the file name)")
    n.add_argument("--from", dest="from_name", metavar="CATALOGUE_NAME",
                   help="copy this spec of losscc's catalogue (focal, huber, ...) instead of the starter")
    n.add_argument("--specs-dir", default=None,
                   help="where to write <name>.yaml (default: [tool.losscc] specs, else specs/)")
    sub.add_parser("schema", help="print the JSON Schema of the spec format (for editors)")


def run(args) -> int | None:
    """The exit status of `args.command`; None where the caller goes on (verify can run)."""
    if args.command == "schema":
        from .schema import shipped

        sys.stdout.write(shipped())
        return 0
    if args.command == "new":
        from .scaffold import new_spec

        path = new_spec(args.name, specs_dir(args.specs_dir), args.from_name)
        print(f"losscc: wrote {os.path.relpath(path)}; next: `losscc generate`")
        return 0
    return _verify_backends(args)


def _verify_backends(args) -> int | None:
    """Check that verify can import what it needs.  A backend the user named (``--backend``)
    must have its framework; of the default backends, one without it is skipped with a note
    (``args.backend`` becomes the rest).  Nothing left to verify is error E199."""
    chosen = list(args.backend or backend_names())
    gaps = {b: get_backend(b).missing() for b in chosen}
    skipped = [] if args.backend else [b for b in chosen if gaps[b]]
    left = [b for b in chosen if b not in skipped]
    missing = missing_frameworks(()) + [m for b in (left or chosen) for m in gaps[b]]
    if missing:
        # the extras of the backends that lack a framework (numpy alone: of those to verify)
        short = [b for b in (left or chosen) if gaps[b]] or (left or chosen)
        extras = ",".join(sorted({get_backend(b).extra for b in short}))
        print(f"losscc: error: verify runs the generated code, and {', '.join(dict.fromkeys(missing))} cannot be "
              f"imported; install the frameworks with: pip install 'losscc[{extras}]' [E199]", file=sys.stderr)
        return 2
    for b in skipped:
        print(f"losscc: note: skipping backend {b}: {', '.join(gaps[b])} cannot be imported", file=sys.stderr)
    if skipped:
        args.backend = left
    return None


def specs_dir(arg: str | None) -> Path:
    """--specs-dir, else the project's configured specs folder, else specs/."""
    if arg:
        return Path(arg)
    try:
        from .project import find_project
    except ImportError:  # no project configuration support: the default folder
        return Path("specs")
    project = find_project()
    return project.root / project.specs


def missing_frameworks(backends) -> list[str]:
    """The modules ``losscc verify`` needs that cannot be found (without importing them):
    NumPy, and the frameworks of `backends` (names)."""
    missing = []
    for mod in ("numpy", *(m for b in backends for m in get_backend(b).frameworks)):
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(mod)
    return missing
