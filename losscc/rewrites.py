"""Stage 3: stable rewrites on the symbolic IR, as named rules.

Each rule maps one node to an equal, numerically better node (or returns None).  The
bundle :data:`STABLE` runs them bottom-up to a fixpoint (``losscc.passes``); the bundle
:data:`RANGE_REWRITES` holds the rewrites that are exact only where the range analysis
proves something (``sqrt(a * b) = sqrt(a) * sqrt(b)`` for non-negative factors).  Every
rule has an equivalence test in ``tests/test_rewrites.py``.
"""

from __future__ import annotations

import sympy as sp

from . import bounded, ir
from .parse import type_of
from .passes import Bundle, Fired, Rule, context, run
from .rewrites_roots import power_minus_constant
from .rewrites_cosine import one_minus_cosine
from .rewrites_hyperbolic import log_cosh
from .rewrites_sums import (
    difference_of_norms,
    is_one,
    log1p_of_sum,
    logsumexp_minus_member,
    one_minus_clip,
    one_minus_ratio,
    product_of_exps,
    ratio_near_one,
    relative_difference,
    softplus_linear,
    softplus_pair,
    sum_into_select,
    sum_into_static_select,
)

__all__ = ["STABILITY", "STABLE", "RANGE_REWRITES", "RATIO_REWRITES", "Fired", "Rule", "optimize"]


def _neg_of(term, cls):
    """term == -cls(arg) -> arg"""
    if isinstance(term, sp.Mul) and len(term.args) == 2 and term.args[0] == -1 and isinstance(term.args[1], cls):
        return term.args[1].args[0]
    return None


def _softmax_as_exp(e, ctx):
    if isinstance(e, ir.Softmax):
        return sp.exp(ir.LogSoftmax(*e.args))
    return None


def _gather_exp(e, ctx):
    if isinstance(e, ir.Gather) and isinstance(e.args[0], sp.exp):
        return sp.exp(ir.Gather(e.args[0].args[0], *e.args[1:]))
    return None


def _log_exp(e, ctx):
    if isinstance(e, sp.log) and isinstance(e.args[0], sp.exp):
        return e.args[0].args[0]
    return None


def _log_sum_exp(e, ctx):
    if isinstance(e, sp.log) and isinstance(e.args[0], ir.ReduceSum) and isinstance(e.args[0].args[0], sp.exp):
        inner = e.args[0]
        return ir.LogSumExp(inner.args[0].args[0], inner.args[1])
    return None


def _log_sigmoid(e, ctx):
    if isinstance(e, sp.log) and isinstance(e.args[0], ir.sigmoid):
        return -ir.softplus(-e.args[0].args[0])
    return None


def _one_minus_sigmoid(e, ctx):
    """1 - sigmoid(x) + rest -> sigmoid(-x) + rest (BCE's log(1 - p + eps))."""
    if isinstance(e, sp.Add) and sp.S.One in e.args:
        for other in e.args:
            x = _neg_of(other, ir.sigmoid)
            if x is not None:
                rest = [a for a in e.args if a is not other and a != 1]
                return sp.Add(ir.sigmoid(-x), *rest)
    return None


def _one_minus_weighted_sigmoids(e, ctx):
    """1 - sum_i a_i * sigmoid(u_i) with sum_i a_i = 1 -> sum_i a_i * sigmoid(-u_i).

    1 = sum_i a_i, and 1 - sigmoid(u) = sigmoid(-u): focal's 1 - p_t, p_t = y p + (1 - y)(1 - p),
    which cancels to an absolute error of an ulp of 1 where p_t is near 1."""
    if not (isinstance(e, sp.Add) and sp.S.One in e.args and len(e.args) >= 3):
        return None
    weights, args = [], []
    for t in e.args:
        if t == 1:
            continue
        sig = [f for f in sp.Mul.make_args(t) if isinstance(f, ir.sigmoid)]
        if len(sig) != 1:
            return None
        weights.append(-t / sig[0])
        args.append(sig[0].args[0])
    if sp.count_ops(sp.Add(*weights)) > bounded.MAX_EXPAND_OPS:
        return None
    if bounded.is_zero(sp.Add(*weights) - 1, numeric=False) is not True:
        return None
    return sp.Add(*[a * ir.sigmoid(-u) for a, u in zip(weights, args)])


