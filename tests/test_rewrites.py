"""Every stable rewrite (losscc.rewrites.STABILITY) and both guards preserve the value.

Three kinds of evidence:

* symbolic: each elementwise rule, applied to a generic argument, gives an
  expression that SymPy proves equal to the original once the custom functions
  are written in exp/log; the tensor rules are proved the same way on a symbolic
  vector of three lanes, with the evaluator's max-shifted formulas for softmax,
  log_softmax and logsumexp;
* numerical: a small spec whose formula triggers the rule (checked in the `fired`
  record) is evaluated before (``prog.loss``) and after (``prepare(spec).loss``)
  with the mpmath reference evaluator on the same random inputs; the two agree to
  1e-25 relative;
* two-sided, in float64: at a hard point the naive form is badly wrong while the
  rewritten form matches mpmath.
"""

from __future__ import annotations

import dataclasses
import glob
import textwrap
from pathlib import Path

import mpmath
import numpy as np
import pytest
import sympy as sp

from losscc import ir
from losscc.cases import random_cases
from losscc.parse import build_program
from losscc.pipeline import prepare
from losscc.reference import Evaluator, digits_for
from losscc.guards import BRANCH_GUARDS, GRADIENT_GUARDS
from losscc.passes import BARE, context, run
from losscc.ranges import is_nonneg, is_positive
from losscc.rewrites import RANGE_REWRITES, STABILITY, optimize
from losscc.spec import load_spec, spec_from_text
from tests.backend_util import BACKENDS

ROOT = Path(__file__).resolve().parent.parent
RULES = {r.name: r for r in STABILITY}
RANGE_RULES = {r.name: r for r in RANGE_REWRITES.rules}


def _bundle(bundle, expr, prog, fired):
    out = run((bundle,), context(prog), expr, {})
    fired.extend(out.fired)
    return out.loss


def guard_branches(expr, prog, fired):
    return _bundle(BRANCH_GUARDS, expr, prog, fired)


def guard_gradients(expr, prog, fired):
    return _bundle(GRADIENT_GUARDS, expr, prog, fired)
EQUAL_RTOL = mpmath.mpf(10) ** -25


def make_spec(inputs: str, formula: str, extra: str = ""):
    text = "name: t\nsummary: a test spec\ninputs:\n"
    text += textwrap.indent(textwrap.dedent(inputs).strip("\n"), "  ") + "\n"
    if extra:
        text += textwrap.dedent(extra).strip("\n") + "\n"
    text += "formula: |\n" + textwrap.indent(textwrap.dedent(formula).strip("\n"), "  ") + "\n"
    return spec_from_text(text, "<test>")


# --------------------------------------------------------------------------- evaluation helpers


def evaluate(prog, expr, inputs, params=None, learnable=None, masks=()):
    """expr (any IR over prog's symbols) on inputs, as an mpf object array of the full layout."""
    params, learnable = params or {}, learnable or {}
    with mpmath.workdps(digits_for(inputs, learnable)):
        ev = Evaluator(prog, inputs, params, learnable)
        ev._freeze = False  # run() sets this; here a StopGradient just evaluates its argument
        env, valid = ev.env(inputs)
        for _, sym in masks:  # prepare()'s ignore masks are the evaluator's `valid`
            env[sym] = valid
        value = ev.ev(expr, env, {})
        return np.broadcast_to(np.asarray(value, dtype=object), ev._full(prog.typeof(expr).axes))


def worst_relative(a, b) -> float:
    """The largest relative difference of two mpf arrays; NaN only where both are NaN."""
    a, b = np.broadcast_arrays(a, b)
    worst = mpmath.mpf(0)
    for u, v in zip(a.reshape(-1), b.reshape(-1)):
        u, v = mpmath.mpf(u), mpmath.mpf(v)
        if mpmath.isnan(u) or mpmath.isnan(v):
            assert mpmath.isnan(u) and mpmath.isnan(v), (u, v)
            continue
        if u == v:  # also equal infinities
            continue
        assert mpmath.isfinite(u) and mpmath.isfinite(v), (u, v)
        worst = max(worst, abs(u - v) / max(abs(u), abs(v)))
    return float(worst)


def assert_same_values(spec, inputs, params=None, learnable=None):
    """The prepared (rewritten and guarded) loss equals the loss as written."""
    prog = build_program(spec)
    prep = prepare(spec)
    assert not prep.masks
    before = evaluate(prog, prog.loss, inputs, params, learnable)
    after = evaluate(prep.prog, prep.loss, inputs, params, learnable)
    assert before.shape == after.shape
    err = worst_relative(before, after)
    assert err <= EQUAL_RTOL, f"{prog.loss}  vs  {prep.loss}: relative difference {err:.3g}"
    # the whole evaluator path too: the prepared loss in place of the written one
    with mpmath.workdps(digits_for(inputs, learnable or {})):
        ra = Evaluator(prog, inputs, params or {}, learnable or {}).run()
        rb = Evaluator(dataclasses.replace(prep.prog, loss=prep.loss), inputs, params or {}, learnable or {}).run()
    for red in ra:
        assert worst_relative(np.asarray(ra[red], dtype=object), np.asarray(rb[red], dtype=object)) <= EQUAL_RTOL
    return prog, prep


def fired_rules(prep) -> set[str]:
    return {f.rule for f in prep.fired}


# --------------------------------------------------------------------------- symbolic proofs

# The IR's symbols carry no assumptions (as the parser makes them); the proofs then
# substitute real symbols, since every IR value is real.
x, y = sp.symbols("x y")
xr, yr = sp.symbols("x y", real=True)
GENERIC = x**2 / 3 - y  # a generic argument


def elementary(e):
    """e with losscc's functions written in exp and log only."""
    e = e.rewrite(sp.exp)                    # sigmoid, softplus (and expm1 -> exp(u) - 1)
    e = e.replace(lambda n: isinstance(n, ir.log1p), lambda n: n.rewrite(sp.log))
    e = e.replace(lambda n: isinstance(n, ir.expm1), lambda n: n.rewrite(sp.exp))
    assert not e.has(ir.sigmoid, ir.softplus, ir.log1p, ir.expm1), e
    return e


def proved_equal(a, b) -> bool:
    d = (elementary(a) - elementary(b)).subs({x: xr, y: yr})
    return sp.simplify(d) == 0 or sp.simplify(sp.expand_log(d, force=True)) == 0


ELEMENTWISE_TRIGGERS = {
    "log-exp": [sp.log(sp.exp(GENERIC))],
    "one-minus-sigmoid": [1 - ir.sigmoid(GENERIC)],
    "one-minus-weighted-sigmoids": [1 - y * ir.sigmoid(x) - (1 - y) * ir.sigmoid(-x),
                                    1 - ir.sigmoid(x) / 3 - 2 * ir.sigmoid(GENERIC) / 3],
    "log-sigmoid": [sp.log(ir.sigmoid(GENERIC)), sp.log(ir.sigmoid(-x))],
    "log1p": [sp.log(1 + GENERIC), sp.log(1 + x + y)],
    "expm1": [sp.exp(GENERIC) - 1, 1 - sp.exp(GENERIC), sp.exp(x) - 1 + y, 1 - sp.exp(-x) + y**2],
    "softplus": [sp.log(1 + sp.exp(GENERIC)), sp.log(sp.exp(x) + 1), sp.log(1 + sp.exp(-x)), ir.log1p(sp.exp(x))],
    "log-of-exp-product": [sp.log(3 * sp.exp(GENERIC)), sp.log(y * sp.exp(x)), sp.log(sp.exp(x) / 7)],
    "log-of-reciprocal": [sp.log(1 / (1 + sp.exp(-x))), sp.log(1 / GENERIC), sp.log(1 / ir.sigmoid(x))],
    "softplus-linear": [-ir.softplus(-x) - x, 3 * ir.softplus(2 * x) - 6 * x + y],  # c = -a: no select
}


def branches(e):
    """The branch expressions of a Piecewise or Where (e itself otherwise)."""
    if isinstance(e, sp.Piecewise):
        return [p.expr for p in e.args]
    if isinstance(e, ir.Where):
        return list(e.args[1:])
    return [e]


def unclipped(e):
    """e with clip(u, lo, hi) -> u: a branch reads its argument clipped to the region where it
    is taken, where the clip is the identity; the proof is made for that region's values."""
    return e.replace(lambda n: isinstance(n, ir.Clip), lambda n: n.args[0])


# log-cosh: log1p(expm1(m)**2 exp(-m) / 2) + where(|u| > 40, |u| - 40, 0), m = min(|u|, 40)
@pytest.mark.parametrize("before", [sp.log(sp.cosh(x)), sp.log(sp.cosh(-3 * x))], ids=str)
def test_log_cosh_is_an_identity_below_40_on_each_sign_and_within_1e_34_above(before):
    """Below |u| = 40 the rewrite is an identity (proved on each sign); above, it is
    log cosh(40) + |u| - 40, which drops log1p(exp(-2|u|)) - log1p(exp(-80)) < 1.9e-35."""
    after = RULES["log-cosh"].apply(before, BARE)
    assert after is not None and after != before
    assert after.has(sp.Abs) and not after.has(sp.cosh)
    for s in (sp.Symbol("p", positive=True), sp.Symbol("m", negative=True)):
        below = after.replace(lambda n: isinstance(n, sp.Min), lambda n: [a for a in n.args if not a.is_number][0])
        below = below.replace(lambda n: isinstance(n, ir.Where), lambda n: n.args[2])
        d = elementary(before - below).subs(x, s)
        assert sp.simplify(sp.exp(d).rewrite(sp.exp)) == 1, f"{before} -> {below} is not an identity for {s}"
        d = elementary(before - below - sp.log(2)).subs(x, s)  # the check can fail
        assert sp.simplify(sp.exp(d).rewrite(sp.exp)) != 1
    mpmath.mp.dps = 80
    try:
        for v in (-1e30, -200.0, -41.0, 13.4, 14.0, 40.5, 41.0, 89.0, 1e3, 1e30):
            want = mpmath.log(mpmath.cosh(mpmath.mpf(str(sp.N(before.args[0].args[0].subs(x, sp.Float(v, 80)), 80)))))
            got = sp.N(after.subs(x, sp.Float(v, 80)).replace(
                lambda n: isinstance(n, ir.Where), lambda n: sp.Piecewise((n.args[1], n.args[0]), (n.args[2], True))
            ).rewrite(sp.exp), 60)
            assert abs(mpmath.mpf(str(got)) - want) <= 1e-34 * abs(want), (v, got, want)
    finally:
        mpmath.mp.dps = 15


# rules whose result is a select between forms that are each an identity everywhere (the
# select only picks the accurate one): every branch proved equal to the original
BRANCHED_TRIGGERS = {
    "log-add-exp": [sp.log(sp.exp(x) + sp.exp(y)), sp.log(sp.exp(GENERIC) + sp.exp(-y))],
    "one-minus-ratio": [1 - x / (x + y**2 + 1), 1 - 2 * x / (x**2 - x + 3)],
}


@pytest.mark.parametrize("name,before", [(n, b) for n, bs in BRANCHED_TRIGGERS.items() for b in bs],
                         ids=lambda v: str(v))
def test_branched_rule_is_an_identity_in_every_branch(name, before):
    after = RULES[name].apply(before, BARE)
    assert after is not None and isinstance(after, ir.Where), f"{name} does not fire on {before}"
    def same(a, b):  # exp(a - b) == 1 (SymPy does not split log(exp(x) + exp(y)) itself)
        d = (elementary(a) - elementary(b)).subs({x: xr, y: yr})
        return sp.simplify(sp.exp(d)) == 1

    for branch in branches(after):
        assert same(before, branch), f"{name}: {before} -> {branch} is not an identity"
    assert not same(before, branches(after)[0] + sp.log(2))


