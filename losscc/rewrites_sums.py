"""Stage 3: the stable rewrites that remove a cancellation between terms of a sum:
`one-minus-ratio`, `ratio-near-one`, `one-minus-clip`, `logsumexp-minus-member`,
`softplus-pair`, `softplus-linear`, `relative-difference`, `difference-of-norms`,
`sum-into-static-select`, `sum-into-select`, `product-of-exps` and `log1p`; registered in :data:`losscc.rewrites.STABILITY`
(each with its one-line reason), proved in ``tests/test_rewrites.py``.
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


def ratio_near_one(e, ctx):
    """m A / (A + C) -> m where(A > C, 1 - C / (A + C), A / (A + C)) for A >= 0 reading a
    tensor and C > 0 free of tensors (Geman-McClure's d**2 / (d**2 + s**2)).

    The quotient rule differentiates A / D in A as 1 / D - A / D**2, two terms of 1 / D that
    cancel to C / D**2 where A >> C (in float32 0 or 3x off at d = 1e4); 1 - C / D has that
    derivative at once.  Where A <= C the written form (1 - C / D would cancel there).  Not
    inside a compiler-made select or a relation (RATIO_REWRITES leaves them opaque): one-minus-ratio's
    1 - A / D is already taken apart there."""
    if not isinstance(e, sp.Mul):
        return None
    factors = sp.Mul.make_args(e)
    for den in factors:
        if not (isinstance(den, sp.Pow) and den.exp == -1 and isinstance(den.base, sp.Add)):
            continue
        d = den.base
        c = sp.Add(*[a for a in d.args if not _has_tensor(a, ctx) and not a.has(ir.TensorOp)])
        a = d - c
        if c == 0 or a == 0 or a not in factors or not _has_tensor(a, ctx):
            continue
        if not (ctx.ranges.nonneg(a) and (c.is_number and c.is_positive or not c.is_number and ctx.ranges.positive(c))):
            continue
        rest = list(factors)
        rest.remove(den)
        rest.remove(a)
        near = sp.Mul(-1, c * den - 1, evaluate=False)  # 1 - C / D
        far = sp.Mul(a, den, evaluate=False)
        return sp.Mul(ir.Where(sp.StrictGreaterThan(a, c), near, far), *rest)
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
    """c * logsumexp(x, M) - c * x[k] -> -c * log_softmax(x, M)[k], c a number (CLIP's
    (row + col) / 2, whose 1/2 SymPy distributes; fresh-loss trial 15), x[k] one entry along
    M (a gather, or sum(where(index(N) == index(M), x, 0), M) with M a renamed N).  Where
    x[k] dominates, the difference keeps an absolute error of an ulp of x[k] (InfoNCE of a
    near positive: 0.4% in float32); log_softmax is (x - peak) - log1p(rest), accurate there."""
    if not isinstance(e, sp.Add):
        return None
    for term in e.args:
        c, lse = term.as_coeff_Mul()
        if not isinstance(lse, ir.LogSumExp):
            continue
        x, axis = lse.args
        for t in e.args:
            coeff, inner = t.as_coeff_Mul()
            if coeff != -c:
                continue
            if isinstance(inner, ir.Gather) and inner.args[0] == x and inner.args[2] == axis:
                new = -ir.Gather(ir.LogSoftmax(x, axis), *inner.args[1:])
            elif isinstance(inner, ir.ReduceSum) and inner.args[1] == axis and _selected(inner.args[0], axis, ctx) == x:
                sel = inner.args[0]
                picked = (ir.piecewise((ir.LogSoftmax(x, axis), sel.args[0].cond), (0, True))
                          if isinstance(sel, sp.Piecewise) else ir.Where(sel.args[0], ir.LogSoftmax(x, axis), 0))
                new = -ir.ReduceSum(picked, axis)
            else:
                continue
            rest = [a for a in e.args if a is not t and a is not term]
            return sp.Add(c * new, *rest)
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


def softplus_pair(e, ctx):
    """a * softplus(-u) + b * softplus(u) -> (a + b) * softplus(-|u|) + where(u > 0, b u, -a u).

    softplus(u) = max(u, 0) + softplus(-|u|) and softplus(-u) = max(-u, 0) + softplus(-|u|),
    so the pair is one softplus and one linear term, each >= 0 for a, b >= 0.  The written
    pair is binary cross-entropy from logits (a = y, b = 1 - y): its gradient with respect
    to y, softplus(-u) - softplus(u) = -u, cancels two terms near log(2) to an absolute error
    of an ulp of 1 (0 for u = 1e-20, 8e-5 relative at u = 1e-3 in float32); here it is the
    exact -u.  softplus(-|u|) is written softplus(where(u > 0, -u, u)), whose gradient at
    u = 0 is sigmoid(0) (|u|'s convention at 0 would drop it)."""
    if not isinstance(e, sp.Add):
        return None
    found = []
    for t in e.args:
        sps = [f for f in sp.Mul.make_args(t) if isinstance(f, ir.softplus)]
        if len(sps) == 1:
            found.append((t, sps[0]))
    for k, (t1, s1) in enumerate(found):
        for t2, s2 in found[k + 1:]:
            if s2.args[0] != -s1.args[0]:
                continue
            if s1.args[0].could_extract_minus_sign():  # u: the argument that reads positively
                (t1, s1), (t2, s2) = (t2, s2), (t1, s1)
            u = s1.args[0]
            b, a = t1 / s1, t2 / s2  # b * softplus(u) + a * softplus(-u)
            if a.has(ir.softplus) or b.has(ir.softplus):
                continue
            positive = sp.StrictGreaterThan(u, 0)
            rest = [r for r in e.args if r is not t1 and r is not t2]
            return sp.Add(sp.factor_terms(a + b) * ir.softplus(ir.Where(positive, -u, u)),
                          ir.Where(positive, b * u, -a * u), *rest)
    return None


def softplus_linear(e, ctx):
    """a softplus(v) + c v -> a softplus(-|v|) + where(v > 0, (a + c) v, c v), the terms of c v
    anywhere in the sum; a softplus(-v) + rest where c = -a.

    softplus(v) = v + softplus(-v) for v > 0: where v is large the written sum cancels a v
    against c v (the logistic loss x - x z + log(1 + exp(-x)) is 0 at x = -30 in float32
    where it is 9.4e-14; -softplus(-u) - u likewise), and the derivative a sigmoid(v) + c
    cancels to an ulp of a.  Here a + c is formed symbolically (z where the written terms
    are 1 and z - 1).  Not where v <= 0 is known (nothing cancels there) nor where a and c
    are numbers of one sign."""
    if not isinstance(e, sp.Add):
        return None
    for t in e.args:
        sps = [f for f in sp.Mul.make_args(t) if isinstance(f, ir.softplus)]
        if len(sps) != 1:
            continue
        a, v = t / sps[0], sps[0].args[0]
        rest = sp.Add(*[r for r in e.args if r is not t])
        parts = [w.as_coeff_Mul() for w in sp.Add.make_args(v) if not w.is_number]
        if a.has(ir.softplus) or not parts:
            continue
        cs = {rest.coeff(m) / k for k, m in parts}
        c = cs.pop()
        if cs or c == 0 or c.has(ir.softplus) or (c.is_number and a.is_number and a * c > 0):
            continue
        left = sp.Add(rest, *[-ci * w for ci in sp.Add.make_args(c) for w in sp.Add.make_args(v)])
        if any(left.coeff(m) != 0 for _, m in parts) or ctx.ranges.nonneg(-v):
            continue
        if (a + c) == 0:
            return sp.Add(a * ir.softplus(-v), left)
        if ctx.ranges.nonneg(v):
            return sp.Add(a * ir.softplus(-v), (a + c) * v, left)
        pos = sp.StrictGreaterThan(v, 0)
        return sp.Add(a * ir.softplus(ir.Where(pos, -v, v)), ir.Where(pos, (a + c) * v, c * v), left)
    return None

def _scale(d):
    """(T, c, signed) when d is T itself (signed), |T| or max(c, |T|) with a number c > 0."""
    if isinstance(d, sp.Abs):
        return d.args[0], None, False
    if isinstance(d, sp.Max) and len(d.args) == 2:
        nums = [a for a in d.args if a.is_Number]
        abss = [a for a in d.args if isinstance(a, sp.Abs)]
        if len(nums) == 1 and len(abss) == 1 and nums[0] > 0:
            return abss[0].args[0], nums[0], False
        return None
    return d, None, True


def _has_tensor(t, ctx) -> bool:
    """t reads a float input or a learnable of the program (anything, for a bare rule)."""
    spec = getattr(ctx.prog, "spec", None)
    if spec is None:
        return True
    names = {i.name for i in spec.inputs if i.dtype == "float"} | {lr.name for lr in spec.learnable}
    return any(str(s) in names for s in t.free_symbols)


def relative_difference(e, ctx):
    """(k T + R) / D -> where(|T| > max(2 |R / k|, c), k + R / T (times sign(T)), written form)
    for D = T, |T| or max(c, |T|) (k a number, c > 0); |k T + R| / D -> |k| + sign(k) R / T.

    A relative error (mape's |x - t| / max(|t|, eps)) at |x| << |t|: the quotient rule
    differentiates it in t as 1 / |t| - (t - x) / t**2, two terms of 1 / |t| that cancel to
    x / t**2 (in float32 1e-3 relative at t = 1e4, 0 at t = 1e18); d/dt of 1 - x / t is
    x / t**2 at once.  Where |R / k| >= |T| / 2 (x near t, whose difference t - x is exact)
    or |T| <= c the written form is kept."""
    if not isinstance(e, sp.Mul):
        return None
    factors = sp.Mul.make_args(e)
    for den in factors:
        if not (isinstance(den, sp.Pow) and den.exp.is_Integer and den.exp < 0):
            continue
        scale = _scale(den.base ** -den.exp)  # t**-2 divides by T = t**2
        if scale is None or scale[0].is_Number or isinstance(scale[0], sp.Add):
            continue
        t, c, signed = scale
        if not _has_tensor(t, ctx):
            continue  # a hyperparameter's scale: nothing to differentiate, no select to pay for
        for num in factors:
            inner = num.args[0] if isinstance(num, sp.Abs) else num
            if num is den or not isinstance(inner, sp.Add):
                continue
            coeffs = [a.as_coeff_Mul()[0] for a in sp.Add.make_args(inner) if a.as_coeff_Mul()[1] == t]
            if len(coeffs) != 1 or not coeffs[0]:
                continue
            k = coeffs[0]  # inner = k T + r
            r = inner - k * t
            if r == 0 or r.has(t):
                continue
            bound = 2 * sp.Abs(r) / abs(k) if c is None else sp.Max(2 * sp.Abs(r) / abs(k), c)
            near_t = sp.StrictGreaterThan(sp.Abs(t), bound)
            q = r / ir.Where(near_t, t, 1)  # 1 where not taken: its gradient there is 0, not 0 * inf
            if isinstance(num, sp.Abs):  # |k + q| = |k| + sign(k) q for |q| < |k| / 2
                near = abs(k) + sp.sign(k) * q if not signed else ir.Sign(t) * (abs(k) + sp.sign(k) * q)
            else:
                near = k + q if signed else ir.Sign(t) * (k + q)
            far = ctx.keep(num * den)
            rest = [f for f in factors if f is not num and f is not den]
            return sp.Mul(ir.Where(near_t, near, far), *rest)
    return None


def _sum_of_squares(s):
    """(u, axis, k) when s is sum(u**2, axis) + k, k free of tensor operations."""
    parts = [a for a in sp.Add.make_args(s) if isinstance(a, ir.ReduceSum)]
    if len(parts) != 1:
        return None
    k = s - parts[0]
    if k.has(ir.TensorOp):
        return None
    body, axis = parts[0].args
    if not (isinstance(body, sp.Pow) and body.exp == 2):
        return None
    return body.base, axis, k


def difference_of_norms(e, ctx):
    """sqrt(sum(u**2) + k1) - sqrt(sum(v**2) + k2) -> sum((u - v) (u + v)) + k1 - k2 over the
    sum of the two roots (0 where both are 0), when u and v share a term.

    A triplet margin's d(a, p) - d(a, n): at an anchor of 1e18 both distances are 1e18 and
    their difference, of size |p - n|, is lost in float32 (0 where it is 0.5); u - v = n - p
    cancels the shared anchor symbolically, before anything is rounded."""
    if not isinstance(e, sp.Add):
        return None
    roots = []
    for t in e.args:
        c, r = t.as_coeff_Mul()
        if isinstance(r, sp.Pow) and r.exp == sp.Rational(1, 2):
            sq = _sum_of_squares(r.base)
            if sq is not None and (sq[2] == 0 or ctx.ranges.nonneg(sq[2])):  # a root of a sum >= 0
                roots.append((t, c, r, sq))
    for i, (t1, c1, r1, (u, ax, k1)) in enumerate(roots):
        for t2, c2, r2, (v, ax2, k2) in roots[i + 1:]:
            shared = [a for a in set(sp.Add.make_args(u)) & set(sp.Add.make_args(v)) if _has_tensor(a, ctx)]
            if c1 != -c2 or ax != ax2 or not shared:
                continue
            num = ir.ReduceSum((u - v) * (u + v), ax) + (k1 - k2)
            den = r1 + r2
            pos = sp.StrictGreaterThan(den, 0)
            diff = ir.Where(pos, num / ir.Where(pos, den, 1), 0)
            rest = [a for a in e.args if a is not t1 and a is not t2]
            return sp.Add(c1 * diff, *rest)
    return None


def sum_into_static_select(e, ctx):
    """rest + c * select(flag, a, b) -> select(flag, rest + c a, rest + c b) for a select on
    boolean hyperparameters, where a pair of terms then cancels symbolically in a branch
    (difference-of-norms, softplus-pair): a triplet margin with `swap` is
    d(a, p) - where(swap, min(d(a, n), d(p, n)), d(a, n)), whose default branch is the
    difference of two norms sharing the anchor."""
    if not isinstance(e, sp.Add):
        return None
    for t in e.args:
        c, sel = t.as_coeff_Mul()
        conds = [p.cond for p in sel.args] if isinstance(sel, sp.Piecewise) else []
        if not conds or not all(c is sp.true or ir.on_flags(c, ctx.prog) for c in conds) or conds[0] is sp.true:
            continue
        rest = sp.Add(*[a for a in e.args if a is not t])
        branches = [rest + c * p.expr for p in sel.args]
        if any(rule(b, ctx) is not None for b in branches for rule in (difference_of_norms, softplus_pair)):
            return ir.piecewise(*[(b, p.cond) for b, p in zip(branches, sel.args)])
    return None


def sum_into_select(e, ctx):
    """rest + c * where(cond, p, q) -> where(cond, c p + S, c q + S) + (rest - S), S the terms
    of rest that cancel a term of c p or of c q exactly, for a condition on tensors.

    log(exp(a) + exp(b)) - a (NT-Xent) is where(a >= b, a + softplus(b - a), ...) - a: the a
    outside cancels only inside the branch (float32 was 3.3e-2 off, fresh-loss trial 13)."""
    if not isinstance(e, sp.Add):
        return None
    for t in e.args:
        c, sel = t.as_coeff_Mul()
        if not isinstance(sel, ir.Where) or (ctx.prog is not None and ir.on_flags(sel.args[0], ctx.prog)):
            continue
        p, q = (sp.Add.make_args(c * b) for b in sel.args[1:])
        rest = [a for a in e.args if a is not t]
        moved = [r for r in rest if -r in p or -r in q]
        if moved:
            keep = [r for r in rest if not any(r is m for m in moved)]
            return sp.Add(ir.Where(sel.args[0], sp.Add(*p, *moved), sp.Add(*q, *moved)), *keep)
    return None

def product_of_exps(e, ctx):
    """exp(a) * exp(b) -> exp(a + b), and exp(b) * (u + exp(a)) -> u exp(b) + exp(a + b): the
    product overflows (or is 0 * inf) where the sum of the arguments does not (a KL between
    Gaussians, exp(logvar1) / exp(logvar2)).  Only where an argument is not bounded (|x| <=
    50): exp of a sum rounds its argument, which costs more there than the product's ulps."""
    if not isinstance(e, sp.Mul):
        return None
    exps = [f for f in e.args if isinstance(f, sp.exp)]
    if not exps or all(ctx.ranges.bounded(f.args[0]) for f in exps):
        return None
    rest = [f for f in e.args if not isinstance(f, sp.exp)]
    if len(exps) > 1:
        return sp.Mul(*rest, sp.exp(sp.Add(*[f.args[0] for f in exps])))
    sums = [f for f in rest if isinstance(f, sp.Add)
            and any(isinstance(g, sp.exp) for t in f.args for g in sp.Mul.make_args(t))]
    if not sums:
        return None
    return sp.Mul(*[f for f in rest if f is not sums[0]], sp.Add(*[t * exps[0] for t in sums[0].args]))


def log1p_of_sum(e, ctx):
    """log(1 + u) -> log1p(u); where u adds a constant to a tensor part (log(1 - p + eps)),
    only where u > -1/2: log1p(eps - p) loses eps where p is near 1 (-1 in float32, and the
    log is inf), where the written (1 - p) + eps is exact."""
    if isinstance(e, sp.log) and isinstance(e.args[0], sp.Add) and sp.S.One in e.args[0].args:
        terms = [t for t in e.args[0].args if t != 1]
        rest = sp.Add(*terms)
        if rest == 0:
            return None
        if any(t.is_number or not _has_tensor(t, ctx) for t in terms) and any(_has_tensor(t, ctx) for t in terms):
            return ir.Where(sp.StrictGreaterThan(rest, sp.Rational(-1, 2)), ir.log1p(rest), ctx.keep(e))
        return ir.log1p(rest)
    return None
