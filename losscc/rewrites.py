"""Stage 3: stable rewrites on the symbolic IR, as named, pure rules.

Each :class:`Rewrite` maps one node to an equal, numerically better node (or
returns None).  :func:`optimize` applies a bundle bottom-up to a fixpoint and
records which rule fired where, for ``losscc explain``.  Every rule has an
equivalence test in ``tests/test_rewrites.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sympy as sp

from . import bounded, functions, ir


@dataclass(frozen=True)
class Rewrite:
    name: str
    reason: str
    apply: Callable[[sp.Expr], sp.Expr | None]


@dataclass(frozen=True)
class Fired:
    rule: str
    before: sp.Expr
    after: sp.Expr


def _split_add(expr: sp.Add, pred) -> tuple[sp.Expr | None, sp.Expr]:
    """Find a term satisfying pred; return (match-info, rest-of-sum)."""
    for term in expr.args:
        m = pred(term)
        if m is not None:
            rest = sp.Add(*[t for t in expr.args if t is not term])
            return m, rest
    return None, expr


def _neg_of(term, cls):
    """term == -cls(arg) -> arg"""
    if isinstance(term, sp.Mul) and len(term.args) == 2 and term.args[0] == -1 and isinstance(term.args[1], cls):
        return term.args[1].args[0]
    return None


def _softmax_as_exp(e):
    if isinstance(e, ir.Softmax):
        return sp.exp(ir.LogSoftmax(*e.args))
    return None


def _gather_exp(e):
    if isinstance(e, ir.Gather) and isinstance(e.args[0], sp.exp):
        return sp.exp(ir.Gather(e.args[0].args[0], *e.args[1:]))
    return None


def _log_exp(e):
    if isinstance(e, sp.log) and isinstance(e.args[0], sp.exp):
        return e.args[0].args[0]
    return None


def _log_sum_exp(e):
    if isinstance(e, sp.log) and isinstance(e.args[0], ir.ReduceSum) and isinstance(e.args[0].args[0], sp.exp):
        inner = e.args[0]
        return ir.LogSumExp(inner.args[0].args[0], inner.args[1])
    return None


def _log_sigmoid(e):
    if isinstance(e, sp.log) and isinstance(e.args[0], ir.sigmoid):
        return -ir.softplus(-e.args[0].args[0])
    return None


def _one_minus_sigmoid(e):
    if isinstance(e, sp.Add) and sp.S.One in e.args and len(e.args) == 2:
        other = e.args[0] if e.args[1] == 1 else e.args[1]
        x = _neg_of(other, ir.sigmoid)
        if x is not None:
            return ir.sigmoid(-x)
    return None


def _log1p(e):
    if isinstance(e, sp.log) and isinstance(e.args[0], sp.Add) and sp.S.One in e.args[0].args:
        rest = sp.Add(*[t for t in e.args[0].args if t != 1])
        if rest != 0:
            return ir.log1p(rest)
    return None


def _expm1(e):
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


def _is_one(v) -> bool:
    return v.is_Number and v == 1


def _softplus(e):
    """log(1 + exp(x)), log(exp(x) + 1), log1p(exp(x)) -> softplus(x)."""
    if isinstance(e, ir.log1p) and isinstance(e.args[0], sp.exp):
        return ir.softplus(e.args[0].args[0])
    if isinstance(e, sp.log) and isinstance(e.args[0], sp.Add) and len(e.args[0].args) == 2:
        a, b = e.args[0].args
        if _is_one(a) and isinstance(b, sp.exp):
            return ir.softplus(b.args[0])
        if _is_one(b) and isinstance(a, sp.exp):
            return ir.softplus(a.args[0])
    return None


def _log_add_exp(e):
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


def _log_of_exp_product(e):
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
LOG_COSH_SWITCH = 2


def _log_cosh(e):
    if isinstance(e, sp.log) and isinstance(e.args[0], sp.cosh):
        x = e.args[0].args[0]
        a = ir.real_abs(x)
        small = ir.real_abs(ir.Clip(x, -LOG_COSH_SWITCH, LOG_COSH_SWITCH))
        near = ir.log1p(ir.expm1(small) ** 2 * sp.exp(-small) / 2)
        far = a + ir.softplus(-2 * a) - sp.log(2)
        return sp.Piecewise((near, sp.StrictLessThan(a, LOG_COSH_SWITCH)), (far, True), evaluate=False)
    return None


def _linear_tail(e):
    """Piecewise((A(d), d < c), (B(d), True)) where A is a polynomial in d and B its tangent
    line at c (Huber's form): A(m) + B' * (d - m) with m = min(d, c).

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
    return ir.real_parts(A.subs(u, m) + slope * (d - m))


def _sqrt_product(e):
    if isinstance(e, sp.Pow) and abs(e.args[1]) == sp.Rational(1, 2) and isinstance(e.args[0], sp.Mul):
        factors = e.args[0].args
        if len(factors) > 1 and not any(f.is_Number for f in factors):
            return sp.Mul(*[sp.Pow(f, e.args[1]) for f in factors])
    return None


STABILITY = (
    Rewrite("softmax-as-exp-log-softmax", "softmax(x) = exp(log_softmax(x)), so log and 1 - p stay accurate",
            _softmax_as_exp),
    Rewrite("gather-through-exp", "gathering commutes with exp: exp(y)[i] = exp(y[i])", _gather_exp),
    Rewrite("log-exp", "log(exp(y)) = y", _log_exp),
    Rewrite("logsumexp", "log(sum(exp(x))) overflows; logsumexp subtracts the maximum", _log_sum_exp),
    Rewrite("one-minus-sigmoid", "1 - sigmoid(x) = sigmoid(-x) without cancellation", _one_minus_sigmoid),
    Rewrite("log-sigmoid", "log(sigmoid(x)) = -softplus(-x), finite for large |x|", _log_sigmoid),
    Rewrite("softplus", "log(1 + exp(x)) overflows for large x; softplus(x) does not", _softplus),
    Rewrite("log-add-exp", "log(exp(a) + exp(b)) overflows; the larger argument plus softplus of the "
            "difference does not", _log_add_exp),
    Rewrite("log-of-exp-product", "log(c * exp(x)) = log(c) + x, no exp to overflow", _log_of_exp_product),
    Rewrite("log-cosh", "cosh overflows beyond |x| = 89 in float32; log(cosh(x)) is "
            "log1p(expm1(|x|)**2 * exp(-|x|) / 2) below |x| = 2 and |x| + softplus(-2|x|) - log(2) above",
            _log_cosh),
    Rewrite("log1p", "log(1 + x) loses x when |x| is small; log1p(x) does not", _log1p),
    Rewrite("expm1", "exp(x) - 1 cancels near 0; expm1(x) does not", _expm1),
    Rewrite("linear-tail", "a polynomial continued by its tangent line past c (Huber) is A(min(d, c)) "
            "+ slope * (d - min(d, c)): a clip instead of a select", _linear_tail),
)
# Rules that need the program (range analysis) run as their own passes below:
# sqrt-of-product (split_sqrt_products), guard-untaken-branch, gradient-guard-pow.


def rebuild(e, args):
    """e with new arguments; Piecewise is not re-simplified (SymPy would fold nested ones and
    rewrite conditions, sometimes into forms that are not expressions)."""
    if isinstance(e, sp.Piecewise):
        return sp.Piecewise(*args, evaluate=False)
    if isinstance(e, sp.functions.elementary.piecewise.ExprCondPair):
        return sp.functions.elementary.piecewise.ExprCondPair(*args)
    if isinstance(e, (sp.Max, sp.Min, sp.Abs)) and ir.tree_size(*args) > ir.EVALUATE_NODES:
        return e.func(*args, evaluate=False)  # bounded work (ir.EVALUATE_NODES)
    if isinstance(e, (sp.Max, sp.Min)):
        try:
            return e.func(*args)
        except ValueError:  # SymPy cannot tell an argument is real (a guarded branch): keep them all
            return e.func(*args, evaluate=False)
    out = e.func(*args)
    return ir.real_parts(out) if isinstance(e, sp.Abs) else out


def optimize(expr: sp.Expr, rules=STABILITY, memo: dict | None = None,
             fired: list[Fired] | None = None) -> sp.Expr:
    """Apply `rules` bottom-up until none fires; memoised, so shared subtrees are visited once."""
    memo = {} if memo is None else memo
    fired = [] if fired is None else fired

    def visit(e, budget=64):
        got = memo.get(e)
        if got is not None:
            return got
        if e.args and not isinstance(e, (sp.Symbol, sp.Number)):
            new_args = tuple(visit(a) for a in e.args)
            cur = rebuild(e, new_args) if new_args != e.args else e
        else:
            cur = e
        for _ in range(budget):
            for rule in rules:
                out = rule.apply(cur)
                if out is not None and out != cur:
                    fired.append(Fired(rule.name, cur, out))
                    cur = visit(out, budget - 1) if budget > 1 else out
                    break
            else:
                break
        memo[e] = cur
        return cur

    return visit(expr)


# --------------------------------------------------------------------------- guards
#
# where(c, f(x), g(x)) evaluates both branches; the gradient of the branch not taken
# is multiplied by zero, and 0 * inf = NaN.  So inside each branch the arguments of
# operations that are singular somewhere (log, division, sqrt, fractional powers)
# are replaced by where(c, arg, 1): the same value where the branch is taken, a
# harmless 1 where it is not.  Operations that overflow (exp, expm1, cosh, sinh and
# integer powers x**k, k >= 3) get where(c, arg, 0) (where(c, base, 1) for powers) the
# same way.  Arguments that a small range analysis proves positive (for the singular
# operations) or bounded or non-positive (for exp) are left alone, so exact formulas
# stay exact and fast.


def is_positive(e, prog) -> bool:
    """True when e > 0 for every input allowed by the declared domains (and finite)."""
    if e.is_Number:
        return bool(e.is_positive)
    if e in (sp.pi, sp.E) or isinstance(e, ir.Size):
        return True
    if isinstance(e, sp.Symbol):
        spec = prog.spec
        for p in spec.params:
            if p.name == e.name:
                return p.kind != "bool" and p.min is not None and p.min > 0
        for i in spec.inputs:
            if i.name == e.name:
                d = i.domain
                if d.is_set:
                    return all(v > 0 for v in d.values)
                return isinstance(d.lo, float) and (d.lo > 0 or (d.lo == 0 and not d.lo_closed))
        return False
    if isinstance(e, sp.Add):
        return all(is_nonneg(a, prog) for a in e.args) and any(is_positive(a, prog) for a in e.args)
    if isinstance(e, sp.Mul):
        return all(is_positive(a, prog) for a in e.args)
    if isinstance(e, sp.Pow):
        return is_positive(e.args[0], prog)
    if isinstance(e, ir.Gather):
        return is_positive(e.args[0], prog)
    fact = functions.range_fact(e, "positive")  # a function's node: its registry record
    if fact is not None:
        return functions.holds(fact, e, lambda a: is_positive(a, prog))
    if isinstance(e, ir.Where):
        c, a, b = e.args
        return (is_positive(a, prog) or _implies_positive(c, a, prog)) and is_positive(b, prog)
    return False


def _implies_positive(c, a, prog) -> bool:
    """Whether condition c (a branch guard's) makes a > 0: a > x or x < a with x >= 0,
    a >= x with x > 0, or a conjunction with such a term."""
    if isinstance(c, sp.And):
        return any(_implies_positive(t, a, prog) for t in c.args)
    if isinstance(c, (sp.StrictGreaterThan, sp.GreaterThan)):
        big, small = c.args
    elif isinstance(c, (sp.StrictLessThan, sp.LessThan)):
        small, big = c.args
    else:
        return False
    factors = a.args if isinstance(a, sp.Mul) else (a,)
    if big not in factors or not all(is_positive(f, prog) for f in factors if f != big):
        return False
    strict = isinstance(c, (sp.StrictGreaterThan, sp.StrictLessThan))
    return is_nonneg(small, prog) if strict else is_positive(small, prog)


def is_nonneg(e, prog) -> bool:
    if is_positive(e, prog):
        return True
    if e.is_Number:
        return bool(e.is_nonnegative)
    if isinstance(e, sp.Symbol):
        for p in prog.spec.params:
            if p.name == e.name:
                return p.kind != "bool" and p.min is not None and p.min >= 0
        for i in prog.spec.inputs:
            if i.name == e.name:
                d = i.domain
                if d.is_set:
                    return all(v >= 0 for v in d.values)
                return isinstance(d.lo, float) and d.lo >= 0
        return False
    if isinstance(e, sp.Pow):
        ex = e.args[1]
        return (ex.is_Integer and ex.is_even) or is_nonneg(e.args[0], prog)
    if isinstance(e, (sp.Add, sp.Mul)):
        return all(is_nonneg(a, prog) for a in e.args)
    if isinstance(e, ir.Gather):
        return is_nonneg(e.args[0], prog)
    if isinstance(e, ir.Where):
        return is_nonneg(e.args[1], prog) and is_nonneg(e.args[2], prog)
    fact = functions.range_fact(e, "nonneg")  # a function's node: its registry record
    return fact is not None and functions.holds(fact, e, lambda a: is_nonneg(a, prog))


def _static_cond(c, prog) -> bool:
    """A condition on a boolean hyperparameter: lowered to Python `if`, nothing to guard."""
    return isinstance(c, sp.Symbol) and any(p.name == c.name and p.kind == "bool" for p in prog.spec.params)


def _guard_under(e, cond, prog, memo, fired):
    key = (e, cond)
    if key in memo:
        return memo[key]
    if e.is_Atom or isinstance(e, ir.TensorOp):
        memo[key] = e
        return e

    def safe(arg):
        if is_positive(arg, prog):
            return arg
        return ir.Where(cond, arg, 1)

    args = [_guard_under(a, cond, prog, memo, fired) for a in e.args]
    out = rebuild(e, tuple(args)) if tuple(args) != e.args else e
    new = out
    if isinstance(out, sp.log) or isinstance(out, sp.Pow) and out.args[1].is_Number and (
            out.args[1].is_negative or not out.args[1].is_Integer):
        new = out.func(safe(out.args[0]), *out.args[1:])
    elif isinstance(out, ir.log1p) and not is_nonneg(out.args[0], prog):
        new = ir.log1p(ir.Where(cond, out.args[0], 0))  # log1p is singular at -1
    elif _overflows(out, prog):
        new = out.func(ir.Where(cond, out.args[0], 0 if not isinstance(out, sp.Pow) else 1), *out.args[1:])
    if new is not out:
        if new != out:
            fired.append(Fired("guard-untaken-branch", out, new))
            out = new
    memo[key] = out
    return out


def _overflows(e, prog) -> bool:
    """exp, expm1, cosh, sinh of an argument that may be large, or x**k (k >= 3) of a base
    that may be: inf in the untaken branch, and 0 * inf = NaN in its gradient.  Squares are
    left alone: their derivative 2x is finite at every finite input, and the value
    overflows only beyond |x| = 1.8e19 (float32)."""
    if isinstance(e, (sp.exp, ir.expm1)):
        x = e.args[0]
        return not (is_nonneg(-x, prog) or is_bounded(x, prog))
    if isinstance(e, (sp.cosh, sp.sinh)):
        return not is_bounded(e.args[0], prog)
    if isinstance(e, sp.Pow) and e.args[1].is_Integer and e.args[1] >= 3:
        return not is_bounded(e.args[0], prog)
    return False


def is_bounded(e, prog) -> bool:
    """True when |e| is at most a modest constant (no overflow in exp(e) or e**k, k small)
    for every input the declared domains allow: numbers, inputs with a finite domain,
    sigmoid, tanh, softmax, one-hot, a clip to numeric bounds, and sums and products of these."""
    if e.is_Number:
        return bool(e.is_finite) and abs(float(e)) <= 50
    if isinstance(e, sp.Symbol):
        for i in prog.spec.inputs:
            if i.name == e.name:
                d = i.domain
                if d.is_set:
                    return all(abs(v) <= 50 for v in d.values)
                return all(isinstance(v, float) and abs(v) <= 50 for v in (d.lo, d.hi))
        return False
    if isinstance(e, ir.Gather):
        return is_bounded(e.args[0], prog)
    if isinstance(e, (sp.Add, sp.Mul)):
        return all(is_bounded(a, prog) for a in e.args)
    if isinstance(e, sp.Pow):
        return e.args[1].is_Integer and 0 <= e.args[1] <= 4 and is_bounded(e.args[0], prog)
    if isinstance(e, ir.Where):
        return is_bounded(e.args[1], prog) and is_bounded(e.args[2], prog)
    fact = functions.range_fact(e, "bounded")  # a function's node: its registry record
    return fact is not None and functions.holds(fact, e, lambda a: is_bounded(a, prog))


def guard_branches(expr, prog, fired: list | None = None, memo: dict | None = None):
    """Guard singular operations inside where/Piecewise branches (see above)."""
    fired = [] if fired is None else fired
    memo = {} if memo is None else memo
    inner: dict = {}

    def visit(e):
        if e in memo:
            return memo[e]
        if e.is_Atom:
            return e
        args = tuple(visit(a) for a in e.args)
        cur = rebuild(e, args) if args != e.args else e
        if isinstance(cur, sp.Piecewise) and not any(_static_cond(p.cond, prog) for p in cur.args):
            pairs, previous = [], []
            for p in cur.args:
                cond = p.cond if p.cond is not sp.true else sp.And(*[sp.Not(c) for c in previous])
                if cond is sp.true:
                    pairs.append((p.expr, p.cond))
                else:
                    pairs.append((_guard_under(p.expr, cond, prog, inner, fired), p.cond))
                previous.append(p.cond)
            cur = sp.Piecewise(*pairs, evaluate=False)
        memo[e] = cur
        return cur

    return visit(expr)


# Gradient guards for values that are finite where their derivative is not:
# sqrt(x) and x**g (g not an integer) at x = 0.  The value is kept exactly; the
# derivative at 0 becomes 0 instead of inf (or 0 * inf = NaN downstream).


def _pow_guard(e, prog):
    if not isinstance(e, sp.Pow):
        return None
    base, ex = e.args
    if ex.is_Integer or (ex.is_Number and ex.is_negative) or is_positive(base, prog):
        return None
    if not ex.is_Number and _integer_valued(ex, prog):
        return None  # x ** C with C an axis size or an int parameter: a polynomial
    if isinstance(base, (sp.Piecewise, ir.Where, ir.StopGradient)):
        return None
    pos = sp.Gt(base, 0, evaluate=False)
    return ir.Where(pos, sp.Pow(ir.Where(pos, base, 1), ex), sp.Pow(ir.StopGradient(base), ex))


def _integer_valued(e, prog) -> bool:
    if isinstance(e, ir.Size):
        return True
    try:
        t = prog.typeof(e)
    except Exception:  # noqa: BLE001 - an untyped compiler-made node: not known to be an integer
        return False
    return t.dtype == "int" and not t.axes


def split_sqrt_products(expr, prog, fired: list | None = None, memo: dict | None = None):
    """sqrt(a * b) -> sqrt(a) * sqrt(b) where every factor is provably non-negative."""
    fired = [] if fired is None else fired
    memo = {} if memo is None else memo

    def visit(e):
        if e in memo:
            return memo[e]
        if e.is_Atom:
            return e
        args = tuple(visit(a) for a in e.args)
        cur = rebuild(e, args) if args != e.args else e
        new = _sqrt_product(cur)
        if new is not None and all(is_nonneg(f, prog) for f in cur.args[0].args):
            fired.append(Fired("sqrt-of-product", cur, new))
            cur = new
        memo[e] = cur
        return cur

    return visit(expr)


def guard_gradients(expr, prog, fired: list | None = None, memo: dict | None = None):
    fired = [] if fired is None else fired
    memo = {} if memo is None else memo

    def visit(e):
        if e in memo:
            return memo[e]
        if e.is_Atom:
            return e
        args = tuple(visit(a) for a in e.args)
        cur = rebuild(e, args) if args != e.args else e
        new = _pow_guard(cur, prog)
        if new is not None:
            fired.append(Fired("gradient-guard-pow", cur, new))
            cur = new
        memo[e] = cur
        return cur

    return visit(expr)


# eps guards (``guards: {eps: e}`` or ``--eps e``): log(a) and a ** -k become
# log(max(a, e)) and max(a, e) ** -k where the range analysis finds a >= 0 but cannot
# prove a > 0, i.e. where the argument can reach 0.  Arguments proved positive are left
# exact; arguments of unknown sign are left alone too (clamping a negative argument
# would hide a wrong formula, not a rounding problem).  Positive fractional powers
# (sqrt) need no eps: their value at 0 is exact and gradient-guard-pow keeps the
# derivative finite.


def _eps_target(e, prog):
    if isinstance(e, sp.log):
        return e.args[0]
    if isinstance(e, sp.Pow) and e.args[1].is_Number and e.args[1].is_negative:
        return e.args[0]
    return None


def guard_eps(expr, prog, eps: float, fired: list | None = None, memo: dict | None = None):
    """Keep log and division away from 0 where the argument can reach 0 (see above)."""
    fired = [] if fired is None else fired
    memo = {} if memo is None else memo
    floor = sp.Float(eps)

    def visit(e):
        if e in memo:
            return memo[e]
        if e.is_Atom:
            return e
        args = tuple(visit(a) for a in e.args)
        cur = rebuild(e, args) if args != e.args else e
        a = _eps_target(cur, prog)
        if a is not None and not is_positive(a, prog) and is_nonneg(a, prog):
            new = cur.func(sp.Max(a, floor), *cur.args[1:])
            fired.append(Fired("eps-guard", cur, new))
            cur = new
        memo[e] = cur
        return cur

    return visit(expr)


def eps_candidates(expr, prog) -> list[sp.Expr]:
    """The log and division arguments an eps guard would clamp (for ``explain``)."""
    return [a for e in sp.preorder_traversal(expr)
            if (a := _eps_target(e, prog)) is not None and not is_positive(a, prog) and is_nonneg(a, prog)]