# rules whose result holds a min(d, c): proved on each side of c (d = c - p and d = c + p, p > 0)
SIDED_TRIGGERS = {
    "linear-tail": [sp.Piecewise((sp.Rational(1, 2) * x**2, x < y), (y * (x - y / 2), True)),
                    sp.Piecewise((x**2 + x, x < 2), (5 * x - 4, True)),
                    sp.Piecewise((x**2 + x, 2 > x), (5 * x - 4, True))],
}


@pytest.mark.parametrize("name,before", [(n, b) for n, bs in SIDED_TRIGGERS.items() for b in bs],
                         ids=lambda v: str(v))
def test_sided_rule_is_an_identity_on_each_side(name, before):
    after = RULES[name].apply(before, BARE)
    assert after is not None and after != before, f"{name} does not fire on {before}"
    assert after.has(sp.Min) and not after.has(sp.Piecewise)
    (_, cond), _ = before.args
    c = cond.rhs if cond.lhs == x else cond.lhs  # the bound; d is x
    p = sp.Symbol("p", positive=True)
    cr = c.subs(y, yr)
    for side in (cr - p, cr + p):
        b, a = before.subs(y, yr).subs(x, side), after.rewrite(sp.Piecewise).subs(y, yr).subs(x, side)
        assert sp.simplify(b - a) == 0, f"{name}: {before} -> {after} differs at d = {side}"
        # first derivatives agree too, so the gradient at the tie is the same from both sides
        assert sp.simplify(sp.diff(b - a, p)) == 0


def test_linear_tail_refuses_tails_that_are_not_tangents_and_divisions():
    rule = RULES["linear-tail"]
    assert rule.apply(sp.Piecewise((x**2 / 2, x < 1), (x - sp.Rational(2, 5), True)), BARE) is None  # jumps
    assert rule.apply(sp.Piecewise((x**2 / 2, x < 1), (2 * x - sp.Rational(3, 2), True)), BARE) is None  # kink
    assert rule.apply(sp.Piecewise((x**2 / (2 * y), x < y), (x - y / 2, True)), BARE) is None  # smooth L1, y = 0
    assert rule.apply(sp.Piecewise((x, x < 1), (x, True)), BARE) is None  # nothing to gain
    assert rule.apply(sp.Piecewise((x**2, x < y + x), (x, True)), BARE) is None  # the bound depends on d


@pytest.mark.parametrize("name,before", [(n, b) for n, bs in ELEMENTWISE_TRIGGERS.items() for b in bs],
                         ids=lambda v: str(v))
def test_elementwise_rule_is_an_identity(name, before):
    after = RULES[name].apply(before, BARE)
    assert after is not None and after != before, f"{name} does not fire on {before}"
    assert proved_equal(before, after), f"{name}: {before} -> {after} is not an identity"


def test_elementwise_proofs_are_not_vacuous():
    """The proof machinery rejects a wrong 'rewrite' (sigmoid(x) for 1 - sigmoid(x), ...)."""
    assert not proved_equal(1 - ir.sigmoid(x), ir.sigmoid(x))
    assert not proved_equal(sp.log(ir.sigmoid(x)), -ir.softplus(x))
    assert not proved_equal(sp.log(1 + x), ir.log1p(x) + x**3)
    assert not proved_equal(1 - sp.exp(x), ir.expm1(x))


def test_custom_function_derivatives_match_their_definitions():
    for f in (ir.sigmoid(GENERIC), ir.softplus(GENERIC), ir.log1p(GENERIC), ir.expm1(GENERIC)):
        assert sp.simplify(elementary(sp.diff(f, x)) - sp.diff(elementary(f), x)) == 0, f


# A symbolic model of the tensor operators on one axis of three lanes: a value is a
# list of 3 SymPy expressions (a scalar broadcasts); softmax, log_softmax and
# logsumexp use an arbitrary real shift m, as the evaluator and the generated code
# shift by the maximum.
LANES = 3
V = sp.symbols("v0:3", real=True)
SHIFT = sp.Symbol("m", real=True)


def lanes(e, env):
    if e in env:
        return env[e]
    if e.is_Number:
        return [e] * LANES
    if isinstance(e, ir.Softmax):
        z = lanes(e.args[0], env)
        s = sum(sp.exp(v - SHIFT) for v in z)
        return [sp.exp(v - SHIFT) / s for v in z]
    if isinstance(e, ir.LogSoftmax):
        z = lanes(e.args[0], env)
        lse = SHIFT + sp.log(sum(sp.exp(v - SHIFT) for v in z))
        return [v - lse for v in z]
    if isinstance(e, ir.LogSumExp):
        z = lanes(e.args[0], env)
        return [SHIFT + sp.log(sum(sp.exp(v - SHIFT) for v in z))] * LANES
    if isinstance(e, ir.ReduceSum):
        return [sum(lanes(e.args[0], env))] * LANES
    if isinstance(e, ir.Gather):
        k = env[e.args[1]]
        return [lanes(e.args[0], env)[k]] * LANES
    if isinstance(e, ir.TensorOp):
        raise NotImplementedError(type(e).__name__)
    parts = [lanes(a, env) for a in e.args]
    return [e.func(*[p[k] for p in parts]) for k in range(LANES)]


X, LABEL, AXIS = sp.Symbol("x"), sp.Symbol("label"), sp.Symbol("C")
TENSOR_TRIGGERS = {
    "softmax-as-exp-log-softmax": ir.Softmax(X, AXIS),
    "gather-through-exp": ir.Gather(sp.exp(X), LABEL, AXIS),
    "logsumexp": sp.log(ir.ReduceSum(sp.exp(X), AXIS)),
    "log-exp": sp.log(sp.exp(ir.Gather(ir.LogSoftmax(X, AXIS), LABEL, AXIS))),
    "logsumexp-minus-member": ir.LogSumExp(X, AXIS) - ir.Gather(X, LABEL, AXIS),
}


@pytest.mark.parametrize("label", range(LANES))
@pytest.mark.parametrize("name", sorted(TENSOR_TRIGGERS))
def test_tensor_rule_is_an_identity_on_three_lanes(name, label):
    before = TENSOR_TRIGGERS[name]
    after = RULES[name].apply(before, BARE)
    assert after is not None and after != before
    env = {X: list(V), LABEL: label}
    for a, b in zip(lanes(before, env), lanes(after, env)):
        d = a - b
        assert sp.simplify(d) == 0 or sp.simplify(sp.expand_log(d, force=True)) == 0, (name, a, b)


Y, EPS = sp.Symbol("y"), sp.Symbol("eps", positive=True)
W = sp.symbols("w0:3", real=True)
COSINE = (1 - ir.ReduceSum(X * Y, AXIS)
          / sp.sqrt((ir.ReduceSum(X**2, AXIS) + EPS) * (ir.ReduceSum(Y**2, AXIS) + EPS)))


@pytest.mark.parametrize("before", [
    sp.sqrt(ir.ReduceSum((X + Y)**2, AXIS) + sp.Rational(1, 8)) - sp.sqrt(ir.ReduceSum((X - 2 * Y)**2, AXIS)),
    3 * sp.sqrt(ir.ReduceSum((X - Y + 2)**2, AXIS)) - 3 * sp.sqrt(ir.ReduceSum((X + 1)**2, AXIS)) + Y,
], ids=str)
def test_difference_of_norms_is_an_identity_on_three_lanes(before):
    """sqrt(U) - sqrt(V) = (sum((u - v)(u + v)) + k1 - k2) / (sqrt(U) + sqrt(V)) where the
    roots' sum is positive (here U > 0 or V > 0: the lanes are generic); u - v is the
    symbolic difference, x cancelled."""
    after = RULES["difference-of-norms"].apply(before, BARE)
    assert after is not None
    num = next(s for s in after.atoms(ir.ReduceSum) if not s.args[0].is_Pow)
    assert not num.args[0].args[0].has(X) or not num.args[0].args[1].has(X)  # (u - v) lost x
    taken = after.replace(lambda n: isinstance(n, ir.Where), lambda n: n.args[1])
    env = {X: list(V), Y: list(W)}
    rng = np.random.default_rng(3)
    for _ in range(4):  # exact lanes at random rational points, compared to 50 digits
        at = {s: sp.Rational(int(rng.integers(-40, 40)), 7) for s in (*V, *W)}
        for a, b in zip(lanes(before, env), lanes(taken, env)):
            va, vb = sp.N(a.subs(at), 50), sp.N(b.subs(at), 50)
            assert abs(va - vb) <= 1e-40 * max(1, abs(va)), (a, b, at)


def test_difference_of_norms_needs_a_shared_term_and_opposite_signs():
    rule = RULES["difference-of-norms"]
    assert rule.apply(sp.sqrt(ir.ReduceSum(X**2, AXIS)) - sp.sqrt(ir.ReduceSum(Y**2, AXIS)), BARE) is None
    assert rule.apply(sp.sqrt(ir.ReduceSum((X + Y)**2, AXIS)) + sp.sqrt(ir.ReduceSum(X**2, AXIS)), BARE) is None
    assert rule.apply(sp.sqrt(ir.ReduceSum((X + Y)**3, AXIS)) - sp.sqrt(ir.ReduceSum(X**2, AXIS)), BARE) is None
    assert rule.apply(sp.sqrt(ir.ReduceSum((X + Y)**2, AXIS) - 1) - sp.sqrt(ir.ReduceSum(X**2, AXIS)),
                      BARE) is None  # a root of what may be negative: NaN there, kept


def test_sum_into_static_select_is_an_identity_for_each_flag():
    """rest + c * select(flag, a, b) = select(flag, rest + c a, rest + c b), taken only where a
    branch then holds a difference of norms; a select on a tensor condition is left alone."""
    spec = make_spec(MAT, "loss = x", "params:\n  flag: {default: false}\n")
    ctx = context(build_program(spec))
    flag = sp.Symbol("flag")
    nx, nt, nxt = (sp.sqrt(ir.ReduceSum(u**2, AXIS)) for u in (X - Y, Y, X + Y))
    before = nx + 2 - sp.Piecewise((nt, flag), (nxt, True))
    after = RULES["sum-into-static-select"].apply(before, ctx)
    assert isinstance(after, sp.Piecewise)
    for val in (True, False):
        got = after.args[0].expr if val else after.args[1].expr
        assert sp.expand(got - before.subs(flag, val)) == 0
    tensor = nx + 2 - sp.Piecewise((nt, X > 0), (nxt, True))
    assert RULES["sum-into-static-select"].apply(tensor, ctx) is None
    unrelated = nt + 2 - sp.Piecewise((nx, flag), (nt * 2, True))  # no branch meets a pair
    assert RULES["sum-into-static-select"].apply(unrelated, ctx) is None


def test_into_static_select_is_an_identity_for_each_flag():
    """f(select(flag, a, b)) = select(flag, f(a), f(b)) for log and gathering, taken only where a
    rule then fires in a branch; a select on a tensor condition is left alone."""
    ctx = context(build_program(make_spec(MAT, "loss = x", "params:\n  flag: {default: false}\n")))
    flag = sp.Symbol("flag")
    for before in (sp.log(sp.Piecewise((sp.exp(X), flag), (X**2 + 1, True))),
                   ir.Gather(sp.Piecewise((sp.exp(X), flag), (X, True)), LABEL, AXIS)):
        after = RULES["into-static-select"].apply(before, ctx)
        assert isinstance(after, sp.Piecewise)
        sel = before.args[0]
        for k in (0, 1):  # the branch the flag picks, with f applied
            assert after.args[k].cond == sel.args[k].cond
            assert after.args[k].expr == before.func(sel.args[k].expr, *before.args[1:])
    assert RULES["into-static-select"].apply(sp.log(sp.Piecewise((sp.exp(X), X > 0), (X**2 + 1, True))), ctx) is None
    assert RULES["into-static-select"].apply(sp.log(sp.Piecewise((X, flag), (sp.sin(X), True))), ctx) is None


T_ = sp.Symbol("t")


@pytest.mark.parametrize("before", [sp.exp(X) * sp.exp(T_), 3 * sp.exp(X) * sp.exp(-T_) * T_,
                                    (T_**2 + sp.exp(X)) * sp.exp(-T_ * X), sp.exp(2 * X) * (1 + T_ * sp.exp(T_))])
