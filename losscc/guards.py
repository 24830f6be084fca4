"""Guards: rules that keep a value and make its gradient (or an untaken branch) finite.

Three bundles, run by ``losscc.passes`` after the stable rewrites:

* :data:`GRADIENT_GUARDS` -- sqrt(x) and x**g (g not an integer) are finite at x = 0 where
  their derivative is not; the value is kept exactly and the derivative at 0 becomes 0
  instead of inf (or 0 * inf = NaN downstream).
* :data:`BRANCH_GUARDS` -- where(c, f(x), g(x)) evaluates both branches; the gradient of the
  branch not taken is multiplied by zero, and 0 * inf = NaN.  So inside each branch the
  arguments of operations that are singular somewhere (log and the log-gamma family,
  division, sqrt, fractional powers) are replaced by where(c, arg, 1): the same value
  where the branch is taken, a harmless 1 where it is not.  Operations that overflow (exp, expm1, cosh, sinh, integer
  powers x**k, k >= 3, powers x**g, g > 1, of an unbounded x, and powers with a symbolic
  exponent) get where(c, arg, 0) (where(c, base, 1) for powers) the same way.
  Arguments that the range analysis proves positive (for the singular operations) or
  bounded or non-positive (for exp) are left alone, so exact formulas stay exact and fast.
* :data:`EPS_GUARDS` (``guards: {eps: e}`` or ``--eps e``) -- log(a) and a ** -k become
  log(max(a, e)) and max(a, e) ** -k (lgamma, digamma and trigamma as log) where the
  range analysis finds a >= 0 but cannot prove a > 0, i.e. where the argument can reach 0.  Arguments proved positive are left exact;
  arguments of unknown sign are left alone too (clamping a negative argument would hide a
  wrong formula, not a rounding problem).  Positive fractional powers (sqrt) need no eps:
  their value at 0 is exact and gradient-guard-pow keeps the derivative finite.
"""

from __future__ import annotations

import sympy as sp

from . import bounded, functions, ir
from .passes import Bundle, Rule
from .ranges import Ranges

# --------------------------------------------------------------------------- gradient guards


def _pow_guard(e, ctx):
    if not isinstance(e, sp.Pow):
        return None
    base, ex = e.args
    if ex.is_Integer or (ex.is_Number and ex.is_negative) or ctx.ranges.positive(base):
        return None
    if not ex.is_Number and _integer_valued(ex, ctx.prog):
        return None  # x ** C with C an axis size or an int parameter: a polynomial
    if isinstance(base, (sp.Piecewise, ir.Where, ir.StopGradient)) or base.is_number:
        return None  # a number's power: no gradient flows into its base
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


GRADIENT_GUARDS = Bundle("gradient-guards", (
    Rule("gradient-guard-pow", "x**g (g not an integer) has an infinite derivative at x = 0: "
         "where(x > 0, where(x > 0, x, 1)**g, stop_gradient(x)**g) keeps the value, derivative 0", _pow_guard),
))

# --------------------------------------------------------------------------- branch guards


def _overflows(e, r: Ranges) -> bool:
    """exp, expm1, cosh, sinh of an argument that may be large, or x**k (k >= 3) of a base
    that may be: inf in the untaken branch, and 0 * inf = NaN in its gradient.  Squares of
    a base of degree 1 in the inputs are left alone: their derivative 2x is finite at every
    finite input, and the value overflows only beyond |x| = 1.8e19 (float32); a square of a
    base of degree 2 or more ((1 - r**2)**2, which the rewrite power-minus-constant makes of
    a cube) overflows at inputs of 1e10."""
    if isinstance(e, (sp.exp, ir.expm1)):
        x = e.args[0]
        return not (r.nonneg(-x) or r.bounded(x))
    if isinstance(e, (sp.cosh, sp.sinh)):
        return not r.bounded(e.args[0])
    if isinstance(e, sp.Pow) and e.args[1].is_Integer and e.args[1] >= 2:
        if r.bounded(e.args[0]):
            return False
        return e.args[1] >= 3 or (_input_degree(e.args[0], r.prog) or 0) >= 2
    return False


def _input_degree(e, prog) -> int | None:
    """Polynomial degree of e in the float inputs and learnables (hyperparameters and numbers
    are constants), from its structure; None where it is not a polynomial."""
    spec = getattr(prog, "spec", None)
    if spec is None:
        return None
    names = {i.name for i in spec.inputs if i.dtype == "float"} | {lr.name for lr in spec.learnable}
    return bounded._degree(e, lambda x: not any(str(s) in names for s in x.free_symbols), lambda x: 1, 8, True)


