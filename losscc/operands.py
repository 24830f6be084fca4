"""Operator spellings as the lowering sees them: where each operand sits, and how tightly
the spelled expression binds.

A backend spells an operator as a format string (:mod:`losscc.backends.operators`).  An
operand substituted into an argument position (``f({x})``, ``f(min={lo})``, an element of a
tuple) can be any expression; one anywhere else (``{x}.sum()``, ``{x} - g({x})``) must be
atomic, so a compound one is parenthesised; one the spelling uses more than once must be
a variable, so that it is computed once.  The precedence of the spelled expression
decides whether an enclosing expression parenthesises it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache, lru_cache

from .backends.operators import VALUE_OPERANDS, fields  # noqa: F401  (VALUE_OPERANDS: for the lowering)

# binding strength of generated expressions, loosest last
ATOM, POW, UNARY, MUL, ADD, CMP, NOT, AND, OR, TERNARY = 100, 80, 70, 60, 50, 40, 30, 20, 10, 5

_ATOMIC = (ast.Name, ast.Constant, ast.Call, ast.Attribute, ast.Subscript, ast.List, ast.Dict, ast.Set,
           ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_BINARY = {ast.Add: ADD, ast.Sub: ADD, ast.Mult: MUL, ast.Div: MUL, ast.FloorDiv: MUL, ast.Mod: MUL,
           ast.MatMult: MUL, ast.Pow: POW}


@dataclass(frozen=True)
class Slot:
    uses: int     # how often the spelling reads the operand
    bare: bool    # every use is an argument or a tuple element: any expression fits


@dataclass(frozen=True)
class Spelling:
    slots: dict   # operand -> Slot
    precedence: int


def _placeholder(name: str) -> str:
    return f"__operand_{name}__"


@cache
def analyse(spelling: str) -> Spelling:
    """Where `spelling` puts each operand, and the precedence of what it spells."""
    names = fields(spelling)
    tree = ast.parse(spelling.format(**{n: _placeholder(n) for n in names}), mode="eval")
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    uses = {n: 0 for n in names}
    bare = {n: True for n in names}
    by_placeholder = {_placeholder(n): n for n in names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in by_placeholder:
            name = by_placeholder[node.id]
            uses[name] += 1
            parent = parents.get(node)
            in_call = isinstance(parent, ast.Call) and node in parent.args
            bare[name] = bare[name] and (in_call or isinstance(parent, (ast.keyword, ast.Tuple, ast.List)))
    slots = {n: Slot(uses[n], bare[n]) for n in names}
    return Spelling(slots, precedence(tree.body))


def precedence(node: ast.expr) -> int:
    if isinstance(node, (*_ATOMIC, ast.Tuple)):
        return ATOM
    if isinstance(node, ast.BinOp):
        return _BINARY.get(type(node.op), MUL)
    if isinstance(node, ast.UnaryOp):
        return NOT if isinstance(node.op, ast.Not) else UNARY
    if isinstance(node, ast.Compare):
        return CMP
    if isinstance(node, ast.BoolOp):
        return AND if isinstance(node.op, ast.And) else OR
    return TERNARY


@lru_cache(maxsize=4096)
def is_atomic(code: str) -> bool:
    """Code that stays one operand wherever it is put (a name, a call, a literal, ...)."""
    try:
        node = ast.parse(code.strip(), mode="eval").body
    except SyntaxError:
        return False
    if isinstance(node, ast.Tuple):  # (a, b) is atomic, a, b is not
        return code.strip().startswith("(") and code.strip().endswith(")") and _one_group(code.strip())
    return isinstance(node, _ATOMIC)


@lru_cache(maxsize=4096)
def is_simple(code: str) -> bool:
    """A name or a number: free to repeat."""
    try:
        node = ast.parse(code.strip(), mode="eval").body
    except SyntaxError:
        return False
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, (ast.Name, ast.Constant))


def _one_group(code: str) -> bool:
    """The opening parenthesis of `code` closes at its end."""
    depth = 0
    for k, ch in enumerate(code):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0:
            return k == len(code) - 1
    return False