def test_product_of_exps_is_an_identity(before):
    """exp(a) exp(b) = exp(a + b), and a product with a sum holding an exp distributes (x is
    unbounded, t in [0, 1]); not taken where every argument is bounded, nor without a second
    exp to meet."""
    ctx = context(build_program(make_spec(MAT, "loss = x")))
    rule = RULES["product-of-exps"]
    after = rule.apply(before, ctx)
    assert after is not None and after != before
    assert sp.simplify(sp.powsimp(sp.expand(after - before))) == 0
    assert sp.simplify(sp.powsimp(sp.expand(after + 1 - before))) != 0  # and the check can fail
    assert rule.apply(sp.exp(T_) * sp.exp(2 * T_), ctx) is None  # bounded arguments: kept
    assert rule.apply(sp.exp(X) * (T_ + 1), ctx) is None  # no second exp


def test_one_minus_cosine_is_an_identity_in_both_branches():
    """Both sides of the select equal 1 - cos for any vectors and eps > 0 (the near side:
    |x/sqrt(A) - y/sqrt(B)|^2 / 2 + eps / 2A + eps / 2B with A = |x|^2 + eps)."""
    after = RULES["one-minus-cosine"].apply(COSINE, BARE)
    assert isinstance(after, ir.Where)
    env = {X: list(V), Y: list(W), EPS: [EPS] * LANES}
    want = lanes(COSINE, env)[0]
    for branch in after.args[1:]:
        got = lanes(branch, env)[0]
        assert sp.simplify(sp.together(got - want)) == 0, branch
    wrong = lanes(after.args[1] + EPS, env)[0]  # and the check can fail
    assert sp.simplify(sp.together(wrong - want)) != 0
    # the far side is the written form, not matched again (the bundle reaches a fixpoint)
    assert RULES["one-minus-cosine"].apply(after.args[2], BARE) is None


E_ = sp.Symbol("e")


@pytest.mark.parametrize("c,lo,hi,e", [(1, E_, 1 - E_, sp.Rational(1, 10**7)), (1, E_, 1 - E_, sp.Rational(1, 4)),
                                       (3, 0, 3 - E_, sp.Rational(1, 2))])
def test_one_minus_clip_is_an_identity_in_each_region(c, lo, hi, e):
    """c - clip(x, lo, hi) = clip(c - x, c - hi, c - lo) below lo, between, above hi and at
    both bounds; off the bounds the derivatives in x agree too, and at a bound both forms
    pass the gradient (clip's convention), -1 either way."""
    before = c - ir.Clip(x, lo, hi) + y
    after = RULES["one-minus-clip"].apply(before, BARE)
    assert isinstance(after, sp.Add) and after.has(ir.Clip) and not after.has(ir.Clip(x, lo, hi))
    p = sp.Symbol("p", positive=True)
    lo_, hi_ = sp.sympify(lo).subs(E_, e), sp.sympify(hi).subs(E_, e)

    def plain(expr):  # clip as min(max(.)), the bound e a number
        return expr.subs(E_, e).replace(lambda n: isinstance(n, ir.Clip), lambda n: sp.Min(sp.Max(n.args[0], n.args[1]), n.args[2]))
    for at in (lo_ - p, (2 * lo_ + hi_) / 3, hi_ + p, lo_, hi_):
        b, a = plain(before).subs(x, at), plain(after).subs(x, at)
        assert sp.simplify(b - a) == 0, (at, b, a)
    for at in (lo_ - p, (2 * lo_ + hi_) / 3, hi_ + p):
        db, da = sp.diff(plain(before), x).subs(x, at), sp.diff(plain(after), x).subs(x, at)
        assert sp.simplify(db - da) == 0, (at, db, da)


def test_one_minus_clip_refuses_bounds_that_do_not_cancel():
    rule = RULES["one-minus-clip"]
    assert rule.apply(2 - ir.Clip(x, 0, 1), BARE) is None      # bounds 1 and 2: nothing cancels
    assert rule.apply(1 - ir.Clip(x, -3, 5), BARE) is None     # -4 and 4
    assert rule.apply(1 - ir.Clip(x, 0, sp.oo), BARE) is None  # an open side
    assert rule.apply(1 + ir.Clip(x, 1e-7, 1 - 1e-7), BARE) is None  # not a difference


@pytest.mark.parametrize("before", [y * ir.softplus(-x) + (1 - y) * ir.softplus(x),
                                    3 * ir.softplus(x) - y**2 * ir.softplus(-x) + y,
                                    ir.softplus(x - y) + ir.softplus(y - x) * x])
def test_softplus_pair_is_an_identity_on_each_sign(before):
    """a softplus(-u) + b softplus(u) = (a + b) softplus(-|u|) + where(u > 0, b u, -a u) for
    u > 0 and u < 0, in value and in the derivative in every variable (at u = 0 the second
    branch is taken, whose softplus(u) has the gradient sigmoid(0) on its own)."""
    after = RULES["softplus-pair"].apply(before, BARE)
    assert after is not None and len(after.atoms(ir.softplus)) == 1
    u = next(iter(after.atoms(ir.softplus))).args[0].args[0].lhs  # where(u > 0, -u, u)
    p = sp.Symbol("p", positive=True)

    def on_side(e, positive):  # each where decided by the side
        return e.replace(lambda n: isinstance(n, ir.Where), lambda n: n.args[1] if positive else n.args[2])
    for positive in (True, False):
        at = {x: y + p} if positive == (u.coeff(x) > 0) else {x: y - p}
        b, a = elementary(before), elementary(on_side(after, positive))
        for expr_b, expr_a in [(b, a), (sp.diff(b, x), sp.diff(a, x)), (sp.diff(b, y), sp.diff(a, y))]:
            d = (expr_b - expr_a).subs(at) if u.has(y) else (expr_b - expr_a).subs(x, p if positive else -p)
            assert sp.simplify(d.rewrite(sp.exp)) == 0, (before, positive, d)
    # and the check can fail: a wrong sign of the linear term is caught
    wrong = elementary(on_side(after, True)).subs(x, p) + 2 * p
    assert sp.simplify((elementary(before).subs(x, p) - wrong).rewrite(sp.exp)) != 0


@pytest.mark.parametrize("before", [ir.softplus(-x) + x - x * y, ir.softplus(x) - 2 * x,
                                    ir.softplus(x + 1) - x * y - y, y * ir.softplus(x) - x])
def test_softplus_linear_is_an_identity_on_each_sign(before):
    """a softplus(v) + c v = a softplus(-|v|) + where(v > 0, (a + c) v, c v) on each side of
    v = 0, in value and derivative; proved with each select decided by the side."""
    after = RULES["softplus-linear"].apply(before, BARE)
    assert after is not None and after.has(ir.Where)
    v = next(iter(after.atoms(ir.softplus))).args[0].args[0].lhs  # where(v > 0, -v, v)
    p = sp.Symbol("p", positive=True)
    (k, m), = [w.as_coeff_Mul() for w in sp.Add.make_args(v) if not w.is_number]
    rest = v - k * m  # v = k m + rest; m = x or y: solve v = +-p for m

    def on_side(e, positive):
        return e.replace(lambda n: isinstance(n, ir.Where), lambda n: n.args[1] if positive else n.args[2])
    for positive in (True, False):
        at = {m: ((p if positive else -p) - rest) / k}
        b, a = elementary(before), elementary(on_side(after, positive))
        for d in (b - a, sp.diff(b - a, x), sp.diff(b - a, y)):
            assert sp.simplify(d.subs(at).rewrite(sp.exp)) == 0, (before, positive, d)
    wrong = elementary(on_side(after, True)).subs(at) + p  # the check can fail
    assert sp.simplify((elementary(before).subs(at) - wrong).rewrite(sp.exp)) != 0


@pytest.mark.parametrize("before", [
    ir.Where(sp.Ge(x, y), x + ir.softplus(y - x), y + ir.softplus(x - y)) - x,
    2 * ir.Where(sp.Gt(x, 0), x - y, y**2) + 2 * y + x**3,
    ir.Where(sp.Gt(x, y), sp.log(x), -x) + x + sp.exp(y),
])
def test_sum_into_select_is_an_identity_in_each_branch(before):
    """rest + c where(cond, p, q) = where(cond, c p + S, c q + S) + (rest - S): each branch,
    with the condition decided, equals the written sum with the same decision."""
    after = RULES["sum-into-select"].apply(before, BARE)
    assert after is not None and after != before
    for side in (1, 2):
        def pick(e):
            return e.replace(lambda n: isinstance(n, ir.Where), lambda n: n.args[side])
        assert sp.simplify(pick(before) - pick(after)) == 0, (before, after, side)
    assert sp.simplify(pick(before) - pick(after) - x) != 0  # the check can fail


def test_sum_into_select_needs_a_term_that_cancels():
    rule = RULES["sum-into-select"]
    assert rule.apply(ir.Where(sp.Gt(x, 0), x, y) + 2 * x, BARE) is None   # 2x does not cancel x
    assert rule.apply(ir.Where(sp.Gt(x, 0), x, y) + x, BARE) is None       # nor does +x
    assert rule.apply(sp.Piecewise((x, x > 0), (y, True)) - x, BARE) is None  # a user's Piecewise


def test_softplus_linear_needs_one_coefficient_of_every_term():
    rule = RULES["softplus-linear"]
    assert rule.apply(ir.softplus(x) + 2 * x, BARE) is None         # a, c > 0: nothing cancels
    assert rule.apply(ir.softplus(x - y) - x, BARE) is None         # y's coefficient is 0, x's -1
    assert rule.apply(ir.softplus(x) - x**2, BARE) is None          # not linear in v
    assert rule.apply(ir.softplus(x) * ir.softplus(y) - x, BARE) is None
    assert rule.apply(ir.softplus(-sp.Abs(x)) + sp.Abs(x), BARE) is None  # v <= 0 is known


def test_softplus_pair_needs_opposite_arguments():
    rule = RULES["softplus-pair"]
    assert rule.apply(y * ir.softplus(x) + ir.softplus(y), BARE) is None
    assert rule.apply(y * ir.softplus(-x) + ir.softplus(x)**2, BARE) is None
    assert rule.apply(ir.softplus(x) * ir.softplus(-x) + y, BARE) is None


RELATIVE = [sp.Abs(xr - yr) / sp.Max(sp.Float(1e-7), sp.Abs(yr)),   # mape: |x - t| / max(|t|, eps)
            (yr - xr) / sp.Abs(yr), (xr + yr**2) / yr**2, sp.Abs(2 * xr + yr) / yr, 3 * (xr - yr) / yr,
            sp.Abs(xr - 2 * yr) / sp.Abs(yr)]


@pytest.mark.parametrize("before", RELATIVE, ids=str)
def test_relative_difference_is_an_identity_in_each_region(before):
    """At points of both branches (|T| > max(2|R|, c) or not, both signs of T), the rewritten
    form has the written value and derivatives in x and y; the near branch is finite where it
    is not taken (its division reads where(cond, T, 1)); the result is not rewritten again."""
    after = RULES["relative-difference"].apply(before, BARE)
    assert after is not None and len(after.atoms(ir.Where)) == 2, after
    sel = next(w for w in after.atoms(ir.Where) if not w.args[2].is_Number)
    points = [(0.3, 2.5), (-0.7, -3.0), (1e-3, 1e4), (2e-5, -1e3), (2.0, 2.5), (-1.5, 1.0), (0.5, 1e-9),
              (1.0, 0.0)]
    seen = set()
    for px, py in points:
        at = {xr: sp.Rational(px), yr: sp.Rational(py)}
        near = bool(sel.args[0].subs(at))
        seen.add(near)
        resolved = after.replace(lambda n: isinstance(n, ir.Where),
                                 lambda n: n.args[1] if bool(n.args[0].subs(at)) else n.args[2])
        if near:
            for b, a in [(before, resolved), (sp.diff(before, xr), sp.diff(resolved, xr)),
                         (sp.diff(before, yr), sp.diff(resolved, yr))]:
                vb, va = sp.N(b.subs(at), 40), sp.N(a.subs(at), 40)
                assert abs(vb - va) <= 1e-30 * max(1, abs(vb)), (before, (px, py), vb, va)
        else:
            near_branch = sel.args[1].replace(lambda n: isinstance(n, ir.Where), lambda n: n.args[2])
            assert sp.N(near_branch.subs(at)).is_finite, (before, (px, py))
    assert seen == {True, False}
    assert optimize(after) == optimize(before)  # a fixpoint: the kept written form stays as it is


