"""Diagnostics: problems are values, collected and reported together.

Every problem the compiler finds in a spec is a :class:`Diagnostic` carrying the
file, line and column it refers to, a stable error code and a message in the
``path:line:col: error: message`` style of compilers and linters.  Stages return
or raise lists of them; the CLI prints them sorted and exits with status 2.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Iterable, Sequence


def printable(text: str, newlines: bool = True) -> str:
    """`text` safe to print on a terminal: control, format and line-separator characters
    (escape sequences, bidi overrides, ``\\x85``, ``\\u2028``) shown as Python escapes;
    tabs kept, and newlines unless `newlines` is False."""
    keep = "\t\n" if newlines else "\t"
    return "".join(ch if ch in keep or ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in str(text))


@dataclass(frozen=True, order=True)
class Location:
    path: str = "<spec>"
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        if self.line:
            return f"{self.path}:{self.line}:{self.col or 1}"
        return self.path


@dataclass(frozen=True, order=True)
class Diagnostic:
    loc: Location
    code: str
    message: str
    level: str = "error"  # "error" or "warning"
    hint: str = field(default="", compare=False)

    def format(self) -> str:
        text = f"{printable(str(self.loc), False)}: {self.level}: {printable(self.message)} [{self.code}]"
        if self.hint:
            text += f"\n  hint: {printable(self.hint)}"
        return text


class SpecError(Exception):
    """Raised with one or more diagnostics; the CLI turns it into exit status 2."""

    def __init__(self, diagnostics: Iterable[Diagnostic]):
        self.diagnostics = tuple(sorted(diagnostics))
        super().__init__("\n".join(d.format() for d in self.diagnostics))


def did_you_mean(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else ""


class Collector:
    """Accumulates diagnostics for one spec; raise at the end of a stage."""

    def __init__(self, path: str):
        self.path = path
        self.items: list[Diagnostic] = []

    def error(self, line: int, col: int, code: str, message: str, hint: str = "") -> None:
        self.items.append(Diagnostic(Location(self.path, line, col), code, message, "error", hint))

    def warning(self, line: int, col: int, code: str, message: str, hint: str = "") -> None:
        self.items.append(Diagnostic(Location(self.path, line, col), code, message, "warning", hint))

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.level == "error"]

    def raise_if_errors(self) -> None:
        if self.errors:
            raise SpecError(self.items)
