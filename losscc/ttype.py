"""The types of formula values, and the parser's internal failure.

Every subexpression the parser builds gets a :class:`TType` (dtype and named axes), so
shape and dtype mistakes are reported at the line and column where they occur.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class TType:
    dtype: str                       # "float", "int" or "bool"
    axes: tuple[str, ...] = ()       # named axes, in the program's global order
    literal: int = 0                 # >0: a learnable tensor with one literal-size axis
    grad: bool = False               # depends differentiably on a float input or learnable
    index_of: str | None = None      # int inputs: the axis their values index ([0, C) -> "C")


class Fail(Exception):
    """A formula error at an AST node (code "silent": already reported)."""

    def __init__(self, node: ast.AST | None, code: str, msg: str, hint: str = ""):
        self.node, self.code, self.msg, self.hint = node, code, msg, hint


def union(axes_list, order) -> tuple[str, ...]:
    """The axes of all of `axes_list`, in the global `order`."""
    present = set().union(*axes_list) if axes_list else set()
    return tuple(a for a in order if a in present)