def test_relative_difference_needs_the_denominator_among_the_terms():
    rule = RULES["relative-difference"]
    assert rule.apply(sp.Abs(xr - yr) / sp.Abs(xr + yr), BARE) is None    # |T| not a term
    assert rule.apply((xr - yr**2) / sp.Abs(yr), BARE) is None             # y**2, not a multiple of y
    assert rule.apply(sp.Abs(xr - yr) / sp.Max(xr, sp.Abs(yr)), BARE) is None  # max with a non-number
    assert rule.apply((xr * yr - yr) / sp.Abs(yr), BARE) is None           # R holds T
    assert rule.apply((xr + 1) / sp.Abs(yr), BARE) is None


def test_one_minus_weighted_sigmoids_needs_weights_summing_to_one():
    rule = RULES["one-minus-weighted-sigmoids"]
    assert rule.apply(1 - y * ir.sigmoid(x) - y * ir.sigmoid(-x), BARE) is None
    assert rule.apply(1 - y * ir.sigmoid(x) - (1 - y) * sp.exp(x), BARE) is None


def test_one_minus_cosine_refuses_what_is_not_a_cosine():
    rule = RULES["one-minus-cosine"]
    sx, sy = ir.ReduceSum(X**2, AXIS), ir.ReduceSum(Y**2, AXIS)
    assert rule.apply(1 - ir.ReduceSum(X * Y, AXIS) / sp.sqrt(sx * sx), BARE) is None  # |x|^2 for |y|^2
    assert rule.apply(1 - ir.ReduceSum(X * Y, AXIS) / (sx * sy), BARE) is None  # no square roots
    assert rule.apply(2 - ir.ReduceSum(X * Y, AXIS) / sp.sqrt(sx * sy), BARE) is None
    assert rule.apply(1 - ir.ReduceSum(X * Y, sp.Symbol("D")) / sp.sqrt(sx * sy), BARE) is None  # other axis


def test_every_rule_has_a_symbolic_proof():
    assert set(ELEMENTWISE_TRIGGERS) | {"log-cosh"} | set(SIDED_TRIGGERS) | set(TENSOR_TRIGGERS) \
        | set(BRANCHED_TRIGGERS) | {"one-minus-cosine", "one-minus-clip", "softplus-pair", "softplus-linear", "sum-into-select", "relative-difference",
                                   "difference-of-norms", "sum-into-static-select", "into-static-select", "product-of-exps",
                                   "power-minus-constant"} == set(RULES)


# proved for x, y > 0 (k > 0 and k + U > 0)
POWERS = [sp.sqrt(1 + x**2) - 1, 3 - 3 * sp.sqrt(x**2 + 1), sp.sqrt(x + 4) - 2 + y,
          (1 + x**2) ** sp.Rational(1, 3) - 1, 1 - 1 / sp.sqrt(1 + x**2), (x**2 + 2) ** sp.Rational(3, 2) - 2 * sp.sqrt(2),
          1 - (1 + x**2) ** 3, (2 + x) ** 4 - 16 + y, (1 + x) ** 2 - 1, 1 - 1 / (1 + x**2) ** 2]


@pytest.mark.parametrize("before", POWERS, ids=str)
def test_power_minus_constant_is_an_identity_in_each_branch(before):
    after = RULES["power-minus-constant"].apply(before, BARE)
    assert after is not None and after != before, f"does not fire on {before}"
    p, q = sp.Symbol("p", positive=True), sp.Symbol("q", positive=True)
    selects = [n for n in sp.preorder_traversal(after) if isinstance(n, ir.Where)]
    assert len(selects) <= 1
    for whole in [after.xreplace({selects[0]: b}) for b in selects[0].args[1:]] if selects else [after]:
        # the near form's max and min are the identity where it is taken: their first argument
        whole = whole.replace(lambda n: isinstance(n, (sp.Max, sp.Min)) and n.has(x),
                              lambda n: next(a for a in n.args if a.has(x)))
        d = elementary(before - unclipped(whole)).subs({x: p, y: q})
        assert sp.simplify(d) == 0, f"{before} -> {whole} is not an identity"
    # and the proof can fail: a wrong constant is caught
    assert sp.simplify(elementary(before - unclipped(whole) - 1).subs({x: p, y: q})) != 0


def test_power_minus_constant_needs_the_constant_and_a_positive_k():
    rule = RULES["power-minus-constant"]
    assert rule.apply(sp.sqrt(1 + x**2) - 2, BARE) is None   # -2 is not sqrt(1)
    assert rule.apply(sp.sqrt(1 + x**2) + 1, BARE) is None   # a sum, nothing cancels
    assert rule.apply((1 + x) ** 2 - 2, BARE) is None        # -2 is not 1**2
    assert rule.apply((1 + x) ** 1 - 1, BARE) is None        # SymPy's own x
    assert rule.apply(sp.sqrt(x**2 - 1) - sp.I, BARE) is None  # k = -1 is not positive
    eps = """
x: {dtype: float, shape: [N]}
t: {dtype: float, shape: [N]}
"""
    # eps may be 0 (min: 0): not rewritten in the general program, only where eps > 0 is known
    prep = prepare(make_spec(eps, "loss = sqrt((x - t)**2 + e**2) - e", "params:\n  e: {default: 0.001, min: 0}\n"))
    assert "power-minus-constant" not in fired_rules(prep)
    assert prep.loss.has(sp.Eq), prep.loss  # split on e == 0: that side keeps the guarded square root
    e = prep.prog.symbols["e"]  # the side e > 0 divides by e + sqrt(...), the conjugate form
    assert any(isinstance(n, sp.Pow) and n.exp == -1 and e in sp.Add.make_args(n.base)
               for n in sp.preorder_traversal(prep.loss)), prep.loss


# --------------------------------------------------------------------------- range rewrites

SQRT_SPEC = """
x: {dtype: float, shape: [N, C]}
a: {dtype: float, shape: [N, C], domain: "[0, inf)"}
b: {dtype: float, shape: [N, C], domain: "[0, 1]"}
"""


def test_sqrt_of_product_is_an_identity_for_non_negative_factors():
    """sqrt(a * b) = sqrt(a) * sqrt(b) and 1/sqrt(a * b) = 1/(sqrt(a) * sqrt(b)) for a, b >= 0
    (SymPy proves it on non-negative symbols); the rule fires exactly where the range analysis
    proves every factor non-negative, and not for a factor of unknown sign, where the identity
    is false (a = b = -1)."""
    rule = RANGE_RULES["sqrt-of-product"]
    prog = build_program(make_spec(SQRT_SPEC, "loss = x + a + b"))
    ctx = context(prog)
    xs, a_, b_, C_ = prog.symbols["x"], prog.symbols["a"], prog.symbols["b"], prog.symbols["C"]
    p, q = sp.symbols("p q", nonnegative=True)
    for before in (sp.sqrt(a_ * b_), 1 / sp.sqrt(a_ * b_), sp.sqrt(ir.ReduceSum(xs**2, C_) * a_ * b_)):
        after = rule.apply(before, ctx)
        assert after is not None and after != before, before
        assert after.is_Mul and len(after.args) == len(before.args[0].args)
        proof = (before - after).subs({a_: p, b_: q, ir.ReduceSum(xs**2, C_): p + q})
        assert sp.simplify(proof) == 0, (before, after)
    assert rule.apply(sp.sqrt(xs * a_), ctx) is None                        # x may be negative
    assert rule.apply(sp.sqrt(2 * a_), ctx) is None                         # a number factor: nothing to gain
    m = sp.Symbol("m", negative=True)
    assert sp.sqrt(m * m) != sp.sqrt(m) * sp.sqrt(m)                        # the identity needs the facts


def test_sqrt_of_product_preserves_the_value():
    spec = make_spec(SQRT_SPEC, "loss = x / sqrt(sum(x**2, axis=C) * sum(a**2, axis=C) + b * a)")
    inputs = {"x": XN, "a": np.abs(XN[::-1]), "b": TN}
    prog, prep = assert_same_values(spec, inputs)
    assert "sqrt-of-product" not in fired_rules(prep)  # a sum under the root: not a product
    spec = make_spec(SQRT_SPEC, "loss = x / sqrt(sum(x**2, axis=C) * sum(a**2, axis=C)) + sqrt(a * b)")
    prog, prep = assert_same_values(spec, inputs)
    assert "sqrt-of-product" in fired_rules(prep)


def test_log_of_reciprocal_agrees_on_the_whole_real_line():
    """log(1/u) and -log(u) in float64 and in the reference evaluator: equal for u > 0, both
    +inf at u = 0, both NaN for u < 0; so the rule needs no range fact. SymPy proves the
    identity for positive u. (At a float -0.0 the written form gives NaN, 1/-0.0 being -inf,
    and the rewrite +inf, the value at 0.)"""
    p = sp.Symbol("p", positive=True)
    assert sp.simplify(sp.log(1 / p) + sp.log(p)) == 0
    u = np.array([-1e300, -2.0, -1e-300, 0.0, 1e-300, 0.5, 3.0, 1e300, np.inf])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        before, after = np.log(1 / u), -np.log(u)
    assert np.array_equal(np.isnan(before), u < 0) and np.array_equal(np.isnan(after), u < 0)
    assert before[u == 0] == after[u == 0] == np.inf
    pos = u > 0
    np.testing.assert_allclose(before[pos], after[pos], rtol=1e-15)
    spec = make_spec("u: {dtype: float, shape: [N]}", "loss = log(1 / u)")
    prog = build_program(spec)
    us = prog.symbols["u"]
    vals = np.array([-2.0, 0.0, 1e-300, 0.5, 3.0])
    got = evaluate(prog, sp.log(1 / us), {"u": vals})
    want = evaluate(prog, RULES["log-of-reciprocal"].apply(sp.log(1 / us), BARE), {"u": vals})
    assert worst_relative(got, want) == 0.0
    assert mpmath.isnan(got[0]) and mpmath.isnan(want[0]) and got[1] == want[1] == mpmath.inf


LOG_SPEC = """
x: {dtype: float, shape: [N, C]}
a: {dtype: float, shape: [N, C], domain: "(0, inf)"}
b: {dtype: float, shape: [N, C], domain: "[0, 1]"}
"""


def test_log_of_power_is_an_identity_for_positive_bases():
    """log(u**k) = k*log(u) for u > 0 (SymPy proves it on a positive symbol); the rule fires
    exactly where the range analysis proves u > 0, and not where u may be 0 or negative,
    where the identity is false (u = -1, k = 2: log(1) = 0, 2*log(-1) is not real)."""
    rule = RANGE_RULES["log-of-power"]
    prog = build_program(make_spec(LOG_SPEC, "loss = x + a + b"))
    ctx = context(prog)
    xs, a_, b_ = prog.symbols["x"], prog.symbols["a"], prog.symbols["b"]
    p, k = sp.Symbol("p", positive=True), sp.Symbol("k", real=True)
    for before in (sp.log(a_**3), sp.log(a_**-2), sp.log(sp.sqrt(a_)), sp.log((1 + sp.exp(xs))**2),
                   sp.log((1 + a_)**k)):
        after = rule.apply(before, ctx)
        assert after is not None and after != before, before
        proof = (before - after).subs({a_: p, sp.exp(xs): p})
        assert sp.simplify(sp.expand_log(proof)) == 0, (before, after)
    assert rule.apply(sp.log(xs**2), ctx) is None       # x may be negative
    assert rule.apply(sp.log(b_**3), ctx) is None       # b may be 0
    assert rule.apply(sp.log(1 / a_), ctx) is None      # the stable log-of-reciprocal's
    assert sp.log((-1) ** 2) != 2 * sp.log(-1)          # the identity needs the facts


