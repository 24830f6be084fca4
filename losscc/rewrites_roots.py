"""Stage 3: the stable rewrite of a power of a sum minus the power of its constant part.

`power-minus-constant`: ``c (k + U)**p - c k**p`` (pseudo-Huber's ``sqrt(1 + (r/d)**2) - 1``,
Charbonnier's ``sqrt(r**2 + e**2) - e``, a generalised Charbonnier's ``(1 + u)**a - 1``, Tukey's
biweight ``1 - (1 - u)**3``) loses
U entirely once ``|U| < k * eps``: ``1 + U`` rounds to 1 and the difference to 0, value and
gradient (pseudo-Huber at r = 1e-4 is 0 in float32, the truth 5e-9).  Registered in
:data:`losscc.rewrites.STABILITY`, proved in ``tests/test_rewrites.py``.
"""

from __future__ import annotations

import sympy as sp

from . import ir
from .rewrites_sums import _has_tensor


_POLY_MAX = 8  # positive integer exponents up to which the difference is factored


def _power_term(t):
    """(c, base, p) for a term c * base**p with an exponent other than 0 and 1 and a sum as base."""
    coeff, rest = t.as_coeff_mul()
    pows = [f for f in rest if isinstance(f, sp.Pow) and isinstance(f.base, sp.Add)]
    if len(pows) != 1:
        return None
    pw = pows[0]
    if pw.exp in (0, 1):
        return None
    others = sp.Mul(coeff, *[f for f in rest if f is not pw])
    return others, pw.base, pw.exp


def _root(k, p, ctx):
    """k**p, with (q**n)**p taken as q**(n p) where q >= 0 is proved (sqrt(eps**2) is eps)."""
    if isinstance(k, sp.Pow) and k.exp.is_number and (k.base.is_number and k.base >= 0 or ctx.ranges.nonneg(k.base)):
        return k.base ** (k.exp * p)
    return k ** p


def power_minus_constant(e, ctx):
    """c (k + U)**p - c k**p -> c U / (sqrt(k + U) + sqrt(k)) for p = 1/2,
    c U sum_j (k + U)**j k**(n-1-j) for an integer p = n from 2 to _POLY_MAX where |U| < k / 2,
    and c k**p expm1(p log1p(U / k)) for any other p where |U| < k / 2 or |p log1p(U / k)|
    < 1/2 (the written form elsewhere); k > 0 proved, made of numbers and hyperparameters, U
    reading a tensor.

    Both are identities for k > 0 and k + U >= 0; neither subtracts two numbers near k**p.
    The conjugate form is exact everywhere; the expm1 form is accurate for |U| < k / 2, beyond
    which (1 + x)**p - 1 (|x| >= 1/2) cancels by a few bits at most, and exp of a large
    log would cost p log(x) ulps."""
    if not isinstance(e, sp.Add) or len(e.args) < 2:
        return None
    for t in e.args:
        got = _power_term(t)
        if got is None:
            continue
        c, base, p = got
        if not p.is_number and _has_tensor(p, ctx):
            continue
        reads = [not a.is_number and _has_tensor(a, ctx) for a in base.args]
        if all(reads) or not any(reads):
            continue
        k = sp.Add(*[a for a, r in zip(base.args, reads) if not r])
        u = sp.Add(*[a for a, r in zip(base.args, reads) if r])
        if not (k.is_number and k.is_positive or not k.is_number and ctx.ranges.positive(k)):
            continue
        kp = _root(k, p, ctx)
        rest = [a for a in e.args if a is not t]
        left = sp.Add(*rest) + c * kp
        if len(sp.Add.make_args(left)) >= len(rest) and left != 0:
            continue  # no term -c k**p to cancel against
        left = [] if left == 0 else [left]
        if p == sp.Rational(1, 2):
            return sp.Add(c * u / (sp.sqrt(k + u) + kp), *left)
        if p.is_Integer and 2 <= p <= _POLY_MAX:
            # (k + U)**n - k**n = U * sum_j (k + U)**j k**(n-1-j): exact algebra, every term
            # positive where k + U > 0 (Tukey's biweight 1 - (1 - u)**3). Taken where |U| < k / 2:
            # near k + U = 0 its derivative is a sum of O(1) terms cancelling to n (k + U)**(n-1)
            # (Tukey's gradient at r = 0.9999 c was 83% low in float32), which the written
            # form computes directly, and there k**n - (k + U)**n cancels by a bit at most
            terms = [(k + u) ** j * _root(k, p - 1 - j, ctx) for j in range(int(p))]
            written = ctx.keep(sp.Add(base ** p, -kp, evaluate=False))
            near = u * sp.Add(*terms)
            return sp.Add(c * ir.Where(sp.StrictLessThan(ir.real_abs(u), k / 2), near, written), *left)
        # taken where |U| < k / 2, and also beyond while y = p log1p(U / k) is small (a small
        # symbolic p: Barron's loss at alpha = 1e-6 was 17% off in float32 at large U, where
        # (k + U)**p - k**p cancels); U / k is read above -1/2 and y below a bound it keeps
        # where taken, so the untaken side stays finite (log1p(-1) is -inf, and 0 * inf in
        # the backward of the select is NaN)
        half = sp.Rational(1, 2)
        y = p * ir.log1p(sp.Max(u / k, -half, evaluate=False))
        cap = sp.Max(half, ir.real_abs(p) * sp.log(2), evaluate=False)
        near = kp * ir.expm1(sp.Min(y, cap, evaluate=False))
        written = ctx.keep(sp.Add(base ** p, -kp, evaluate=False))
        taken = sp.And(sp.StrictGreaterThan(u / k, -half),
                       sp.Or(sp.StrictLessThan(u / k, half), sp.StrictLessThan(ir.real_abs(y), half)))
        return sp.Add(c * ir.Where(taken, near, written), *left)
    return None
