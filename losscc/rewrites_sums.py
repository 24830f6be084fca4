"""Stage 3: the stable rewrites that remove a cancellation between terms of a sum.

`one-minus-ratio` (1 - n/d with n part of d), `one-minus-clip` (c - clip(x, lo, c - eps)) and
`logsumexp-minus-member` (logsumexp(x) - x[k]); registered with the others in :data:`losscc.rewrites.STABILITY`, proved in
``tests/test_rewrites.py``.
"""

from __future__ import annotations

import sympy as sp

from . import ir


def is_one(v) -> bool:
    """v is the number 1 (an integer or a float literal)."""
    return v.is_Number and v == 1


def _bare(term):
    """A term without its numeric coefficient."""
    return term.as_coeff_Mul()[1]


def one_minus_ratio(e, ctx):
    """1 - n / d -> (d - n) / d where n's terms are terms of the sum d (up to their numbers).

    Near n = d (an IoU of identical boxes, a dice of a perfect prediction) the quotient is an
    ulp of 1 away from 1 and the difference keeps an absolute error of an ulp of 1; d - n,
    with its common terms cancelled exactly and constants (eps) added last, does not.  Taken
    where n / d > 1/2 (else the written form, as one-minus-cosine does)."""
    if not isinstance(e, sp.Add):
        return None
    ones = [a for a in e.args if is_one(a)]
    if len(ones) != 1:
        return None
    for t in e.args:
        dens = [f for f in sp.Mul.make_args(t)
                if isinstance(f, sp.Pow) and f.exp == -1 and isinstance(f.base, sp.Add)]
        if len(dens) != 1:
            continue
        d = dens[0].base
        n = -t * d  # SymPy cancels d**-1 * d: n is t's numerator, negated
        if n.has(dens[0]):
            continue
        if not {_bare(a) for a in sp.Add.make_args(n)} <= {_bare(a) for a in sp.Add.make_args(d)}:
            continue  # n is not a part of the sum d: nothing cancels exactly
        rest = [a for a in e.args if a is not t and a is not ones[0]]
        ratio = n * dens[0]
        # the written form where n / d <= 1/2: its gradient is exact where n = 0 (disjoint
        # boxes), where the quotient rule of (d - n) / d leaves eps / d
        far = sp.Mul(-1, ratio - 1, evaluate=False)  # 1 - n / d, not matched again
        near = (d - n) * dens[0]
        return sp.Add(ir.Where(sp.StrictGreaterThan(ratio, sp.Rational(1, 2)), near, far), *rest)
    return None


def _selected(sel, axis, ctx):
    """x of where(index(A) == index(axis), x, 0) (written as a Piecewise or a Where) when A is
    the axis `axis` was renamed from, or the other way round: the condition then holds at
    exactly one position along `axis`; else None."""
    if isinstance(sel, sp.Piecewise) and len(sel.args) == 2 and sel.args[1].cond == sp.true:
        x, cond, other = sel.args[0].expr, sel.args[0].cond, sel.args[1].expr
    elif isinstance(sel, ir.Where):
        cond, x, other = sel.args
    else:
        return None
    if other != 0 or not isinstance(cond, sp.Eq):
        return None
    a, b = cond.args
    if not (isinstance(a, ir.Index) and isinstance(b, ir.Index)):
        return None
    aliases = getattr(ctx.prog, "aliases", None) or {}
    pair = {a.args[0], b.args[0]}
    if axis not in pair or len(pair) != 2:
        return None
    other_axis = next(iter(pair - {axis}))
    one = aliases.get(str(axis)) == str(other_axis) or aliases.get(str(other_axis)) == str(axis)
    return x if one else None


def logsumexp_minus_member(e, ctx):
    """logsumexp(x, M) - x[k] -> -log_softmax(x, M)[k], for x[k] one entry along M (a gather,
    or sum(where(index(N) == index(M), x, 0), M) with M a renamed N).

    Where x[k] dominates, the difference is small and keeps an absolute error of an ulp of
    x[k] (InfoNCE of a near positive: 0.4% in float32); log_softmax is (x - peak) -
    log1p(rest), accurate there."""
    if not isinstance(e, sp.Add):
        return None
    for lse in e.args:
        if not isinstance(lse, ir.LogSumExp):
            continue
        x, axis = lse.args
        for t in e.args:
            coeff, inner = t.as_coeff_Mul()
            if coeff != -1:
                continue
            if isinstance(inner, ir.Gather) and inner.args[0] == x and inner.args[2] == axis:
                new = -ir.Gather(ir.LogSoftmax(x, axis), *inner.args[1:])
            elif isinstance(inner, ir.ReduceSum) and inner.args[1] == axis and _selected(inner.args[0], axis, ctx) == x:
                sel = inner.args[0]
                picked = (sp.Piecewise((ir.LogSoftmax(x, axis), sel.args[0].cond), (0, True))
                          if isinstance(sel, sp.Piecewise) else ir.Where(sel.args[0], ir.LogSoftmax(x, axis), 0))
                new = -ir.ReduceSum(picked, axis)
            else:
                continue
            rest = [a for a in e.args if a is not t and a is not lse]
            return sp.Add(new, *rest)
    return None


def _cancels(new: sp.Expr, old: sp.Expr) -> bool:
    """c - bound is smaller than the bound: 1 - (1 - eps) is eps; 1 - 0.9999999 is 1e-7, which
    a float32 constant 0.9999999 (0.99999988) would make 1.19e-7."""
    if new.is_Number and old.is_Number:
        return bool(new.is_finite and old.is_finite and 2 * abs(new) < abs(old))
    return sp.count_ops(new) < sp.count_ops(old)


def one_minus_clip(e, ctx):
    """c - clip(x, lo, hi) -> clip(c - x, c - hi, c - lo) where a bound cancels against c.

    `clip(p, eps, 1 - eps)` then `log(1 - q)`: the bound 1 - eps rounds in float32 (1 - 1e-7
    is 0.99999988), and 1 - q at the bound keeps that rounding, 1.19e-7 for 1e-7 (log off by
    0.17); clip(1 - p, eps, 1 - eps) holds eps itself.  The gradient is the same: clip passes
    it at either bound, and d(c - x)/dx = -1 on both sides."""
    if not isinstance(e, sp.Add):
        return None
    nums = [a for a in e.args if a.is_Number]
    if len(nums) != 1:
        return None
    c = nums[0]
    for t in e.args:
        coeff, clip = t.as_coeff_Mul()
        if coeff != -1 or not isinstance(clip, ir.Clip):
            continue
        u, lo, hi = clip.args
        if lo.has(sp.oo, -sp.oo, sp.zoo) or hi.has(sp.oo, -sp.oo, sp.zoo):
            continue
        new_lo, new_hi = c - hi, c - lo
        if not (_cancels(new_lo, hi) or _cancels(new_hi, lo)):
            continue
        rest = [a for a in e.args if a is not t and a is not c]
        return sp.Add(ir.Clip(c - u, new_lo, new_hi), *rest)
    return None