def _expm1(e, ctx):
    if not isinstance(e, sp.Add) or len(e.args) < 2:
        return None
    args = list(e.args)
    if sp.S.NegativeOne in args:
        for t in args:
            if isinstance(t, sp.exp):
                rest = [a for a in args if a is not t and a != -1]
                return sp.Add(ir.expm1(t.args[0]), *rest)
    if sp.S.One in args:
        for t in args:
            x = _neg_of(t, sp.exp)
            if x is not None:
                rest = [a for a in args if a is not t and a != 1]
                return sp.Add(-ir.expm1(x), *rest)
    return None


def _softplus(e, ctx):
    """log(1 + exp(x)), log(exp(x) + 1), log1p(exp(x)) -> softplus(x)."""
    if isinstance(e, ir.log1p) and isinstance(e.args[0], sp.exp):
        return ir.softplus(e.args[0].args[0])
    if isinstance(e, sp.log) and isinstance(e.args[0], sp.Add) and len(e.args[0].args) == 2:
        a, b = e.args[0].args
        if is_one(a) and isinstance(b, sp.exp):
            return ir.softplus(b.args[0])
        if is_one(b) and isinstance(a, sp.exp):
            return ir.softplus(a.args[0])
    return None


def _log_add_exp(e, ctx):
    """log(exp(a) + exp(b)) -> where(a >= b, a + softplus(b - a), b + softplus(a - b)).

    Each branch starts from the larger argument, so neither overflows nor cancels; the
    untaken branch is finite (softplus of a positive number is about that number) and
    at a = b both give gradient 1/2 to each side, as the smooth original does."""
    if not (isinstance(e, sp.log) and isinstance(e.args[0], sp.Add) and len(e.args[0].args) == 2):
        return None
    u, v = e.args[0].args
    if not (isinstance(u, sp.exp) and isinstance(v, sp.exp)):
        return None
    a, b = u.args[0], v.args[0]
    return ir.Where(sp.Ge(a, b, evaluate=False), a + ir.softplus(b - a), b + ir.softplus(a - b))


def _log_of_exp_product(e, ctx):
    """log(c * exp(x)) -> log(c) + x: exp(x) overflows long before the product's log does."""
    if not (isinstance(e, sp.log) and isinstance(e.args[0], sp.Mul)):
        return None
    exps = [f for f in e.args[0].args if isinstance(f, sp.exp)]
    if not exps:
        return None
    rest = sp.Mul(*[f for f in e.args[0].args if not isinstance(f, sp.exp)])
    return sp.log(rest) + sp.Add(*[f.args[0] for f in exps])