def test_log_of_quotient_is_an_identity_for_positive_factors():
    """log(a/b) = log(a) - log(b) for a > 0, b >= 0; fires where the range analysis proves
    every factor above the line positive and every one below non-negative; not for a factor
    that may be 0 above or negative anywhere, nor where every factor is a
    clip away from 0 (nothing overflows: keras' KL divergence keeps its one log)."""
    rule = RANGE_RULES["log-of-quotient"]
    prog = build_program(make_spec(LOG_SPEC, "loss = x + a + b"))
    ctx = context(prog)
    xs, a_, b_ = prog.symbols["x"], prog.symbols["a"], prog.symbols["b"]
    p, q = sp.symbols("p q", positive=True)
    for before in (sp.log(a_ / (1 + sp.exp(xs))), sp.log(2 * a_ / (1 + a_)), sp.log(a_ / (a_ + 1) ** 2)):
        after = rule.apply(before, ctx)
        assert after is not None and after.is_Add, before
        proof = (before - after).subs({a_: p, sp.exp(xs): q})
        assert sp.simplify(sp.expand_log(proof)) == 0, (before, after)
    assert rule.apply(sp.log(xs / a_), ctx) is None                  # x may be negative
    # a denominator that may be 0: both sides are +inf there, as log(1 / u) = -log(u)
    assert rule.apply(sp.log(a_ / b_), ctx) == sp.log(a_) - sp.log(b_)
    assert sp.limit(sp.log(2 / q), q, 0, "+") == sp.limit(sp.log(2) - sp.log(q), q, 0, "+") == sp.oo
    assert rule.apply(sp.log(b_ / a_), ctx) is None                  # b may be 0 above: 0 * inf
    assert rule.apply(sp.log(-a_ / (1 + a_)), ctx) is None           # a negative number factor
    assert rule.apply(sp.log(a_ * (1 + a_)), ctx) is None            # no quotient
    clipped = sp.log(ir.Clip(b_, sp.Float(1e-7), 1) / ir.Clip(xs, sp.Float(1e-7), 1))
    assert rule.apply(clipped, ctx) is None
    assert rule.apply(sp.log(ir.Clip(b_, sp.Float(1e-7), 1) / (1 + a_)), ctx) is not None
    m, n = sp.Symbol("m", negative=True), sp.Symbol("n", negative=True)
    assert sp.simplify(sp.log(m / n) - sp.log(m) + sp.log(n)) != 0  # the identity needs the facts
    # a / (a + d): -log1p(d / a) where |d| < a (no two nearly equal logs), the logs elsewhere
    for before, d in ((sp.log(a_ / (a_ + 1 + sp.exp(xs))), 1 + sp.exp(xs)), (sp.log(a_ / (a_ + b_)), b_)):
        after = rule.apply(before, ctx)
        assert isinstance(after, ir.Where) and after.args[1] == -ir.log1p(d / a_), after
        assert after.args[2] == sp.log(a_) - sp.log(a_ + d)
        for branch in after.args[1:]:
            proof = (before - branch).subs({a_: p, sp.exp(xs): q, b_: q}).rewrite(sp.log)
            assert sp.simplify(sp.expand_log(proof, force=True)) == 0, branch
    # a multiple of a term of the denominator combines with it: the Jensen-Shannon divergence's
    # log(a / ((a + b) / 2)), whose d = (b - a) / 2 is exact where a ~ b
    js = sp.log(a_ / (a_ / 2 + b_ / 2))
    after = rule.apply(js, ctx)
    assert isinstance(after, ir.Where) and after.args[1] == -ir.log1p((b_ / 2 - a_ / 2) / a_), after
    for branch in after.args[1:]:
        proof = (js - branch).subs({a_: p, b_: q}).rewrite(sp.log)
        assert sp.simplify(sp.expand_log(proof, force=True)) == 0, branch
    # nothing combines (two independent inputs): the two logs, as before
    assert rule.apply(sp.log(a_ / (b_ + sp.exp(xs))), ctx) == sp.log(a_) - sp.log(b_ + sp.exp(xs))


def test_log_range_rewrites_preserve_the_value():
    spec = make_spec(LOG_SPEC, "loss = log(a**3) * x + log(a / (1 + exp(x))) + log((1 + a)**2 / a**2)")
    inputs = {"x": XN, "a": np.abs(XN[::-1]) + 0.1, "b": TN}
    prog, prep = assert_same_values(spec, inputs)
    assert {"log-of-power", "log-of-quotient"} <= fired_rules(prep)


