"""Instruction selection of whole fused kernels: a backend's built-in loss for an IR subtree.

A backend lists :class:`Fused` records (``Backend.fused``): the name of an IR shape below,
the built-in call that computes it, and the conditions under which it computes exactly
the same function and gradient (the computation's dtype, inputs no gradient is asked of).
A shape is a function of operand symbols that builds the prepared IR a spec's passes leave
(``losscc explain`` shows it); it matches a node that equals it with the operands bound to
the program's own float inputs (tensor operands, all of the node's axes) and float
hyperparameters (scalar operands), so matching is a dictionary lookup per node and never a
search. A record enters a table only where ``losscc verify`` and ``--extreme`` pass with it
(docs/operator_choices.md); the composite form stays in the generated code for the calls
its conditions exclude.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import sympy as sp

from . import ir


@dataclass(frozen=True)
class Shape:
    tensors: tuple[str, ...]            # operand names bound to float inputs
    scalars: tuple[str, ...]            # operand names bound to float hyperparameters
    build: Callable[..., sp.Expr]       # operands (tensors, then scalars) -> the IR it matches


@dataclass(frozen=True)
class Fused:
    """One record of a backend's pattern table."""

    shape: str                          # a key of SHAPES
    call: str                           # the built-in over the operands' code ({x}, {y}, {beta})
    dtypes: tuple[str, ...] = ()        # the computation's dtypes it serves (empty: every one)
    no_grad: tuple[str, ...] = ()       # tensor operands that must not need a gradient
    why: str = ""                       # what verify found (docs/operator_choices.md)


def _smooth_l1(x, y, b):
    d = sp.Abs(x - y)
    return ir.piecewise((sp.Float(0.5) * d ** 2 / b, d < b), (-sp.Float(0.5) * b + d, True))


def _huber(x, y, b):
    d = sp.Abs(x - y)
    return b * ir.Where(d > b, d - b, 0) + sp.Float(0.5) * sp.Min(b, d) ** 2


def _bce(x, y):
    s = ir.StopGradient(x)
    value = -(y * sp.Max(-100, sp.log(s)) + (1 - y) * sp.Max(-100, ir.log1p(-s)))
    return value + (x - s) * ir.StopGradient((s - y) / sp.Max(sp.Float(9.999999960041972e-13), (1 - s) * s))


def _kl_div(x, y):
    pos = sp.StrictGreaterThan(y, 0)
    return ir.piecewise((y * (sp.log(ir.Where(pos, y, 1)) - x), pos), (0, True))


SHAPES = {
    # where(|x - y| < b, 0.5 |x - y|**2 / b, |x - y| - b / 2), b > 0 (specs/smooth_l1.yaml after the split at 0)
    "smooth_l1": Shape(("x", "y"), ("beta",), _smooth_l1),
    # b where(|x - y| > b, |x - y| - b, 0) + min(b, |x - y|)**2 / 2 (specs/huber.yaml after linear-tail)
    "huber": Shape(("x", "y"), ("delta",), _huber),
    # specs/bce.yaml without weight: torch's clamped logs and its gradient (p - y) / max(p (1 - p), 1e-12)
    "bce": Shape(("x", "y"), (), _bce),
    # where(y > 0, y (log y - x), 0) (specs/kl_div.yaml, log_target False)
    "kl_div": Shape(("x", "y"), (), _kl_div),
}


def check_records(backend: str, records, no_grad: str) -> None:
    """Each record names a shape, reads only its operands, and asks no_grad only of a backend
    that can test it (raised as the operator tables' error)."""
    from .backends.operators import OperatorTableError, fields

    for rec in records:
        shape = SHAPES.get(rec.shape)
        if shape is None:
            raise OperatorTableError(f"backend '{backend}': fused record for unknown shape '{rec.shape}'")
        extra = [f for f in fields(rec.call) if f not in shape.tensors + shape.scalars]
        if extra or not set(rec.no_grad) <= set(shape.tensors):
            raise OperatorTableError(f"backend '{backend}': fused '{rec.shape}' reads "
                                     f"{{{(extra or list(rec.no_grad))[0]}}}, not one of its operands")
        if rec.no_grad and not no_grad:
            raise OperatorTableError(f"backend '{backend}': fused '{rec.shape}' needs a no_grad test")


@dataclass(frozen=True)
class Match:
    record: Fused
    operands: dict                      # operand name -> IR symbol


@cache
def _built(name: str, operands: tuple) -> sp.Expr:
    return SHAPES[name].build(*operands)


@cache
def _node_types(name: str) -> frozenset:
    """The node types of a shape: a program without all of them cannot match it."""
    shape = SHAPES[name]
    return frozenset(type(n) for n in sp.preorder_traversal(
        _built(name, tuple(sp.Dummy(o) for o in shape.tensors + shape.scalars))) if not n.is_Atom)


def candidates(prog, records, expr) -> dict:
    """Every instance of the records' shapes over the program's float inputs and float
    hyperparameters, for the shapes whose node types all occur in `expr`: IR expression ->
    Match (the first record wins). Instances are built once per process."""
    spec = prog.spec
    tensors = [prog.symbols[i.name] for i in spec.inputs if i.dtype == "float"]
    scalars = [prog.symbols[p.name] for p in spec.params if p.kind == "float"]
    present = {type(n) for n in sp.preorder_traversal(expr)}
    out: dict = {}
    for rec in records:
        shape = SHAPES[rec.shape]
        if not _node_types(rec.shape) <= present:
            continue
        for ts in itertools.permutations(tensors, len(shape.tensors)):
            for ss in itertools.permutations(scalars, len(shape.scalars)):
                expr_ = _built(rec.shape, ts + ss)
                if expr_ not in out:
                    out[expr_] = Match(rec, dict(zip(shape.tensors + shape.scalars, ts + ss)))
    return out


def match(e, table: dict, prog):
    """The Match of node `e`, or None; tensor operands must carry all of `e`'s axes (an
    elementwise built-in does not broadcast as the canonical layout does)."""
    got = table.get(e)
    if got is None:
        return None
    axes = prog.typeof(e).axes
    shape = SHAPES[got.record.shape]
    if any(prog.typeof(got.operands[t]).axes != axes for t in shape.tensors):
        return None
    return got
