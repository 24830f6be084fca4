"""The generated function's own names: allocated around the spec's names, the backend's
import names and Python's keywords and builtins, so that none is shadowed."""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from . import ir
from .backends import Backend
from .parse import Program


def import_names(backend: Backend) -> frozenset[str]:
    """The names a backend's import lines bind in a generated module."""
    return backend.bound_names


def python_names() -> frozenset[str]:
    """Keywords and builtins: a local of the generated code never shadows one."""
    import builtins
    import keyword

    return frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))


def allocate(hint: str, taken: set[str]) -> str:
    """`hint`, or `hint_1`, `hint_2`, ... : the first not in `taken` (which it joins)."""
    name, k = hint, 0
    while name in taken:
        k += 1
        name = f"{hint}_{k}"
    taken.add(name)
    return name


@dataclass(frozen=True)
class Locals:
    """The generated function's own variables, allocated once per module so that the general
    path and the all-None path agree: none is a spec name, a framework alias or a builtin."""

    sizes: dict                          # axis -> variable holding its size (the axis's own name if free)
    dtype: str
    in_dtype: str
    half: str
    result: str

    @staticmethod
    def allocate(prog: Program, taken: set[str], forbidden: frozenset = frozenset()) -> Locals:
        """`taken` (spec names and aliases) is extended in place. An axis keeps its own name
        unless that is `forbidden` or a Python name (a shape symbol F, Ellipsis, ...)."""
        bad = forbidden | python_names()
        sizes = {}
        fixed = prog.spec.sizes
        for a in prog.axes:
            if a in fixed:  # an axis of a fixed size is its number
                sizes[a] = str(fixed[a])
                continue
            sizes[a] = allocate(a, taken | bad) if a in bad else a
            taken.add(sizes[a])
        taken |= bad
        return Locals(sizes, allocate("dtype", taken), allocate("in_dtype", taken), allocate("half", taken),
                      allocate("result", taken))

    def names(self) -> set[str]:
        return set(self.sizes.values()) | {self.dtype, self.in_dtype, self.half, self.result}


# the variable a node's value is stored in, by node type (the nearest along its MRO)
HINTS = {ir.LogSoftmax: "log_probs", ir.Softmax: "probs", ir.LogSumExp: "lse", ir.ReduceSum: "total",
       ir.ReduceMean: "avg", ir.ReduceMax: "peak", ir.Gather: "picked", ir.OneHot: "onehot", ir.Component: "part",
       ir.StopGradient: "frozen", sp.exp: "e", sp.log: "lg", ir.softplus: "sp", ir.sigmoid: "sig",
       sp.Piecewise: "branch", sp.Abs: "magnitude", ir.ArgMax: "top", ir.ArgMin: "bottom", ir.Index: "position",
       ir.Rename: "renamed", ir.Diff: "step",
       ir.Round: "rounded", ir.Floor: "floored", ir.Ceil: "ceiled", ir.Sign: "signs"}


def hint(e) -> str:
    """The name a node's variable is given (``t`` by default, then numbered)."""
    return next((HINTS[cls] for cls in type(e).__mro__ if cls in HINTS), "t")