MLSM = """
x: {dtype: float, shape: [N, C]}
y: {dtype: float, shape: [N, C], domain: "{0, 1}"}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_multilabel_soft_margin_written_with_reciprocals_is_finite_in_float32(backend, tmp_path):
    """MultiLabelSoftMarginLoss as its docs write it, log((1 + exp(-x))**-1), becomes
    -softplus(-x): finite and right at x = +-1e2 in float32 (as written 1/(1 + exp(100))
    rounds to 0 and its log is -inf)."""
    from losscc import verify
    from losscc.backends import get
    from losscc.emit import compile_spec
    from losscc.reference import reference

    spec = make_spec(MLSM, "loss = -sum(y * log((1 + exp(-x))**-1)"
                           " + (1 - y) * log(exp(-x) * (1 + exp(-x))**-1), axis=C) / C")
    prep = prepare(spec)
    assert "log-of-reciprocal" in fired_rules(prep) and prep.loss.has(ir.softplus), prep.loss
    inputs = {"x": np.array([[1e2, -1e2, 0.5], [-1e2, 1e2, -3.0]]), "y": np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])}
    ref = reference(build_program(spec), inputs, {})
    path = tmp_path / f"mlsm_{backend}.py"
    path.write_text(compile_spec(spec, get(backend)))
    mod = verify.load_module(path, f"mlsm_recip_{backend}")
    vals, grads = verify.runner(backend).run(mod, spec, verify.CaseData("extreme", "test", inputs, {}),
                                             "float32", "eager", ["none", "mean"])
    for red in ("none", "mean"):
        assert np.all(np.isfinite(vals[red])), vals[red]
        np.testing.assert_allclose(vals[red], ref.values[red], rtol=2e-5, atol=1e-6)
    assert np.all(np.isfinite(grads["x"])), grads["x"]
    np.testing.assert_allclose(grads["x"], ref.grads["x"], rtol=2e-5, atol=1e-6)
    # first sample: softplus(-100) + softplus(100) + (0.5 + softplus(-0.5)), over 3 classes
    assert abs(float(vals["none"][0]) - (100 + 0.5 + np.log1p(np.exp(-0.5))) / 3) < 1e-4


# --------------------------------------------------------------------------- numerical equivalence

RNG = np.random.default_rng(7)
N, C = 4, 5
XN = RNG.normal(0.0, 2.0, size=(N, C))
YN = RNG.integers(0, C, size=N)
TN = RNG.uniform(0.0, 1.0, size=(N, C))
MAT = """
x: {dtype: float, shape: [N, C]}
t: {dtype: float, shape: [N, C], domain: "[0, 1]"}
y: {dtype: int, shape: [N], domain: "[0, C)"}
"""
MAT_INPUTS = {"x": XN, "t": TN, "y": YN}


# rule -> formulas that must make it fire (on the MAT inputs)
NUMERIC_TRIGGERS = {
    "softmax-as-exp-log-softmax": ["loss = t * softmax(x, axis=C)",
                                   "loss = sum((t - softmax(x, axis=C))**2, axis=C)"],
    "gather-through-exp": ["loss = exp(x)[y]", "loss = -log(softmax(x, axis=C)[y])"],
    "log-exp": ["loss = log(exp(x)) * t", "loss = log(exp(x * t + 1))",
                "loss = -log(softmax(x, axis=C)[y])"],
    "logsumexp": ["loss = log(sum(exp(x), axis=C))", "loss = log(sum(exp(2 * x - t), axis=C)) - x[y]"],
    "one-minus-sigmoid": ["loss = 1 - sigmoid(x)", "loss = t * (1 - sigmoid(x))**2"],
    "one-minus-weighted-sigmoids": ["loss = 1 - t * sigmoid(x) - (1 - t) * sigmoid(-x)",
                                    "loss = (1 - t * sigmoid(x) - (1 - t) * (1 - sigmoid(x)))**2"],
    "log-sigmoid": ["loss = log(sigmoid(x))",
                    "loss = -(t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x)))"],
    "log1p": ["loss = log(1 + x**2)", "loss = log(1 + t)", "loss = log(1 + t * exp(x))"],
    "softplus": ["loss = log(1 + exp(x))", "loss = t * log(exp(-x) + 1)",
                 "loss = log1p(exp(2 * x))"],
    "sum-into-select": ["loss = log(exp(x) + exp(t)) - x", "loss = log(exp(2 * x) + exp(t)) - t + x**2"],
    "softplus-linear": ["loss = x - x * t + log(1 + exp(-x))", "loss = log(sigmoid(x)) - x",
                        "loss = t * log(1 + exp(x + 1)) - 2 * t * x - 2 * t"],
    "softplus-pair": ["loss = -(t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x)))",
                      "loss = t**2 * softplus(-x * t) + 3 * softplus(x * t) + x"],
    "log-add-exp": ["loss = log(exp(x) + exp(t))", "loss = log(exp(x * t) + exp(-x))"],
    "log-of-exp-product": ["loss = log(t * exp(x))", "loss = log(2 * exp(x) / (1 + t))"],
    "log-of-reciprocal": ["loss = t * log((1 + exp(-x))**-1)", "loss = log(1 / (1 + t)) * x",
                          "loss = log(1 / (x**2 + t + 1))"],
    "expm1": ["loss = exp(x) - 1", "loss = 1 - exp(x)", "loss = exp(t) - 1 + x",
              "loss = (1 - exp(-t)) * x"],
    "log-cosh": ["loss = log(cosh(x))", "loss = t * log(cosh(x - t))"],
    "logsumexp-minus-member": ["loss = logsumexp(x, axis=C) - x[y]", "loss = log(sum(exp(x), axis=C)) - x[y] + t"],
    "one-minus-ratio": ["loss = 1 - t / (t + x**2 + 1e-7)", "loss = x * (1 - (t + 1) / (t + exp(x) + 1))"],
    "power-minus-constant": ["loss = sqrt(1 + (x - t)**2) - 1", "loss = t * ((1 + x**2 / 4)**0.25 - 1)",
                             "loss = 2 - 2 / sqrt(1 + x**2)", "loss = t * (1 - (1 - (x / 3)**2)**3)"],
    "one-minus-clip": ["loss = -log(1 - clip(t, 1e-7, 1 - 1e-7)) * x",
                       "loss = x**2 * (1 - clip(t, 0.25, 1 - 0.25)) + t"],
    "relative-difference": ["loss = abs(x - t) / max(abs(t), 1e-7)", "loss = x**2 * (t - x) / t",
                            "loss = (t**2 + 2 * x * t) / abs(x * t)"],
    "difference-of-norms": ["loss = sqrt(sum((x - t)**2, axis=C)) - sqrt(sum((x + t**2)**2, axis=C))",
                            "loss = max(norm(x - t + 1e-6, axis=C) - norm(x - 2 * t + 1e-6, axis=C) + 1, 0)"],
    "product-of-exps": ["loss = (t + exp(x)) / exp(2 * x)", "loss = exp(x) * exp(t - x) * 3"],
    "into-static-select": ["loss = -log(where(flag, softmax(x, axis=C), clip(t, 1e-7, 1))[y])",
                           "loss = log(where(flag, exp(x), 1 + t**2))",
                           "loss = -log(where(flag, exp(x), 1 / C)[y])"],  # a branch constant along C
    "sum-into-static-select": ["loss = norm(x - t, axis=C) - where(flag, norm(t, axis=C), norm(x + t, axis=C))",
                               "loss = 2 + where(flag, -norm(x + 1, axis=C), norm(x - t, axis=C)) * 3 "
                               "- 3 * norm(x, axis=C)"],
    "linear-tail": ["loss = Piecewise((0.5 * abs(x - t)**2, abs(x - t) < 1), (abs(x - t) - 0.5, True))",
                    "loss = t * Piecewise((x**2 + x, x < 2), (5 * x - 4, True))"],
    "one-minus-cosine": [
        "loss = 1 - sum(x * t, axis=C) / sqrt((sum(x**2, axis=C) + 1e-12) * (sum(t**2, axis=C) + 1e-12))",
        "loss = 1 - sum(x * t, axis=C) / (sqrt(max(sum(x**2, axis=C), 0.5)) * sqrt(max(sum(t**2, axis=C), 0.5)))",
        "loss = 1 - sum(x * (x + t / 8), axis=C) / sqrt(sum(x**2, axis=C) * sum((x + t / 8)**2, axis=C))",
        # normalize() and torch's clamped norms: max(sqrt(S), e) is max(S, e**2)**(1/2)
        "loss = 1 - sum(normalize(x, axis=C, eps=0.5) * normalize(t, axis=C, eps=1e-8), axis=C)",
        "loss = 1 - sum(x * t, axis=C) / (max(norm(x, axis=C), 1e-8) * max(norm(t, axis=C), 2.0))"],
}


def test_every_rule_has_a_numerical_check():
    assert set(NUMERIC_TRIGGERS) == set(RULES)


@pytest.mark.parametrize("name,formula", [(n, f) for n, fs in NUMERIC_TRIGGERS.items() for f in fs])
def test_rule_preserves_the_value(name, formula):
    extra = "params:\n  flag: {default: false}\n" if "flag" in formula else ""
    spec = make_spec(MAT, formula, extra)
    for params in ({"flag": True}, {"flag": False}) if extra else (None,):
        prog, prep = assert_same_values(spec, MAT_INPUTS, params)
    assert name in fired_rules(prep), f"{name} did not fire on {formula}: {sorted(fired_rules(prep))}"
    # the rule changed the IR, and each Fired records an equal pair (checked at the nodes too)
    assert prep.loss != prog.loss
    for f in prep.fired:
        assert f.before != f.after


def test_fired_records_are_pairs_of_equal_values():
    """Each (before, after) node pair optimize() records evaluates to the same values."""
    spec = make_spec(MAT, "loss = -(t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x)))"
                     " + log(1 + t**2) * (exp(x) - 1) - log(softmax(x, axis=C)[y]) + log(sum(exp(x), axis=C))"
                     " + log(cosh(x - t)) + Piecewise((0.5 * x**2, x < 1), (x - 0.5, True))"
                     " + log(1 + exp(t * x)) + log(exp(x) + exp(2 * t)) + log(t * exp(x))"
                     " + log(1 / (2 + x**2))"
                     " + (1 - t * sigmoid(x) - (1 - t) * sigmoid(-x)) * t"
                     " + t * (1 - sum(x * t, axis=C) / sqrt((sum(x**2, axis=C) + 1) * sum(t**2, axis=C)))"
                     " + x * (1 - t / (t + x**2 + 1)) + t * (logsumexp(x, axis=C) - x[y])"
                     " + x * log(1 - clip(t, 1e-7, 1 - 1e-7)) + abs(x - t) / max(abs(t), 1e-7)"
                     " + norm(x - t, axis=C) - norm(x + 1, axis=C) + t * (sqrt(1 + x**2) - 1)"
                     " + (t + exp(x)) / exp(2 * x) + t * (log(1 + exp(x - t)) - x + t) - x * t"
                     " + (log(exp(x) + exp(t**2)) - t**2) * t")
    prog = build_program(spec)
    fired = []
    optimize(prog.loss, fired=fired)
    # the static-select rules read the program's boolean parameters, which optimize() has not
    assert {f.rule for f in fired} == set(RULES) - {"sum-into-static-select", "into-static-select"}
    for f in fired:
        a = evaluate(prog, f.before, MAT_INPUTS)
        b = evaluate(prog, f.after, MAT_INPUTS)
        assert worst_relative(a, b) <= EQUAL_RTOL, f


@pytest.mark.parametrize("name,formula", [
    ("one-minus-sigmoid", "loss = log(1 - sigmoid(x))"),
    ("log1p", "loss = log(1 + x**2)"),
    ("expm1", "loss = exp(x) - 1"),
    ("one-minus-sigmoid", "loss = log(1.0 - sigmoid(x))"),
    ("log1p", "loss = log(1.0 + x**2)"),
    ("expm1", "loss = exp(x) - 1.0"),
    ("softplus", "loss = log(1.0 + exp(x))"),
])
def test_rules_fire_on_a_float_literal_one(name, formula):
    spec = make_spec(MAT, formula)
    prog, prep = assert_same_values(spec, MAT_INPUTS)
    assert name in fired_rules(prep), f"{name} did not fire on {formula}: {prep.loss}"


def test_optimize_is_idempotent_and_reaches_a_fixpoint():
    spec = make_spec(MAT, "loss = log(1 - sigmoid(x)) + log(sum(exp(x), axis=C)) - log(softmax(x, axis=C)[y])")
    prog = build_program(spec)
    once = optimize(prog.loss)
    fired = []
    assert optimize(once, fired=fired) == once
    assert fired == []
    assert not once.has(ir.sigmoid, ir.Softmax)


def test_large_inputs_preserve_the_value():
    """At |x| = 1000 the evaluator raises its precision; both forms still agree."""
    big = {"x": np.array([[1000.0, -1000.0, 0.5, 40.0, -40.0]] * N), "t": TN, "y": YN}
    for formula in ["loss = -(t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x)))",
                    "loss = log(sum(exp(x), axis=C)) - log(softmax(x, axis=C)[y])",
                    "loss = t * (1 - sigmoid(x)) + log(1 + exp(-x))"]:
        assert_same_values(make_spec(MAT, formula), big)


# --------------------------------------------------------------------------- guards


def test_guard_branches_preserves_the_value_of_where_log():
    spec = make_spec("x: {dtype: float, shape: [N]}", "loss = where(x > 0, log(x), 0)")
    x_ = np.array([-2.0, -0.5, 0.0, 1e-3, 0.7, 3.0])
    prog, prep = assert_same_values(spec, {"x": x_})
    assert fired_rules(prep) == {"guard-untaken-branch"}
    # the log's argument is guarded inside the branch: log(where(x > 0, x, 1))
    logs = [n for n in sp.preorder_traversal(prep.loss) if isinstance(n, sp.log)]
    assert len(logs) == 1 and isinstance(logs[0].args[0], ir.Where)
    # and the guarded branch is finite everywhere, the unguarded one is not
    (branch, _), _ = prep.loss.args
    assert all(mpmath.isfinite(v) for v in evaluate(prep.prog, branch, {"x": x_}).reshape(-1))
    (raw, _), _ = prog.loss.args
    assert not all(mpmath.isfinite(v) for v in evaluate(prog, raw, {"x": x_}).reshape(-1))


@pytest.mark.parametrize("formula", [
    "loss = where(x != 0, 1 / x, 0)",
    "loss = where(x > 1, sqrt(x - 1) + log(x), x**(-2.0))",
    "loss = Piecewise((log(x), x > 2), (1 / (x - 1), x > 1), (x**0.5, x > 0), (0, True))",
    "loss = where(x > 0, x * log(x), 0) + where(abs(x) > 1, log(abs(x) - 1), 0)",
])
def test_guard_branches_preserves_the_value(formula):
    spec = make_spec("x: {dtype: float, shape: [N]}", formula)
    x_ = np.array([-3.0, -1.0, -0.25, 0.0, 0.5, 1.0, 1.5, 2.0, 4.0])
    prog, prep = assert_same_values(spec, {"x": x_})
    assert "guard-untaken-branch" in fired_rules(prep)


def test_guard_branches_leaves_huber_unchanged():
    spec = make_spec("""
        input: {dtype: float, shape: ["*S"]}
        target: {dtype: float, shape: ["*S"]}
        """, """
        d = abs(input - target)
        loss = Piecewise((0.5 * d**2, d < delta), (delta * (d - 0.5 * delta), True))
        """, "params:\n  delta: {default: 1.0, min: 0}")
    prog = build_program(spec)
    fired = []
    assert guard_branches(prog.loss, prog, fired) == prog.loss
    assert fired == []
    assert guard_gradients(prog.loss, prog, fired) == prog.loss
    assert fired == []
    # the only rule that fires is the select-free form of the linear tail, which needs no guard
    assert {f.rule for f in prepare(spec).fired} == {"linear-tail"}
    assert not prepare(spec).loss.has(sp.Piecewise)


def test_guard_branches_leaves_provably_positive_arguments_alone():
    spec = make_spec("x: {dtype: float, shape: [N]}\np: {dtype: float, shape: [N], domain: \"(0, 1)\"}",
                     "loss = where(x > 0, log(x**2 + 1) + log(p) / sqrt(eps + x**2), 0)",
                     "params:\n  eps: {default: 1.0e-6, min: 1.0e-12}")
    prog = build_program(spec)
    fired = []
    assert guard_branches(prog.loss, prog, fired) == prog.loss
    assert fired == []


def _branches(expr):
    """(value, condition) of every branch of every Piecewise in expr."""
    for node in sp.preorder_traversal(expr):
        if isinstance(node, sp.Piecewise):
            yield from ((p.expr, p.cond) for p in node.args)


@pytest.mark.parametrize("formula", [
    "loss = where(x > 0, log(x), 0)",
    "loss = where(x > 0, x / (x + x**2), 0) + where(x > 1, sqrt(x - 1), 0)",
    "loss = where(x > -1, log(1 + x), 0)",
    "loss = where(x < 1, log1p(-x), 0)",
])
def test_prepared_branches_are_finite_where_not_taken(formula):
    """The point of the guards: every branch of the prepared loss is finite at every input
    (0 * inf in the gradient of an untaken branch is NaN); the value is unchanged."""
    spec = make_spec("x: {dtype: float, shape: [N]}", formula)
    inputs = {"x": np.array([-3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0])}
    prog, prep = assert_same_values(spec, inputs)
    for value, _ in _branches(prep.loss):
        got = evaluate(prep.prog, value, inputs).reshape(-1)
        assert all(mpmath.isfinite(v) for v in got), f"branch {value} of {prep.loss}: {list(got)}"


def test_guard_branches_guards_where_log_directly():
    spec = make_spec("x: {dtype: float, shape: [N]}", "loss = where(x > 0, log(x), 0)")
    prog = build_program(spec)
    fired = []
    out = guard_branches(prog.loss, prog, fired)
    c = sp.Gt(prog.symbols["x"], 0)
    assert out == sp.Piecewise((sp.log(ir.Where(c, prog.symbols["x"], 1)), c), (0, True))
    assert [f.rule for f in fired] == ["guard-untaken-branch"]


@pytest.mark.parametrize("formula,domain", [
    ("loss = sqrt(x)", "[0, inf)"),
    ("loss = x**1.5 + x**0.25", "[0, inf)"),
    ("loss = (1 - p)**gamma * log(p + 1)", "[0, 1]"),
    ("loss = sqrt(x**2 + t)", "real"),
])
def test_guard_gradients_preserves_the_value(formula, domain):
    spec = make_spec(f"x: {{dtype: float, shape: [N], domain: \"{domain}\"}}\n"
                     "t: {dtype: float, shape: [N], domain: \"[0, 1]\"}\n"
                     "p: {dtype: float, shape: [N], domain: \"[0, 1]\"}",
                     formula,
                     "params:\n  gamma: {default: 2.0, min: 0}")
    xs = np.array([0.0, 1e-8, 0.3, 1.0, 2.5, 7.0])
    ts = np.array([0.0, 0.0, 0.5, 1.0, 0.25, 0.0])
    ps = np.array([0.0, 1.0, 0.5, 1e-9, 1.0, 0.9])
    for gamma in (2.0, 0.5, 0.0):
        prog, prep = assert_same_values(spec, {"x": xs, "t": ts, "p": ps}, {"gamma": gamma})
        assert "gradient-guard-pow" in fired_rules(prep)


def test_guard_gradients_structure_and_skips():
    spec = make_spec("x: {dtype: float, shape: [N], domain: \"[0, inf)\"}\n"
                     "q: {dtype: float, shape: [N], domain: \"(0, inf)\"}",
                     "loss = sqrt(x) + sqrt(q) + x**2 + x**(-0.5) + q**0.3")
    prog = build_program(spec)
    fired = []
    out = guard_gradients(prog.loss, prog, fired)
    # only sqrt(x) is guarded: integer and negative powers are left, q is provably positive
    assert [f.before for f in fired] == [sp.sqrt(prog.symbols["x"])]
    xs = prog.symbols["x"]
    pos = sp.Gt(xs, 0)
    assert fired[0].after == ir.Where(pos, sp.sqrt(ir.Where(pos, xs, 1)), sp.sqrt(ir.StopGradient(xs)))
    assert out.has(ir.Where)
    inputs = {"x": np.array([0.0, 0.5, 2.0]), "q": np.array([0.1, 1.0, 3.0])}
    assert worst_relative(evaluate(prog, prog.loss, inputs), evaluate(prog, out, inputs)) <= EQUAL_RTOL


# --------------------------------------------------------------------------- is_positive


def test_is_positive():
    spec = make_spec("""
        x: {dtype: float, shape: [N, D]}
        q: {dtype: float, shape: [N, D], domain: "(0, inf)"}
        z: {dtype: float, shape: [N, D], domain: "[0, inf)"}
        s: {dtype: float, shape: [N, D], domain: "{1, 2}"}
        """, "loss = x + q + z + s", """
        params:
          eps: {default: 1.0e-6, min: 1.0e-12}
          zero_ok: {default: 0.5, min: 0}
          free: {default: 0.5}
          flag: {default: true}
        """)
    prog = build_program(spec)
    S = prog.symbols
    x_, q, z, s, D = S["x"], S["q"], S["z"], S["s"], S["D"]
    assert is_positive(ir.ReduceSum(x_**2, D) + sp.Float(1e-12), prog)
    assert is_positive(S["eps"], prog)
    assert is_positive(q, prog) and is_positive(s, prog)
    assert is_positive(q * S["eps"] + z, prog)
    assert is_positive(sp.sqrt(q), prog) and is_positive(1 / q, prog)
    assert is_positive(ir.Size(S["N"]), prog) and is_positive(sp.pi, prog)
    # not provably positive
    assert not is_positive(x_, prog)                              # a plain float input
    assert not is_positive(ir.ReduceSum(x_**2, D), prog)           # may be 0
    assert not is_positive(z, prog) and is_nonneg(z, prog)
    assert not is_positive(S["zero_ok"], prog) and is_nonneg(S["zero_ok"], prog)
    assert not is_positive(S["free"], prog) and not is_positive(S["flag"], prog)
    assert not is_positive(x_**2, prog) and is_nonneg(x_**2, prog)
    assert not is_positive(-q, prog) and not is_positive(q - 1, prog)
    assert not is_positive(sp.Float(0.0), prog) and not is_positive(sp.Integer(-3), prog)


# --------------------------------------------------------------------------- float64: naive vs rewritten


def _f64(expr, *args):
    """expr (elementwise IR in the symbols x, y) in float64 NumPy, with stable sigmoid/softplus."""
    ns = {
        "sigmoid": lambda v: np.exp(-np.logaddexp(0.0, -v)),
        "softplus": lambda v: np.logaddexp(0.0, v),
        "log1p": np.log1p, "expm1": np.expm1, "Clip": np.clip, "Where": np.where,
    }
    f = sp.lambdify([x, y], expr, modules=[ns, "numpy"])
    with np.errstate(all="ignore"):
        return np.float64(f(*args))


HARD = [
    ("log1p", sp.log(1 + x), 1e-18, lambda v: mpmath.log1p(v)),
    ("expm1", sp.exp(x) - 1, 1e-18, lambda v: mpmath.expm1(v)),
    ("expm1", 1 - sp.exp(x), -3e-17, lambda v: -mpmath.expm1(v)),
    ("log-sigmoid", sp.log(ir.sigmoid(x)), -800.0, lambda v: -mpmath.log1p(mpmath.exp(-v))),
    ("one-minus-sigmoid", 1 - ir.sigmoid(x), 40.0, lambda v: 1 / (1 + mpmath.exp(v))),
    ("one-minus-weighted-sigmoids", 1 - ir.sigmoid(x) / 3 - 2 * ir.sigmoid(2 * x) / 3, 40.0,
     lambda v: (1 / (1 + mpmath.exp(v)) + 2 / (1 + mpmath.exp(2 * v))) / 3),
    ("log-cosh", sp.log(sp.cosh(x)), 800.0, lambda v: mpmath.log(mpmath.cosh(v))),
    ("log-cosh", sp.log(sp.cosh(x)), -800.0, lambda v: mpmath.log(mpmath.cosh(v))),
    ("log-cosh", sp.log(sp.cosh(x)), 1e-8, lambda v: mpmath.log(mpmath.cosh(v))),
    ("softplus", sp.log(1 + sp.exp(x)), 800.0, lambda v: mpmath.log1p(mpmath.exp(v))),
    ("softplus", sp.log(1 + sp.exp(-x)), -750.0, lambda v: mpmath.log1p(mpmath.exp(-v))),
    ("softplus", -sp.log(ir.sigmoid(x)), -800.0, lambda v: mpmath.log1p(mpmath.exp(-v))),
    ("log-add-exp", sp.log(sp.exp(x) + sp.exp(x - 1)), 800.0, lambda v: v + mpmath.log1p(mpmath.exp(-1))),
    ("log-add-exp", sp.log(sp.exp(x) + sp.exp(-x)), -710.0, lambda v: -v + mpmath.log1p(mpmath.exp(2 * v))),
    ("log-of-exp-product", sp.log(3 * sp.exp(x)), 800.0, lambda v: v + mpmath.log(3)),
    ("power-minus-constant", sp.sqrt(1 + x**2) - 1, 1e-9, lambda v: mpmath.sqrt(1 + v**2) - 1),
    ("power-minus-constant", (1 + x**2) ** sp.Rational(1, 3) - 1, 1e-9, lambda v: mpmath.cbrt(1 + v**2) - 1),
    ("power-minus-constant", 1 - 1 / sp.sqrt(1 + x), 1e-17, lambda v: 1 - 1 / mpmath.sqrt(1 + v)),
    ("power-minus-constant", 1 - (1 - x**2) ** 3, 1e-9, lambda v: 1 - (1 - v**2) ** 3),
    ("power-minus-constant", (1 + x) ** -2 - 1, 1e-17, lambda v: (1 + v) ** -2 - 1),
]


def _naive(e):
    """Naive float64: sigmoid as the textbook 1/(1 + exp(-x))."""
    return e.replace(lambda n: isinstance(n, ir.sigmoid), lambda n: 1 / (1 + sp.exp(-n.args[0])))


@pytest.mark.parametrize("name,before,point,exact", HARD, ids=[h[0] + "@" + str(h[2]) for h in HARD])
def test_rewrite_fixes_float64_at_a_hard_point(name, before, point, exact):
    after = optimize(before)
    assert after != before
    with mpmath.workdps(60):
        truth = float(exact(mpmath.mpf(point)))
    naive = _f64(_naive(before), point, 0.0)
    good = _f64(after, point, 0.0)
    assert good == pytest.approx(truth, rel=1e-14, abs=0)
    assert not np.isfinite(naive) or abs(naive - truth) > 0.5 * abs(truth), (naive, truth)


def test_log_cosh_is_accurate_to_a_few_ulps_from_1e_minus_10_to_800():
    """The rewritten log(cosh(x)) per element, float64, against 60 digits: below 4 ulps of
    relative error at every |x| in [1e-10, 800]; the single far form |x| + log1p(exp(-2|x|))
    - log(2) is wrong by more than 100% near 0 (its terms cancel)."""
    after = optimize(sp.log(sp.cosh(x)))
    points = np.concatenate([np.geomspace(1e-10, 800.0, 400), [1.999999, 2.0, 2.000001, 0.5, 1.0]])
    points = np.concatenate([points, -points])
    got = np.array([_f64(after, v, 0.0) for v in points])
    with mpmath.workdps(60):
        truth = np.array([float(mpmath.log(mpmath.cosh(mpmath.mpf(v)))) for v in points])
    ulps = np.abs(got - truth) / np.spacing(np.abs(truth))
    assert ulps.max() <= 4, (points[ulps.argmax()], ulps.max())
    far = abs(x) + ir.log1p(sp.exp(-2 * abs(x))) - sp.log(2)
    assert abs(_f64(far, 1e-8, 0.0) - 5e-17) > 5e-17


def test_logsumexp_fixes_float64_overflow():
    v = np.array([1000.0, 1000.0])
    with np.errstate(over="ignore"):
        naive = np.log(np.sum(np.exp(v)))
    m = np.max(v)
    stable = m + np.log(np.sum(np.exp(v - m)))  # what LogSumExp lowers to
    assert naive == np.inf
    assert stable == pytest.approx(1000 + np.log(2.0), rel=1e-15)
    spec = make_spec("x: {dtype: float, shape: [N, C]}", "loss = log(sum(exp(x), axis=C))")
    prep = prepare(spec)
    assert fired_rules(prep) == {"logsumexp"}
    ref = evaluate(prep.prog, prep.loss, {"x": v[None, :]})
    assert float(ref.reshape(-1)[0]) == pytest.approx(stable, rel=1e-15)


def test_log_softmax_fixes_float64_underflow():
    v = np.array([0.0, 800.0])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        naive = np.log(np.exp(v - v.max()) / np.sum(np.exp(v - v.max())))[0]   # log(softmax)
        textbook = np.log(np.exp(v) / np.sum(np.exp(v)))[0]
    stable = (v - (v.max() + np.log(np.sum(np.exp(v - v.max())))))[0]      # log_softmax
    assert naive == -np.inf and not np.isfinite(textbook)
    assert stable == pytest.approx(-800.0, rel=1e-15)
    spec = make_spec("x: {dtype: float, shape: [N, C]}\ny: {dtype: int, shape: [N], domain: \"[0, C)\"}",
                     "loss = log(softmax(x, axis=C)[y])")
    prep = prepare(spec)
    assert prep.loss == ir.Gather(ir.LogSoftmax(prep.prog.symbols["x"], sp.Symbol("C")),
                                  prep.prog.symbols["y"], sp.Symbol("C"))


# --------------------------------------------------------------------------- the repository's specs


SPECS = sorted(glob.glob(str(ROOT / "specs" / "*.yaml")))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: Path(p).stem)
def test_repository_spec_keeps_its_value_after_prepare(path):
    spec = load_spec(path)
    prog = build_program(spec)
    prep = prepare(spec)
    for case in random_cases(spec, 2, seed=11):
        before = evaluate(prog, prog.loss, case.inputs, case.params, case.learnable)
        after = evaluate(prep.prog, prep.loss, case.inputs, case.params, case.learnable, prep.masks)
        if prep.masks:  # prepare() zeroes ignored positions in the loss; so does the evaluator's run()
            with mpmath.workdps(digits_for(case.inputs, case.learnable)):
                ev = Evaluator(prog, case.inputs, case.params, case.learnable)
                _, valid = ev.env(case.inputs)
            before = np.where(np.broadcast_to(valid, np.broadcast_shapes(before.shape, valid.shape)),
                              before, mpmath.mpf(0))
        assert worst_relative(before, after) <= EQUAL_RTOL, (case.id, prog.loss, prep.loss)


# --------------------------------------------------------------------------- float32, both backends


VEC2 = "x: {dtype: float, shape: [N]}\nw: {dtype: float, shape: [N]}"
X32 = np.array([-100.0, -3.0, 0.0, 0.5, 3.0, 100.0, 1000.0])
W32 = np.array([1.0, 2.0, 0.5, 1.0, 3.0, 1.0, 2.0])

# the family of log(1 + exp(.)) forms and the branches that overflow when not taken: every one
# overflows float32 at |x| = 100 or 1000 as written (value or gradient inf or NaN)
FLOAT32_EXTREME = [
    ("softplus", "loss = w * log(1 + exp(x))"),
    ("softplus", "loss = w * log(exp(x) + 1)"),
    ("softplus", "loss = w * log(1 + exp(-x))"),
    ("log-sigmoid", "loss = -w * log(sigmoid(x))"),
    ("log-sigmoid", "loss = w * log(1 - sigmoid(x))"),
    ("log-add-exp", "loss = log(exp(w * x) + exp(-x))"),
    ("log-of-exp-product", "loss = log(w * exp(x))"),
    ("log-of-reciprocal", "loss = w * log((1 + exp(-x))**-1)"),
    ("log-of-reciprocal", "loss = w * log(1 / (1 + exp(x)))"),
    ("guard-untaken-branch", "loss = where(x < 0, w * exp(x), w * x + 1)"),
    ("guard-untaken-branch", "loss = where(x < 1, w * expm1(x), w * x)"),
    ("guard-untaken-branch", "loss = where(abs(x) < 5, w * cosh(x), w)"),
    ("guard-untaken-branch", "loss = Piecewise((w * x**3, x < 1), (w * x, True))"),
]


def _float32_run(spec, backend, tag, inputs, tmp_path):
    from losscc import verify
    from losscc.backends import get
    from losscc.emit import compile_spec

    path = tmp_path / f"{tag}_{backend}.py"
    path.write_text(compile_spec(spec, get(backend)))
    mod = verify.load_module(path, f"{tag}_{backend}")
    case = verify.CaseData("extreme", "test", inputs, {})
    return verify.runner(backend).run(mod, spec, case, "float32", "eager", ["none"])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rule,formula", FLOAT32_EXTREME)
def test_float32_extreme_values_and_gradients_are_finite_and_right(rule, formula, backend, tmp_path):
    """Value and gradient in float32 (eager) at |x| up to 1000 are finite and match the
    40-digit reference of the formula as written; the rule that makes them so fired."""
    from losscc.reference import reference

    x32 = X32 if "x**3" not in formula else np.array([-3.0, 0.0, 0.5, 3.0, 1e15, 1e20])
    inputs = {"x": x32, "w": W32[: len(x32)]}
    spec = make_spec(VEC2, formula)
    assert rule in fired_rules(prepare(spec)), (formula, fired_rules(prepare(spec)))
    ref = reference(build_program(spec), inputs, {})
    tag = "extreme_" + str(abs(hash(formula)) % 10**8)
    vals, grads = _float32_run(spec, backend, tag, inputs, tmp_path)
    want = ref.values["none"]
    finite = np.abs(want) < 3e38  # what float32 can hold
    assert np.all(np.isfinite(vals["none"][finite])), vals["none"]
    np.testing.assert_allclose(vals["none"][finite], want[finite], rtol=2e-5, atol=1e-6)
    for name in ("x", "w"):
        g, gw = grads[name], ref.grads[name]
        ok = np.abs(gw) < 3e38
        assert np.all(np.isfinite(g[ok])), (name, g)
        np.testing.assert_allclose(g[ok], gw[ok], rtol=2e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("backend", BACKENDS)
def test_generated_log_cosh_keeps_relative_accuracy_near_zero(backend):
    """The committed log_cosh, float64 eager: per-element relative error below 1e-14 from
    |d| = 1e-10 to 800 (the single far form gave 1.11e-16 for 5e-17 at d = 1e-8). MindSpore
    needs its float64 _log1p/_expm1 helpers for it: its CPU log1p computes log(1 + u)
    (log1p(5e-21) = 0) and its expm1 is off by 8e-8 relative at 1e-10."""
    from losscc import verify

    spec = load_spec(ROOT / "specs" / "log_cosh.yaml")
    mod = verify.load_module(ROOT / "generated" / backend / "log_cosh.py", f"rw_log_cosh_{backend}")
    d = np.array([1e-10, -1e-8, 3e-5, 1e-3, 0.5, -1.9, 2.0, 2.1, 30.0, -800.0])
    case = verify.CaseData("small", "test", {"input": d, "target": np.zeros_like(d)}, {})
    vals, _ = verify.runner(backend).run(mod, spec, case, "float64", "eager", ["none"])
    with mpmath.workdps(60):
        truth = np.array([float(mpmath.log(mpmath.cosh(mpmath.mpf(v)))) for v in d])
    if backend == "mindspore":
        import mindspore as ms_
        from mindspore import ops

        tiny = ms_.Tensor(np.array([5e-21, 1e-10]), ms_.float64)
        assert ops.log1p(tiny).asnumpy()[0] == 0.0  # the kernel's limit, not the formula's
        assert abs(ops.expm1(tiny).asnumpy()[1] / 1e-10 - 1) > 1e-9
    np.testing.assert_allclose(vals["none"], truth, rtol=1e-14, atol=0)


def test_one_minus_ratio_needs_the_numerator_inside_the_denominator():
    """Only a numerator made of the denominator's own terms cancels exactly: 1 - x / (y + 1)
    and 1 + (x - y) / (x + 1) (a GIoU's enclosing term) keep their written form."""
    rule = RULES["one-minus-ratio"]
    assert rule.apply(1 - x / (y + 1), BARE) is None
    assert rule.apply(1 + (x - y) / (x + 1), BARE) is None
    assert rule.apply(2 - x / (x + 1), BARE) is None
    after = rule.apply(1 - x / (x + y + 1), BARE)
    assert isinstance(after, ir.Where) and after.args[1] == (y + 1) / (x + y + 1)


def test_one_minus_ratio_fires_on_an_intersection_over_union():
    """1 - IoU with the union written out (a1 + a2 - inter + eps): of two identical boxes the
    written form is off by an ulp of 1, about 1e-9 of the result eps / (a + eps); the rewritten
    (a1 + a2 - 2 inter + eps) / (a1 + a2 - inter + eps) is exact there in float64 (the GIoU
    and DIoU conformance cases, edge_pairs, check that)."""
    spec = make_spec("""
b1: {dtype: float, shape: [N, K=2]}
b2: {dtype: float, shape: [N, K]}
""", """
inter = min(b1[1], b2[1]) * min(b1[0], b2[0])
loss = 1 - inter / (b1[0] * b1[1] + b2[0] * b2[1] - inter + 1e-7)
""")
    prog, prep = assert_same_values(spec, {"b1": np.array([[2.0, 3.0], [1.0, 2.0]]),
                                           "b2": np.array([[2.0, 3.0], [0.5, 4.0]])})
    assert "one-minus-ratio" in fired_rules(prep)
    assert prep.loss.has(ir.Where)


PAIRS = """
a: {dtype: float, shape: [N, D]}
b: {dtype: float, shape: [N, D]}
"""
PAIR_INPUTS = {"a": RNG.normal(size=(3, 2)) * 4, "b": RNG.normal(size=(3, 2)) * 4}


def test_logsumexp_minus_member_takes_the_diagonal_of_a_renamed_axis():
    """sum(where(index(N) == index(M), z, 0), M) is one entry of each row when M is N renamed
    (InfoNCE's positive logit); the same where over two unrelated axes may select none or
    several, and is left alone."""
    diag = """
logits = sum(a * rename(b, N=M), axis=D)
loss = logsumexp(logits, axis=M) - sum(where(index(N) == index(M), logits, 0), axis=M)
"""
    _, prep = assert_same_values(make_spec(PAIRS, diag), PAIR_INPUTS)
    assert "logsumexp-minus-member" in fired_rules(prep) and prep.loss.has(ir.LogSoftmax)
    unrelated = """
logits = a * sum(b, axis=N)
loss = logsumexp(logits, axis=D) - sum(where(index(N) == index(D), logits, 0), axis=D)
"""
    _, prep = assert_same_values(make_spec(PAIRS, unrelated), PAIR_INPUTS)
    assert "logsumexp-minus-member" not in fired_rules(prep)


def test_power_minus_constant_keeps_the_untaken_side_finite():
    """(2 + x)**a - 2**a with a = 2 is real at x = -5, where log1p(x / 2) is not: the near form
    reads x / 2 clipped to [-1/2, 1/2], so neither side of its select is NaN (0 * NaN in the
    backward of a select is NaN)."""
    spec = make_spec("x: {dtype: float, shape: [N]}", "loss = (2 + x)**a - 2**a",
                     "params:\n  a: {default: 2.0}\n")
    inputs = {"x": np.array([-5.0, -2.5, -1.5, -0.5, 0.0, 1e-9, 0.5, 3.0])}
    prog, prep = assert_same_values(spec, inputs, {"a": 2.0})
    assert "power-minus-constant" in fired_rules(prep)
    selects = [n for n in sp.preorder_traversal(prep.loss) if isinstance(n, ir.Where)]
    assert selects
    for w in selects:
        for side in w.args[1:]:
            got = evaluate(prep.prog, side, inputs, {"a": 2.0}).reshape(-1)
            assert all(mpmath.isfinite(v) for v in got), f"{side}: {list(got)}"


def test_ratio_near_one_is_an_identity_and_fires_only_where_it_is_safe():
    """m A / (A + C) = m where(A > C, 1 - C / (A + C), A / (A + C)): both branches equal the
    quotient wherever A + C != 0 (SymPy proves it); the rule fires where A >= 0 reads a
    tensor and C > 0 is a constant, and not for a signed A (a pole at A = -C), a C that
    reads a tensor, or inside a compiler-made select (one-minus-ratio's output)."""
    from losscc.rewrites import RATIO_REWRITES
    rule = RATIO_REWRITES.rules[0]
    prog = build_program(make_spec(LOG_SPEC, "loss = x + a + b"))
    ctx = context(prog)
    xs, a_, b_ = prog.symbols["x"], prog.symbols["a"], prog.symbols["b"]
    for before in (xs**2 / (xs**2 + 4), 3 * a_ * b_ / (a_ + sp.Rational(1, 10)), (a_ + b_) / (a_ + b_ + 2)):
        after = rule.apply(before, ctx)
        assert isinstance(after, (sp.Mul, ir.Where)), before
        sel = after if isinstance(after, ir.Where) else next(f for f in after.args if isinstance(f, ir.Where))
        rest = after / sel
        for branch in sel.args[1:]:
            assert sp.simplify(rest * branch - before) == 0, (before, branch)
    assert rule.apply(xs / (xs + 4), ctx) is None          # x may be -4: a pole, no sign to split on
    assert rule.apply(a_ / (a_ + b_), ctx) is None         # C reads a tensor
    assert rule.apply(a_ / (a_ - 1), ctx) is None          # C < 0
    one_minus = RULES["one-minus-ratio"].apply(1 - a_ / (a_ + 2), ctx)
    out = run((RATIO_REWRITES,), ctx, one_minus, {})
    assert out.loss == one_minus and not out.fired         # not inside a select or a relation


@pytest.mark.parametrize("backend", BACKENDS)
def test_ratio_near_one_keeps_the_float32_gradient(backend):
    """Geman-McClure's d**2 / (d**2 + 4): at d = 1e4 the float32 gradient was 0 or 3x off
    (1 / D - A / D**2); the rewritten form passes the extreme suite."""
    from losscc import verify
    spec = make_spec("x: {dtype: float, shape: [N]}\ny: {dtype: float, shape: [N]}\n",
                     "d2 = (x - y)**2\nloss = d2 / (d2 + 4)")
    assert "ratio-near-one" in {f.rule for f in prepare(spec).fired}
    rows = verify.run([spec], (backend,), dtypes=("float32",), modes=("eager",), root=ROOT, extreme=True)
    assert rows and all(r.ok for r in rows), [r.failures[:3] for r in rows]
