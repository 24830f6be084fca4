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
# nor sides holding more selects than this besides the one analysed: the slope of a product of
# k selects holds k**2 of them, each rebuilt (its conditions evaluated) at every substitution;
# `y * where(x > 1, x, 1) * ... * where(x > 60, x, 60)` (1.1 KB) took 100 s (the catalogue: 2)
_MAX_SELECTS = 4
# the work of all the boundaries of a spec: each analysed side pair costs (ops of both sides)**2
# (a slope is a derivative, and the derivative of a product of k factors holds k**2 of them);
# past it the other boundaries are not analysed.  The catalogue's largest spec uses 740; one
# Piecewise of 31 pairs times 24 factors exp(sin(k x)) took 13 s, 200-op sides about 1 s each
_MAX_WORK = 200_000
# nodes of a side counted before count_ops walks it (count_ops and the substitutions walk trees:
# a loss of 20000 nodes around 240 boundaries took 6 s in count_ops alone)
_MAX_NODES = 1000


def _nodes(e, skip=None, limit: int = _MAX_NODES) -> int:
    """Nodes of the tree e (the subtree `skip` left out), counted up to limit + 1."""
    n, stack = 0, [e]
    while stack and n <= limit:
        x = stack.pop()
        if skip is not None and x == skip:
            continue
        n += 1
        stack.extend(x.args)
    return n


def _elementwise(e) -> bool:
    return not any(isinstance(n, ir.TensorOp) and not isinstance(n, ir.Size) for n in sp.preorder_traversal(e))


def _zero(e) -> bool | None:
    """Is e zero for general parameter values?  Bounded (no simplify): see losscc.bounded."""
    return bounded.is_zero(e)


def _at(e, t, value) -> bool | None:
    """Is e zero at t = value (as a one-sided limit where plain substitution gives 0 * log 0)?"""
    v = bounded.substitute(e, {t: value})
    if v is None:
        return None
    if v.has(sp.nan, sp.zoo, sp.oo, -sp.oo):
        return bounded.one_sided_zero(e, t, value)
    return _zero(v)


def _enclosed(e, top, out: dict) -> None:
    """Each Piecewise of e -> its largest elementwise enclosure below `top`: the formula around
    it up to the nearest tensor operation (a reduction, a gather), or the loss."""
    if isinstance(e, sp.Piecewise):
        out.setdefault(e, top)
    if e.is_Atom:
        return
    opens = isinstance(e, ir.TensorOp) and not isinstance(e, ir.Size)
    for a in e.args:
        _enclosed(a, a if opens else top, out)


def _linear_symbol(lhs):
    """A symbol lhs is linear in with a number for its coefficient (x in x - y), or None."""
    for s in sorted(lhs.free_symbols, key=str):
        try:
            k = lhs.diff(s)
        except (AttributeError, TypeError, ValueError, NotImplementedError):  # a select of the IR
            return None
        if k.is_number and k != 0:
            return s
    return None


