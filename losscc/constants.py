"""Constants and source text for the parser: values of constant subexpressions, decided
at bounded precision, and the formula text of AST nodes for messages."""

from __future__ import annotations

import ast
import math

import sympy as sp

from . import ir
from .ir import opaque  # noqa: F401  (re-exported: convert and calls build selects with it)
from .ttype import Fail


def magnitude_digits(base, ex) -> float:
    """Decimal digits of base**ex, estimated without computing it."""
    try:
        b = abs(complex(sp.N(base, 15)))
        x = float(sp.N(ex, 15))
    except (TypeError, ValueError, OverflowError):
        return float("inf")
    if b in (0.0, 1.0):
        return 0.0
    return abs(x * math.log10(b))


CONST_DIGITS = (50, 200)  # working precisions of the zero test of constants


def constant_value(e) -> float | str:
    """The float value of the constant `e`, or the reason it has none.

    Evaluated (SymPy evalf, i.e. mpmath, on a tree of at most 'tree' nodes) at 17 digits;
    a value below 1e-10 is evaluated again at 50 and at 200 digits: below 10**-(digits/2)
    at both it is exactly zero (log(2) + log(3) - log(6) cancels at any precision; a true
    constant such as 1e-50 does not), and it is refused when the two disagree."""
    first = _evaluate(e, 17)
    if isinstance(first, str) or abs(first) >= 1e-10:
        return _real(first)
    a, b = (_evaluate(e, n) for n in CONST_DIGITS)
    if isinstance(a, str) or isinstance(b, str):
        return a if isinstance(a, str) else b
    (na, nb) = CONST_DIGITS
    if abs(a) < 10.0 ** -(na // 2) and abs(b) < 10.0 ** -(nb // 2):
        return 0.0
    if abs(a - b) > 1e-12 * max(abs(a), abs(b)):
        return "constant cannot be evaluated reliably (it depends on a value that cancels to 0)"
    return _real(b)


def _evaluate(e, digits: int) -> complex | str:
    try:
        v = complex(sp.N(e, digits))
    except (TypeError, ValueError, OverflowError, ArithmeticError, RecursionError):
        return "constant cannot be evaluated"
    if v != v:
        return "constant is not a real number"
    return v


def _real(v: complex | str) -> float | str:
    if isinstance(v, str):
        return v
    if abs(v.imag) > 1e-12 * abs(v):
        return "constant is not a real number"
    if not abs(v.real) < 1e300:
        return "constant overflows a float (|value| >= 1e300)"
    return v.real


def check_constant(node, e) -> float:
    v = constant_value(e)
    if isinstance(v, str):
        raise Fail(node, "E203", v)
    return v


def is_zero_constant(e) -> bool:
    return bool(e.is_zero) or (e.is_number and not e.has(ir.TensorOp) and constant_value(e) == 0.0)


def decide(rel, a, b) -> bool:
    """A comparison of two constants, decided on their evaluated difference."""
    d = constant_value(a - b)
    if isinstance(d, str):
        raise ValueError(d)
    return {sp.Lt: d < 0, sp.Le: d <= 0, sp.Gt: d > 0, sp.Ge: d >= 0, sp.Eq: d == 0, sp.Ne: d != 0}[rel]


def source(node) -> str:
    """The formula text of a node, normalised and shortened for messages."""
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - a message must not fail
        return "..."
    return text if len(text) <= 60 else text[:57] + "..."


def name_of(node) -> str:
    return node.id if isinstance(node, ast.Name) else ""


def describe(node) -> str:
    return {
        "Attribute": "attribute access", "Lambda": "lambda", "ListComp": "comprehension",
        "GeneratorExp": "generator", "DictComp": "comprehension", "SetComp": "comprehension",
        "List": "list", "Dict": "dict", "Set": "set", "Tuple": "tuple", "JoinedStr": "f-string",
        "Await": "await", "Yield": "yield", "NamedExpr": ":=", "Starred": "*",
        "MatMult": "@", "Mod": "%", "FloorDiv": "//", "LShift": "<<", "RShift": ">>",
        "BitXor": "^", "Invert": "~", "Is": "is", "IsNot": "is not", "In": "in", "NotIn": "not in",
        "Slice": "slice",
    }.get(type(node).__name__, type(node).__name__)