# log(cosh(x)) near 0: cosh(x) - 1 = expm1(|x|)**2 * exp(-|x|) / 2 is computed to a few ulps, so
# log1p of it is too; from |x| = 2 on, |x| + log1p(exp(-2|x|)) - log(2) is at least 1.32 and
# its terms cancel by less than a factor 2. The small form reads x clipped to the threshold,
# so its untaken side stays finite (expm1(|x|)**2 overflows float32 beyond |x| = 44).
# log cosh a = log cosh(min(a, 40)) + (a - 40 where a > 40): the dropped log1p(exp(-2a)) is
# below 1e-34 there, and expm1(40)**2 = 5.5e34 is finite in float32
def _linear_tail(e, ctx):
    """Piecewise((A(d), d < c), (B(d), True)) where A is a polynomial in d and B its tangent
    line at c (Huber's form): A(m) + B' * where(d > c, d - c, 0) with m = min(d, c).

    Equal on both sides of c, and in gradient (at c both give A'(c) = B'); the min is a
    one-sided clip, cheaper than a select and its backward. A's coefficients must not
    divide by a symbol, so A(m) is finite wherever A(d) is defined (smooth L1's 0.5*d**2/beta
    with beta = 0 stays a Piecewise, whose untaken branch is guarded).
    """
    if not isinstance(e, sp.Piecewise) or len(e.args) != 2 or e.args[1].cond is not sp.true:
        return None
    (a, cond), (b, _) = e.args
    if isinstance(cond, (sp.StrictLessThan, sp.LessThan)):
        d, c = cond.lhs, cond.rhs
    elif isinstance(cond, (sp.StrictGreaterThan, sp.GreaterThan)):
        c, d = cond.lhs, cond.rhs
    else:
        return None
    if d.is_number or not c.free_symbols.isdisjoint(d.free_symbols):
        return None
    u = sp.Dummy("u")
    A, B = a.subs(d, u), b.subs(d, u)
    if not (A.has(u) and A.is_polynomial(u) and B.is_polynomial(u)):
        return None
    # bounded: structural degrees (never expanding), small low-degree polynomials only
    if sp.count_ops(A) + sp.count_ops(B) > bounded.MAX_EXPAND_OPS:
        return None
    da, db = bounded.degree(A, u, cap=4), bounded.degree(B, u, cap=4)
    if da is None or da < 2 or db != 1 or bounded.has_symbolic_denominator(A):
        return None
    slope = sp.diff(B, u)
    if bounded.is_zero(A.subs(u, c) - B.subs(u, c), numeric=False) is not True:
        return None
    if bounded.is_zero(sp.diff(A, u).subs(u, c) - slope, numeric=False) is not True:
        return None
    m = sp.Min(d, c)
    # the tail as where(d > c, d - c, 0), not d - m: below c the gradient of d - m is slope
    # minus slope, which would add slope to A'(d) and take it away again, losing a tiny A'(d)
    # (Huber at d = 1e-20 had gradient 0); at d = c the select gives 0, so the gradient is A'(c)
    return ir.real_parts(A.subs(u, m) + slope * ir.Where(sp.StrictGreaterThan(d, c), d - c, 0))


def _sqrt_product(e, ctx):
    """sqrt(a * b) -> sqrt(a) * sqrt(b) (and 1/sqrt alike) where every factor is provably
    non-negative: the product of square roots is then exact."""
    if isinstance(e, sp.Pow) and abs(e.args[1]) == sp.Rational(1, 2) and isinstance(e.args[0], sp.Mul):
        factors = e.args[0].args
        if len(factors) > 1 and not any(f.is_Number for f in factors) and all(ctx.ranges.nonneg(f) for f in factors):
            return sp.Mul(*[sp.Pow(f, e.args[1]) for f in factors])
    return None


def _log_of_reciprocal(e, ctx):
    """log(u**-1) -> -log(u): equal wherever either side is real (u > 0), both +inf at u = 0
    and both NaN for u < 0; u**-1 overflows or rounds to 0 where log(u) does not
    (log((1 + exp(-x))**-1) becomes -softplus(-x))."""
    if isinstance(e, sp.log) and isinstance(e.args[0], sp.Pow) and e.args[0].args[1] == -1:
        return -sp.log(e.args[0].args[0])
    return None


def _log_of_power(e, ctx):
    """log(u**k) -> k * log(u) where u > 0 is proved (for u < 0 and even k the left side is
    real, the right NaN): the power overflows or underflows where the log does not."""
    if not (isinstance(e, sp.log) and isinstance(e.args[0], sp.Pow)):
        return None
    u, k = e.args[0].args
    if k == -1 or u.is_number or not ctx.ranges.positive(u):
        return None
    return k * sp.log(u)


def _confined(f) -> bool:
    """A positive number, or a value clipped to [lo, hi] with numbers 0 < lo <= hi (a power of
    one with a number exponent): it neither overflows nor underflows."""
    if isinstance(f, sp.Pow) and f.args[1].is_Number:
        f = f.args[0]
    if f.is_number:
        return bool(f.is_positive)
    return isinstance(f, ir.Clip) and all(b.is_Number for b in f.args[1:]) and bool(f.args[1].is_positive)


def _reciprocal(f) -> bool:
    return isinstance(f, sp.Pow) and f.args[1].is_Number and f.args[1].is_negative


def _positive_here(f, ctx) -> bool:
    """f > 0 by the range analysis, or by the condition of the branch the rule runs in
    (`where(p > 0, p * log(p / m), 0)` with p in [0, 1]: the Jensen-Shannon divergence that
    skips zeros; fresh-loss trial 15)."""
    return ctx.ranges.positive(f) or ctx.cond is not None and ctx.ranges.implies_positive(ctx.cond, f)