def _boundary_change(around, node, a, b, cond, budget: list[int]):
    """(does the value jump, does the slope jump) across lhs = rhs where `node` switches from
    branch a (where `cond` holds) to b, with `around` the formula holding it; None where
    undecided, also where `budget` (the work left, charged here) does not cover it."""
    lhs, rhs = cond.args
    if not (isinstance(lhs, sp.Expr) and isinstance(rhs, sp.Expr)):
        return None, None
    if _nodes(around, node) + max(_nodes(a), _nodes(b)) > _MAX_NODES:
        return None, None
    t = sp.Dummy("t", real=True)
    fa, fb = around.xreplace({node: a}), around.xreplace({node: b})
    ops = sp.count_ops(fa), sp.count_ops(fb)
    if max(ops) > _MAX_OPS or sum(ops) ** 2 > budget[0] or not all(_elementwise(x) for x in (fa, fb)):
        return None, None
    budget[0] -= sum(ops) ** 2
    if any(sum(isinstance(n, sp.Piecewise) for n in sp.preorder_traversal(x)) > _MAX_SELECTS for x in (fa, fb)):
        return None, None
    if lhs.free_symbols and (fa.xreplace({lhs: t}).has(*lhs.free_symbols)
                             or fb.xreplace({lhs: t}).has(*lhs.free_symbols)):
        s = _linear_symbol(lhs)  # the formula uses lhs's parts: move along one of them
        if s is None:
            return None, None
        at = s + (t - lhs) / lhs.diff(s)  # lhs = t there
        fa, fb = fa.xreplace({s: at}), fb.xreplace({s: at})
    else:
        fa, fb = fa.xreplace({lhs: t}), fb.xreplace({lhs: t})
    jump = _at(fa - fb, t, rhs)
    if not jump:
        return (None if jump is None else True), None
    # each branch's slope from its own side (a holds below the boundary for < and <=):
    # abs(t) has slope -1 and 1 there, not sign(0) = 0 on both
    u, s = sp.Dummy("u", positive=True), 1 if isinstance(cond, (sp.StrictLessThan, sp.LessThan)) else -1
    try:
        da, db = sp.diff(fa, t), sp.diff(fb, t)
        gap = da.xreplace({t: rhs - s * u}) - db.xreplace({t: rhs + s * u})
    except (ValueError, TypeError, AttributeError, NotImplementedError):  # undecided
        return False, None
    same = bounded.one_sided_zero(gap, u, 0) if not gap.has(sp.Derivative) else None
    return False, (None if same is None else not same)


def continuity(prog: Program) -> list[Diagnostic]:
    """W301 where the loss jumps across a branch boundary, W302 where its slope does: the
    branches are compared inside their elementwise enclosure (a factor that is 0 on the
    boundary, `u**2 * where(u < 0, a, b)`, makes no jump), else alone."""
    spec = prog.spec
    where = spec.bindings[-1].loc
    out: list[Diagnostic] = []
    around: dict = {}
    _enclosed(prog.loss, prog.loss, around)
    tensors = {i.name for i in spec.inputs} | {lr.name for lr in spec.learnable}
    budget = [_MAX_WORK]
    for node, top in around.items():
        pairs = list(node.args)
        for k in range(len(pairs) - 1):
            cond = pairs[k].cond
            if not isinstance(cond, (sp.StrictLessThan, sp.LessThan, sp.StrictGreaterThan, sp.GreaterThan)):
                continue
            if not any(str(s) in tensors for s in cond.free_symbols):
                continue  # a condition on hyperparameters alone: no gradient crosses it
            a, b = pairs[k].expr, pairs[k + 1].expr
            lhs, rhs = cond.args
            if any(_nodes(x) > _MAX_NODES or sp.count_ops(x) > _MAX_OPS for x in (a, b, lhs, rhs)):
                continue
            if not all(_elementwise(x) for x in (a, b, lhs, rhs)):
                continue
            try:  # a lint: a boundary SymPy cannot move along is not reported
                jump, kink = _boundary_change(top, node, a, b, cond, budget)
                if jump is None:
                    jump, kink = _boundary_change(node, node, a, b, cond, budget)
            except (AttributeError, TypeError, ValueError, NotImplementedError, ArithmeticError):
                continue
            boundary = f"{formula_text(lhs)} = {formula_text(rhs)}"
            if jump:
                out.append(Diagnostic(Location(spec.path, where.line, where.col), "W301",
                                      f"the loss is discontinuous at {boundary}: "
                                      f"{formula_text(a)} and {formula_text(b)} differ there", "warning"))
            elif kink:
                out.append(Diagnostic(Location(spec.path, where.line, where.col), "W302",
                                      f"the first derivative jumps at {boundary} (a kink): "
                                      f"{formula_text(a)} and {formula_text(b)}", "warning"))
    return out
