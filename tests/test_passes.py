"""The pass manager (losscc.passes) and the range analysis's dispatch (losscc.ranges)."""

from __future__ import annotations

import importlib
import inspect
from collections import Counter

import pytest
import sympy as sp

from losscc import guards, ir, passes, pipeline, ranges, rewrites, specialise
from losscc.parse import build_program
from losscc.passes import Bundle, Rule, context, run
from losscc.spec import spec_from_text

SPEC = """name: t
summary: a test spec
inputs:
  x: {dtype: float, shape: [N]}
  w: {dtype: float, shape: [N], domain: "[0, 1]"}
reductions:
  mean: {denominator: "(1 - sigmoid(x)) * w"}
formula: |
  s = (1 - sigmoid(x)) * w
  loss = log(1 + s) + exp(s)
"""


def _prog():
    return build_program(spec_from_text(SPEC, "<test>"))


ALL_BUNDLES = (*pipeline.BUNDLES, guards.UNTAKEN_BRANCH, specialise.OPTIONAL_DEFAULTS)

# every rule, and the test that proves it keeps the value (or, for the guards, what it promises)
PROOFS = {
    **{r.name: "tests/test_rewrites.py" for r in rewrites.STABILITY},
    "sqrt-of-product": "tests/test_rewrites.py::test_sqrt_of_product_is_an_identity_for_non_negative_factors",
    "log-of-power": "tests/test_rewrites.py::test_log_of_power_is_an_identity_for_positive_bases",
    "log-of-quotient": "tests/test_rewrites.py::test_log_of_quotient_is_an_identity_for_positive_factors",
    "range-rewrites-in-branches": "tests/test_user_found_round15.py::test_range_rewrites_in_branches_keep_the_value",
    "ratio-near-one": "tests/test_rewrites.py::test_ratio_near_one_is_an_identity_and_fires_only_where_it_is_safe",
    "gradient-guard-pow": "tests/test_rewrites.py::test_guard_gradients_preserves_the_value",
    "guard-branches": "tests/test_rewrites.py::test_guard_branches_preserves_the_value",
    "guard-untaken-branch": "tests/test_rewrites.py::test_prepared_branches_are_finite_where_not_taken",
    "eps-guard": "tests/test_guards.py::test_eps_guard_only_where_the_argument_can_reach_zero",
    "mask-ignored": "tests/test_rewrites.py::test_repository_spec_keeps_its_value_after_prepare",
    "substitute-defaults": "tests/test_optional_specialise.py::test_none_equals_an_explicit_default_tensor",
}


def test_rule_and_bundle_names_are_unique():
    names = passes.unique_names(ALL_BUNDLES)
    assert len(names) == sum(len(b.rules) for b in ALL_BUNDLES)
    assert len({b.name for b in ALL_BUNDLES}) == len(ALL_BUNDLES)
    # and the check can fail: another rule under a name already taken
    clash = Bundle("clash", (Rule("log1p", "not the stable one", lambda e, ctx: None),))
    with pytest.raises(ValueError, match="'log1p' is used twice"):
        passes.unique_names((*ALL_BUNDLES, clash))


def test_every_rule_names_its_proof():
    assert set(PROOFS) == set(passes.unique_names(ALL_BUNDLES))
    for where in set(PROOFS.values()):
        path, _, name = where.partition("::")
        if name:
            module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
            assert inspect.isfunction(getattr(module, name, None)), where


def test_the_driver_visits_a_shared_subtree_once():
    """(1 - sigmoid(x)) * w is shared by both terms of the loss and by the denominator: a counting rule
    sees each distinct node once per bundle, although the tree holds it several times."""
    prog = _prog()
    seen: Counter = Counter()

    def count(e, ctx):
        seen[e] += 1
        return None

    bundle = Bundle("count", (Rule("count", "counts visits", count),))
    out = run((bundle,), context(prog), prog.loss, prog.denominators)
    s = prog.bindings[0][1]
    assert out.loss == prog.loss and out.denominators == prog.denominators
    assert sum(1 for n in sp.preorder_traversal(prog.loss) if n == s) == 2
    assert prog.denominators["mean"] == s
    assert seen[s] == 1 and seen[ir.sigmoid(prog.symbols["x"])] == 1
    assert set(seen.values()) == {1}
    # a second bundle over the same nodes is a second visit; the same bundle again is none
    run((bundle, Bundle("count-again", bundle.rules)), context(prog), prog.loss, {})
    assert seen[s] == 3


def test_a_scoped_bundle_is_memoised_per_condition():
    prog = _prog()
    x = prog.symbols["x"]
    seen: Counter = Counter()

    def count(e, ctx):
        seen[(e, ctx.cond)] += 1
        return None

    inner = Bundle("inner", (Rule("count", "counts visits", count),))
    ctx = context(prog)
    e = sp.log(x**2 + 1)
    for cond in (x > 0, x > 0, x < 1):
        ctx.under(cond).run(inner, e)
    assert seen[(e, x > 0)] == 1 and seen[(e, x < 1)] == 1


def test_fixpoint_bundles_rewrite_again_and_stop():
    """A fixpoint bundle rewrites a node's result again (log(exp(log(exp(y)))) -> y in one
    visit); a rule that always fires stops at the budget instead of looping."""
    y = sp.Symbol("y")
    assert rewrites.optimize(sp.log(sp.exp(sp.log(sp.exp(y))))) == y
    f = sp.Function("f")
    grow = Bundle("grow", (Rule("grow", "f(k) -> f(k + 1)",
                                lambda e, ctx: f(e.args[0] + 1) if isinstance(e, f) else None),), fixpoint=True)
    out = run((grow,), context(None), f(sp.Integer(0)), {})
    assert out.loss == f(sp.Integer(passes.FIXPOINT_BUDGET))
    once = run((Bundle("grow-once", grow.rules),), context(None), f(sp.Integer(0)), {})
    assert once.loss == f(sp.Integer(1))