def _range_rewrites_in_branches(e, ctx):
    """The range rewrites again in each branch of a select, under its own condition, where a
    rule can use it (a log-of-quotient whose numerator the branch proves positive).  The
    branch runs RANGE_UNDER_CONDITION, which holds the rules but not this one: a select
    nested in the branch had its own turn as the walk reached it, and running this bundle
    again under each enclosing condition, conjoined, took 2^depth runs (a chain of 20
    selects ran past two minutes)."""
    if not isinstance(e, sp.Piecewise) or any(ir.on_flags(p.cond, ctx.prog) for p in e.args):
        return None
    pairs, changed = [], False
    for p in e.args:
        if p.cond is sp.true:
            pairs.append((p.expr, p.cond))
            continue
        new = ctx.under(p.cond).run(RANGE_UNDER_CONDITION, p.expr)
        changed = changed or new != p.expr
        pairs.append((new, p.cond))
    return ir.piecewise(*pairs) if changed else None


def log_of_near_one(factors, ranges):
    """log(a / (a + d)) of `log-of-quotient`, d what is left of the denominator without a:
    where |d| < a its two logs nearly cancel (theta * log(theta / (theta + mu)) of a negative
    binomial is 0 in float32 at theta = 1e6, mu = 0.5) and -log1p(d / a) does not; the logs
    elsewhere.  None unless the factors are a and 1 / b with a term of a combining with one
    of b (a term of the sum: b = a + d; a multiple of one: p / ((p + q) / 2), the
    Jensen-Shannon divergence's log(p / m), whose d is (q - p) / 2, exact where p ~ q)."""
    if len(factors) != 2 or not any(isinstance(f, sp.Pow) and f.args[1] == -1 for f in factors):
        return None
    inv = 0 if isinstance(factors[0], sp.Pow) and factors[0].args[1] == -1 else 1
    a, b = factors[1 - inv], factors[inv].args[0]
    d = sp.Add(b, -a)  # flattening cancels or combines a term a of b; nothing else is simplified
    if a.is_number or len(sp.Add.make_args(d)) >= len(sp.Add.make_args(b)) + len(sp.Add.make_args(a)) or \
            ir.tree_size(d) > ir.tree_size(b) + ir.tree_size(a):
        return None
    near = sp.StrictLessThan(d if ranges.nonneg(d) else sp.Abs(d), a, evaluate=False)
    return ir.Where(near, -ir.log1p(d / a), sp.log(a) - sp.log(b))


def _log_of_quotient(e, ctx):
    """log(a * b**-k) -> log(a) - k * log(b) where every factor a is proved positive and
    every b non-negative (at b = 0 both sides are +inf, as log(1 / u) = -log(u)): the
    quotient overflows or underflows where neither log does (a / (a + d): log_of_near_one).
    Not where every factor is confined to a range away from 0 (keras' KL divergence of
    clipped probabilities): the quotient cannot overflow there, and near a = b one log is
    more accurate than the difference of two."""
    if not (isinstance(e, sp.log) and isinstance(e.args[0], sp.Mul)):
        return None
    factors = e.args[0].args
    if not any(isinstance(f, sp.Pow) and f.args[1].is_Number and f.args[1].is_negative for f in factors):
        return None
    if all(_confined(f) for f in factors):
        return None
    if not all(f.is_number and f.is_positive or not f.is_number and (
            _positive_here(f, ctx) or _reciprocal(f) and ctx.ranges.nonneg(f.args[0])) for f in factors):
        return None
    return log_of_near_one(factors, ctx.ranges) or sp.Add(*(
        sp.log(f.args[0]) * f.args[1] if isinstance(f, sp.Pow) and f.args[1].is_Number else sp.log(f)
        for f in factors))