def _guard_untaken(out, ctx):
    """One node inside a branch taken where ctx.cond holds (see the module's docstring)."""
    r, cond = ctx.ranges, ctx.cond
    if isinstance(out, sp.Pow) and not out.args[1].is_Number:
        # a symbolic exponent (a tensor, a hyperparameter): singular at a base of 0 or
        # overflowing at a large one, whatever its value; 1**e is 1, and d/de is 0 there
        base, ex = out.args
        if r.positive(base) and r.bounded(base) and r.bounded(ex):
            return None
        return sp.Pow(ir.Where(cond, base, 1), ex)
    if _singular_at_zero(out) or isinstance(out, sp.Pow) and out.args[1].is_Number and (
            out.args[1].is_negative or not out.args[1].is_Integer):
        arg = out.args[0]
        if r.positive(arg) and not (isinstance(out, sp.Pow) and out.args[1] > 1 and not r.bounded(arg)):
            return None  # x**2.5 of a large positive x overflows
        return out.func(ir.Where(cond, arg, 1), *out.args[1:])
    if isinstance(out, ir.log1p) and not r.nonneg(out.args[0]):
        return ir.log1p(ir.Where(cond, out.args[0], 0))  # log1p is singular at -1
    if _overflows(out, r):
        return out.func(ir.Where(cond, out.args[0], 0 if not isinstance(out, sp.Pow) else 1), *out.args[1:])
    return None


UNTAKEN_BRANCH = Bundle("untaken-branch", (
    Rule("guard-untaken-branch", "the gradient of a branch not taken is multiplied by 0, and 0 * inf = NaN: "
         "the argument of a singular or overflowing operation is where(cond, arg, 1 or 0)", _guard_untaken),
), opaque=(ir.TensorOp,))


def _guard_branches(e, ctx):
    """Each branch of a Piecewise under its condition (the last one under "no other holds")."""
    # a select on boolean hyperparameters is a Python `if`: only its branch runs, nothing to guard
    if not isinstance(e, sp.Piecewise) or any(ir.on_flags(p.cond, ctx.prog) for p in e.args):
        return None
    pairs, previous = [], []
    for p in e.args:
        cond = p.cond if p.cond is not sp.true else sp.And(*[sp.Not(c) for c in previous])
        if cond is sp.true:
            pairs.append((p.expr, p.cond))
        else:
            pairs.append((ctx.under(cond).run(UNTAKEN_BRANCH, p.expr), p.cond))
        previous.append(p.cond)
    return ir.piecewise(*pairs)


BRANCH_GUARDS = Bundle("branch-guards", (
    Rule("guard-branches", "runs guard-untaken-branch in each branch of a select, under its condition",
         _guard_branches, record=False),
))

# --------------------------------------------------------------------------- eps guards


def _singular_at_zero(e) -> bool:
    """log, lgamma, digamma, trigamma: a unary function whose registry record is singular
    at an argument of 0 (and, for the log-gamma family, at the negative integers)."""
    f = functions.of_node(e)
    return f is not None and f.singular == 0 and f.lowering == "unary"


def _eps_target(e):
    if _singular_at_zero(e):
        return e.args[0]
    if isinstance(e, ir.log1p):  # log(1 - p) after the log1p rewrite: its log's argument
        return 1 + e.args[0]
    if isinstance(e, sp.Pow) and e.args[1].is_Number and e.args[1].is_negative:
        return e.args[0]
    return None


def _can_reach_zero(a, r: Ranges) -> bool:
    return not r.positive(a) and r.nonneg(a)


TIGHT_FLOOR = 1e-30  # the clamp of a value > 0 by a margin the dtype may round away (normal in float32)


def _eps_guard(e, ctx):
    a = _eps_target(e)
    if a is None or not _can_reach_zero(a, ctx.ranges):
        return None
    # p - 1 with p > 1: exact wherever the dtype holds the margin, only a rounded 0 is clamped
    tight = ctx.ranges.of(a).tight
    floor = TIGHT_FLOOR if tight else ctx.eps
    if isinstance(e, ir.log1p) and tight:  # 1e-30 - 1 rounds to -1: the floor on 1 + u, below -1/2
        u, half = e.args[0], sp.Rational(1, 2)
        return ir.Where(sp.StrictGreaterThan(u, -half), ir.log1p(sp.Max(u, -half)),
                        sp.log(sp.Max(1 + u, sp.Float(floor))))
    if isinstance(e, ir.log1p):  # log1p(max(u, eps - 1)) = log(max(1 + u, eps))
        return ir.log1p(sp.Max(e.args[0], sp.Float(floor) - 1))
    return e.func(sp.Max(a, sp.Float(floor)), *e.args[1:])


EPS_GUARDS = Bundle("eps-guards", (
    Rule("eps-guard", "log(a), log1p(u) and a**-k with a (1 + u) >= 0 not proved > 0: a is clamped to max(a, eps)",
         _eps_guard),
), when=lambda ctx: bool(ctx.eps))


def eps_candidates(expr, prog) -> list[sp.Expr]:
    """The log and division arguments an eps guard would clamp (for ``explain``)."""
    r = Ranges(prog)
    return [a for e in sp.preorder_traversal(expr) if (a := _eps_target(e)) is not None and _can_reach_zero(a, r)]