def test_the_name_map_follows_expressions_through_every_node_bundle():
    prog = _prog()
    s = prog.bindings[0][1]
    out = run(pipeline.BUNDLES, context(prog), prog.loss, prog.denominators, track=[s, prog.loss])
    assert out.origin[prog.loss] == out.loss
    assert out.origin[s] == ir.sigmoid(-prog.symbols["x"]) * prog.symbols["w"]   # one-minus-sigmoid
    assert out.origin[s] in set(sp.preorder_traversal(out.loss))
    assert out.denominators["mean"] == out.origin[s]


def test_root_bundles_see_each_root_once_and_a_mean_count_as_none():
    prog = _prog()
    seen = []
    bundle = Bundle("roots", (Rule("roots", "records roots", lambda e, ctx: seen.append((ctx.root, e))),),
                    at="root")
    run((bundle,), context(prog), prog.loss, prog.denominators)
    assert prog.denominators["none"] is None
    assert seen == [("loss", prog.loss), *prog.denominators.items()]


def test_a_bundle_runs_only_when_its_condition_holds():
    prog = _prog()
    x = prog.symbols["x"]
    expr = sp.log(x**2)
    assert run((guards.EPS_GUARDS,), context(prog), expr, {}).loss == expr
    guarded = run((guards.EPS_GUARDS,), context(prog, eps=1e-12), expr, {}).loss
    assert guarded == sp.log(sp.Max(x**2, sp.Float(1e-12)))


# --------------------------------------------------------------------------- range dispatch


def _ir_classes():
    return [v for v in vars(ir).values() if inspect.isclass(v) and issubclass(v, sp.Basic)]


def test_range_methods_are_named_after_real_classes():
    """Each `_range_<Node>` method names a SymPy or IR class (a misspelt one would never run)."""
    known = {c.__name__ for c in _ir_classes()}
    known |= {name for name, v in vars(sp).items() if inspect.isclass(v)}
    known |= {c.__name__ for v in vars(sp).values() if inspect.isclass(v) for c in v.__mro__}
    known |= {name for name, v in vars(sp.core.numbers).items() if inspect.isclass(v)}  # Pi, Exp1
    methods = [m.removeprefix("_range_") for m in vars(ranges.Ranges) if m.startswith("_range_")]
    assert len(methods) >= 10  # the rest come from the registry records
    assert set(methods) <= known, set(methods) - known


@pytest.mark.parametrize("node,method", [
    (ir.Gather, "_range_Gather"), (ir.Size, "_range_Size"),
    (ir.Where, "_range_Where"), (sp.Integer, "_range_Number"),
    (sp.Dummy, "_range_Symbol"), (ir.sigmoid, "_range_Function"), (sp.Abs, "_range_Function"),
    (ir.Softmax, "_range_Function"), (sp.StrictLessThan, "_range_Basic"), (type(sp.pi), "_range_Pi"),
])
def test_range_dispatch_follows_the_class_hierarchy(node, method):
    assert ranges.Ranges._method(node) == method


def test_function_range_is_the_one_place_for_calls():
    """Calls get their facts from function_range (their registry record): |.| is non-negative and bounded exactly when
    its argument is, exp and softplus non-negative, sigmoid and softmax also bounded, tanh only
    bounded, anything else unknown."""
    big, small = ranges.facts(), ranges.facts(bounded=True)
    a = sp.Symbol("a")

    def call(f, arg_facts):
        return ranges.function_range(f(a), lambda _: arg_facts)

    assert call(sp.Abs, big) == ranges.facts(nonneg=True)
    assert call(sp.Abs, small) == ranges.facts(nonneg=True, bounded=True)
    assert call(sp.exp, small) == ranges.facts(nonneg=True)
    assert call(ir.sigmoid, big) == ranges.facts(nonneg=True, bounded=True)
    assert call(sp.tanh, big) == ranges.facts(bounded=True)
    assert call(sp.log, ranges.facts(positive=True)) == ranges.NOTHING
    assert ranges.function_range(a + 1, lambda _: small) is None  # no record: the node's own method
    prog = _prog()
    r = ranges.Ranges(prog)
    x, w = prog.symbols["x"], prog.symbols["w"]
    assert r.of(sp.Abs(ir.sigmoid(x))) == ranges.facts(nonneg=True, bounded=True)
    assert r.of(w * sp.exp(x)) == ranges.facts(nonneg=True)
    assert r.of(w + 1) == ranges.facts(positive=True, bounded=True)


def test_range_facts_are_memoised_per_node():
    """A chain of selects, each reading the previous one three times, is a tree of 3**200
    nodes on 800 distinct ones: the analysis computes each distinct node's facts once."""
    prog = _prog()
    x, w = prog.symbols["x"], prog.symbols["w"]
    e = x
    for _ in range(200):
        e = ir.Where(sp.Gt(e, 0, evaluate=False), e + w, e * w)
    r = ranges.Ranges(prog)
    assert r.of(e) == ranges.facts()  # x may be anything
    seen, stack = set(), [e]
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(n.args)
    assert len(r._memo) <= len(seen) <= 5 * 200 + 10