def _into_static_select(e, ctx):
    """f(select(flag, a, b)) -> select(flag, f(a), f(b)) for log and gathering, on a select of
    boolean hyperparameters (only the branch picked runs), where a rule then fires in a
    branch: Keras's `from_logits` is log(where(flag, softmax(x), clip(x, eps, 1))[y], whose
    logits branch becomes log_softmax(x)[y]."""
    if not isinstance(e, (sp.log, ir.Gather)) or not isinstance(e.args[0], sp.Piecewise):
        return None
    sel = e.args[0]
    conds = [p.cond for p in sel.args]
    if conds[0] is sp.true or not all(c is sp.true or ir.on_flags(c, ctx.prog) for c in conds):
        return None
    branches = [e.func(p.expr, *e.args[1:]) for p in sel.args]
    if isinstance(e, ir.Gather):  # a branch constant along the axis gathers to itself
        axis = e.args[-1].name
        branches = [b if axis in type_of(p.expr, ctx.prog).axes else p.expr for b, p in zip(branches, sel.args)]
    if any(r.apply(b, ctx) is not None for b in branches for r in STABILITY if r.apply is not _into_static_select):
        return ir.piecewise(*[(b, p.cond) for b, p in zip(branches, sel.args)])
    return None


STABILITY = (
    Rule("softmax-as-exp-log-softmax", "softmax(x) = exp(log_softmax(x)), so log and 1 - p stay accurate",
            _softmax_as_exp),
    Rule("gather-through-exp", "gathering commutes with exp: exp(y)[i] = exp(y[i])", _gather_exp),
    Rule("log-exp", "log(exp(y)) = y", _log_exp),
    Rule("logsumexp", "log(sum(exp(x))) overflows; logsumexp subtracts the maximum", _log_sum_exp),
    Rule("logsumexp-minus-member", "logsumexp(x) - x[k] loses an ulp of x[k] where x[k] dominates; "
            "-log_softmax(x)[k] does not", logsumexp_minus_member),
    Rule("one-minus-sigmoid", "1 - sigmoid(x) = sigmoid(-x) without cancellation", _one_minus_sigmoid),
    Rule("one-minus-weighted-sigmoids", "1 - sum(a_i * sigmoid(u_i)) with sum(a_i) = 1 is "
            "sum(a_i * sigmoid(-u_i)): no cancellation where the sum is near 1", _one_minus_weighted_sigmoids),
    Rule("log-sigmoid", "log(sigmoid(x)) = -softplus(-x), finite for large |x|", _log_sigmoid),
    Rule("softplus", "log(1 + exp(x)) overflows for large x; softplus(x) does not", _softplus),
    Rule("softplus-pair", "a * softplus(-u) + b * softplus(u) (cross-entropy from logits) is "
            "(a + b) * softplus(-|u|) + a * max(-u, 0) + b * max(u, 0): terms >= 0, and d/da - d/db "
            "is -u exactly where the pair cancels it near log(2)", softplus_pair),
    Rule("softplus-linear", "a * softplus(v) + c * v cancels a v against c v where v is large (the "
            "logistic loss x - x z + log(1 + exp(-x))); a * softplus(-|v|) + where(v > 0, (a + c) v, c v) "
            "does not", softplus_linear),
    Rule("log-add-exp", "log(exp(a) + exp(b)) overflows; the larger argument plus softplus of the "
            "difference does not", _log_add_exp),
    Rule("product-of-exps", "exp(a) * exp(b) overflows where exp(a + b) does not; a product with a sum "
         "holding an exp is distributed first", product_of_exps),
    Rule("log-of-exp-product", "log(c * exp(x)) = log(c) + x, no exp to overflow", _log_of_exp_product),
    Rule("log-of-reciprocal", "log(1 / u) = -log(u) on the whole real line (inf at 0, NaN below); "
            "1 / u overflows or underflows where log(u) does not", _log_of_reciprocal),
    Rule("log-cosh", "cosh overflows beyond |x| = 89 in float32; log(cosh(x)) is "
            "log1p(expm1(m)**2 exp(-m) / 2) + where(|x| > 40, |x| - 40, 0) with m = min(|x|, 40)",
            log_cosh),
    Rule("log1p", "log(1 + x) loses x when |x| is small; log1p(x) does not", log1p_of_sum),
    Rule("expm1", "exp(x) - 1 cancels near 0; expm1(x) does not", _expm1),
    Rule("power-minus-constant", "(k + U)**p - k**p loses U where |U| << k (pseudo-Huber's "
         "sqrt(1 + r**2) - 1 is 0 at r = 1e-4 in float32); U / (sqrt(k + U) + sqrt(k)) for a square root, "
         "k**p expm1(p log1p(U / k)) for other powers where |U| < k, do not", power_minus_constant),
    Rule("one-minus-clip", "c - clip(x, lo, hi) = clip(c - x, c - hi, c - lo); a bound near c (1 - eps) "
         "rounds, c - bound does not", one_minus_clip),
    Rule("one-minus-ratio", "1 - n / d cancels near n = d; (d - n) / d, its common terms cancelled "
            "exactly, does not (taken where n / d > 1/2)", one_minus_ratio),
    Rule("relative-difference", "(k T + R) / |T| (or / T, / max(|T|, c)) differentiates in T into two terms "
            "of 1 / |T| that cancel where |R| << |T|; k + R / T there does not", relative_difference),
    Rule("into-static-select", "log and gathering of select(flag, a, b) on a boolean hyperparameter go into "
            "its branches, where a rule then fires in one", _into_static_select),
    Rule("sum-into-static-select", "rest + select(flag, a, b) on a boolean hyperparameter is "
            "select(flag, rest + a, rest + b), where a pair of terms then cancels in a branch",
            sum_into_static_select),
    Rule("sum-into-select", "rest + where(cond, p, q) with a term of rest cancelling one of p or q: "
            "where(cond, p + S, q + S) + the other terms, so the pair cancels exactly in its branch "
            "(log(exp(a) + exp(b)) - a is softplus(b - a) where a >= b)", sum_into_select),
    Rule("difference-of-norms", "|u| - |v| with u, v sharing a term (a triplet's d(a, p) - d(a, n)) loses "
            "the difference next to a large shared term; sum((u - v)(u + v)) / (|u| + |v|), u - v "
            "cancelled symbolically, does not", difference_of_norms),
    Rule("one-minus-cosine", "1 - cos cancels near cos = 1; half the squared distance of the "
            "normalised vectors plus the eps terms, all >= 0, does not", one_minus_cosine),
    Rule("linear-tail", "a polynomial continued by its tangent line past c (Huber) is A(min(d, c)) "
            "+ slope * (d - min(d, c)): a clip instead of a select", _linear_tail),
)
STABLE = Bundle("stable-rewrites", STABILITY, fixpoint=True)
_RANGE_RULES = (
    Rule("sqrt-of-product", "sqrt(a * b) = sqrt(a) * sqrt(b) for a, b >= 0: the product overflows or "
         "underflows (cosine similarity's norms in float32) where each root does not", _sqrt_product),
    Rule("log-of-power", "log(u**k) = k * log(u) for u > 0: the power overflows or underflows where "
         "the log does not", _log_of_power),
    Rule("log-of-quotient", "log(a / b) = log(a) - log(b) for a > 0, b >= 0: the quotient overflows or "
         "underflows where neither log does", _log_of_quotient),
)
RANGE_UNDER_CONDITION = Bundle("range-rewrites-under-condition", _RANGE_RULES)
RANGE_REWRITES = Bundle("range-rewrites", _RANGE_RULES + (
    Rule("range-rewrites-in-branches", "runs the range rewrites in each branch of a select, under its "
         "condition", _range_rewrites_in_branches, record=False),
))

# after the stable rewrites, outside selects and relations (one-minus-ratio's output holds
# the ratio it took apart in both), so it does not undo what the parent's rule did
RATIO_REWRITES = Bundle("ratio-rewrites", (
    Rule("ratio-near-one", "A / (A + C) (A >= 0, C > 0 a constant) differentiates in A into two terms of "
         "1 / (A + C) that cancel where A >> C; 1 - C / (A + C) there does not", ratio_near_one),
), opaque=(ir.Where, sp.core.relational.Relational))


def optimize(expr: sp.Expr, rules=STABILITY, fired: list[Fired] | None = None) -> sp.Expr:
    """The stable rewrites on one expression (that reads nothing from a program), to a fixpoint."""
    ctx = context(None)
    out = run((Bundle("stable-rewrites", tuple(rules), fixpoint=True),), ctx, expr, {})
    if fired is not None:
        fired.extend(out.fired)
    return out.loss
