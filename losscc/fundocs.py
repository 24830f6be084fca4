"""docs/spec.md's list of functions, generated from the registry (``losscc.functions``).

``python -m losscc.fundocs`` rewrites the list between its markers in docs/spec.md;
``tests/test_functions.py`` fails while the committed list differs from the registry.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .functions import FUNCTIONS, Function

BEGIN = "<!-- begin functions: generated from losscc/functions.py by `python -m losscc.fundocs`; do not edit -->"
END = "<!-- end functions -->"
SECTIONS = (
    ("elementwise", "Elementwise"),
    ("axis", "Over a named axis (`axis=C` names one of the argument's axes)"),
    ("other", "Labels and gradients"),
    ("pairs", "Positions, pairs and neighbours (see [Pairs and neighbours](#pairs-and-neighbours))"),
    ("no gradient", "Without a gradient (see [below](#functions-without-a-gradient))"),
    ("refused", "Refused (E231)"),
)


def _row(f: Function) -> str:
    doc = f.doc if f.rule != "refused" else f"refused: {f.doc}"
    if f.expands:
        doc += f"; the same as `{f.expands}`"
    return f"| `{f.signature}` | {doc.replace('|', '&#124;')} |"


def render() -> str:
    """The generated list (without its markers)."""
    out: list[str] = []
    for key, title in SECTIONS:
        rows = [_row(f) for f in FUNCTIONS if f.section == key]
        if rows:
            out += ["", f"**{title}**", "", "| function | meaning |", "|---|---|", *rows]
    return "\n".join(out[1:])


def update(text: str) -> str:
    """`text` (docs/spec.md) with the list between the markers regenerated."""
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError("docs/spec.md lacks the function list's markers")
    return f"{head}{BEGIN}\n{render()}\n{END}{tail}"


def main() -> int:
    path = Path(__file__).resolve().parent.parent / "docs" / "spec.md"
    text = path.read_text(encoding="utf-8")
    new = update(text)
    if new != text:
        path.write_text(new, encoding="utf-8")
        print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
