"""Print IR expressions back in the formula language (for docstrings and `losscc explain`).

A function's node prints as its registry record says (``losscc.functions``): ``name(args)``
or ``name(x, axis=A)``; the syntax of the language (operators, conditions, gathers) has
its own methods here."""

from __future__ import annotations

import sympy as sp
from sympy.printing.str import StrPrinter

from . import functions


class FormulaPrinter(StrPrinter):
    def __init__(self, names: dict | None = None):
        super().__init__({"order": "none"})
        self.names = names or {}

    def _print(self, expr, **kwargs):
        if expr in self.names:
            return self.names[expr]
        if isinstance(expr, sp.Mul) and expr.could_extract_minus_sign() and -expr in self.names:
            return "-" + self.names[-expr]
        f = functions.of_node(expr)
        if f is not None and f.printer == "call":
            return f"{f.name}(" + ", ".join(self._print(a) for a in expr.args) + ")"
        if f is not None and f.printer == "axis":
            return f"{f.name}({self._print(expr.args[0])}, axis={expr.args[1]})"
        return super()._print(expr, **kwargs)

    def parenthesize(self, item, level, strict=False):
        if item in self.names:
            return self.names[item]
        return super().parenthesize(item, level, strict)

    def _print_Float(self, expr):
        return repr(float(expr))

    def _print_Rational(self, expr):
        return repr(float(expr)) if expr.q in (2, 4, 5, 8, 10) else f"{expr.p}/{expr.q}"

    def _print_Gather(self, e):
        x = self._print(e.args[0])
        if not (x.isidentifier() or x.endswith(")")):
            x = f"({x})"
        return f"{x}[{self._print(e.args[1])}]"

    def _print_Size(self, e):
        return str(e.args[0])

    def _print_Rename(self, e):
        return f"rename({self._print(e.args[0])}, {e.args[1]}={e.args[2]})"

    def _print_Component(self, e):
        x = self._print(e.args[0])
        if not (x.isidentifier() or x.endswith(")")):
            x = f"({x})"
        return f"{x}[{e.args[1]}]"

    def _print_Item(self, e):
        return f"{self._print(e.args[0])}[{e.args[1]}]"

    def _print_Piecewise(self, e):
        pairs = list(e.args)
        out = self._print(pairs[-1].expr)
        for p in reversed(pairs[:-1]):
            out = f"where({self._print(p.cond)}, {self._print(p.expr)}, {out})"
        return out

    def _print_Equality(self, e):
        return f"{self._print(e.args[0])} == {self._print(e.args[1])}"

    def _print_Unequality(self, e):
        return f"{self._print(e.args[0])} != {self._print(e.args[1])}"

    def _print_Where(self, e):
        return "where(" + ", ".join(self._print(a) for a in e.args) + ")"

    def _print_And(self, e):
        return " & ".join(f"({self._print(a)})" for a in e.args)

    def _print_Or(self, e):
        return " | ".join(f"({self._print(a)})" for a in e.args)

    def _print_Not(self, e):
        return f"not ({self._print(e.args[0])})"


def formula_text(expr: sp.Expr, names: dict | None = None) -> str:
    return FormulaPrinter(names).doprint(expr)
