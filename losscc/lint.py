"""Lints on the IR as written: continuity of Piecewise/where at their boundaries.

For a branch condition `lhs < rhs` (or <=, >, >=) the two neighbouring branches are
compared on the boundary lhs = rhs: their values must agree (else a warning: the loss
jumps there) and so must their derivatives along lhs (else: a kink, whose gradient
depends on which side the framework picks).  Equality is decided at a bounded cost
(:mod:`losscc.bounded`: small polynomials are expanded, anything else is evaluated at
fixed generic points at 40 digits); when that cannot decide, the boundary is not
reported.  Huber passes; a Huber with a wrong linear branch is flagged.
"""

from __future__ import annotations

import sympy as sp

from . import bounded, ir
from .errors import Diagnostic, Location
from .formula import formula_text
from .parse import Program

_MAX_OPS = 200  # larger branches are not analysed (the zero test is bounded: losscc.bounded)


def _elementwise(e) -> bool:
    return not any(isinstance(n, ir.TensorOp) and not isinstance(n, ir.Size) for n in sp.preorder_traversal(e))


def _zero(e) -> bool | None:
    """Is e zero for general parameter values?  Bounded (no simplify): see losscc.bounded."""
    return bounded.is_zero(e)


def _at(e, t, value) -> bool | None:
    """Is e zero at t = value (as a one-sided limit where plain substitution gives 0 * log 0)?"""
    v = e.subs(t, value)
    if v.has(sp.nan, sp.zoo, sp.oo, -sp.oo):
        return bounded.one_sided_zero(e, t, value)
    return _zero(v)


def continuity(prog: Program) -> list[Diagnostic]:
    spec = prog.spec
    where = spec.bindings[-1].loc
    out: list[Diagnostic] = []
    seen = set()
    for node in sp.preorder_traversal(prog.loss):
        if not isinstance(node, sp.Piecewise) or node in seen:
            continue
        seen.add(node)
        pairs = list(node.args)
        for k in range(len(pairs) - 1):
            cond = pairs[k].cond
            if not isinstance(cond, (sp.StrictLessThan, sp.LessThan, sp.StrictGreaterThan, sp.GreaterThan)):
                continue
            a, b = pairs[k].expr, pairs[k + 1].expr
            lhs, rhs = cond.args
            if any(sp.count_ops(x) > _MAX_OPS for x in (a, b, lhs, rhs)):
                continue
            if not all(_elementwise(x) for x in (a, b, lhs, rhs)):
                continue
            t = sp.Dummy("t")
            fa, fb = a.xreplace({lhs: t}), b.xreplace({lhs: t})
            if lhs.free_symbols and (fa.has(*lhs.free_symbols) or fb.has(*lhs.free_symbols)):
                continue  # the branches use lhs's parts separately: no single boundary variable
            boundary = f"{formula_text(lhs)} = {formula_text(rhs)}"
            jump = _at(fa - fb, t, rhs)
            if jump is False:
                out.append(Diagnostic(Location(spec.path, where.line, where.col), "W301",
                                      f"the loss is discontinuous at {boundary}: "
                                      f"{formula_text(a)} and {formula_text(b)} differ there", "warning"))
                continue
            if jump and _at(sp.diff(fa, t) - sp.diff(fb, t), t, rhs) is False:
                out.append(Diagnostic(Location(spec.path, where.line, where.col), "W302",
                                      f"the first derivative jumps at {boundary} (a kink): "
                                      f"{formula_text(a)} and {formula_text(b)}", "warning"))
    return out
