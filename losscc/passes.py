"""The pass manager: named rules in named bundles, run by one memoised driver.

A :class:`Rule` maps one node to an equal (or deliberately guarded) node, or returns None;
it receives a :class:`Context` with what rules need to know about the program (range
facts, the eps floor, the branch condition it runs under, the root it runs on).  A
:class:`Bundle` is a tuple of rules with a way of running them: at every node bottom-up,
once or to a fixpoint, or once at each root (the loss and each reduction's denominator).
:class:`Driver` runs bundles over the roots with one memo, keyed by bundle, scope and node,
so a shared subtree is visited once per bundle and scope, records every rule that fired
(for ``losscc explain``), and keeps one name map from each expression it was given to what
the bundles made of it (the generated code names a node after the binding it came from).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import sympy as sp

from . import ir, limits
from .errors import Diagnostic, Location, SpecError
from .ranges import Ranges

FIXPOINT_BUDGET = 64  # rewrites of one node by a fixpoint bundle before it is left as it is


@dataclass(frozen=True)
class Rule:
    name: str
    reason: str
    apply: Callable[[sp.Expr, "Context"], sp.Expr | None]
    # False: not listed among the rules fired (a rule that opens a scope for others, which are;
    # a program-level rule that explain shows in its own section)
    record: bool = True


@dataclass(frozen=True)
class Fired:
    rule: str
    before: sp.Expr
    after: sp.Expr


@dataclass(frozen=True)
class Bundle:
    name: str
    rules: tuple[Rule, ...]
    at: str = "node"         # "node": every node, bottom-up; "root": each root once
    fixpoint: bool = False   # node bundles: rewrite a node again after a rule fired, until none fires
    opaque: tuple[type, ...] = ()  # node types a node bundle neither enters nor rewrites (atoms never)
    when: Callable[["Context"], bool] | None = None  # run only where this holds (None: always)


@dataclass(frozen=True)
class Context:
    """What a rule may read.  `cond` is the branch condition a scoped bundle runs under;
    `root` the name of the root a root rule runs on ("loss" or a reduction's name)."""

    prog: object = None                 # the Program (None for rules that read nothing from it)
    ranges: Ranges | None = None
    eps: float | None = None
    masks: tuple = ()
    cond: sp.Basic | None = None
    root: str | None = None
    driver: "Driver | None" = field(default=None, compare=False, repr=False)

    def under(self, cond) -> "Context":
        return replace(self, cond=cond)

    def run(self, bundle: Bundle, expr: sp.Expr) -> sp.Expr:
        """`bundle` over `expr` in this context (a rule opening a scope runs its inner bundle so)."""
        return self.driver.node(bundle, expr, self)

    def keep(self, expr: sp.Expr) -> sp.Expr:
        """`expr`, which the bundle now running leaves as it is where the rule's result holds it:
        the written form a rule keeps in one branch of a select, which would match it again."""
        if self.driver is not None:
            self.driver.kept.add((self.driver.active, expr))
        return expr


def context(prog, eps: float | None = None, masks: tuple = ()) -> Context:
    """A fresh context (and driver) for `prog`."""
    ctx = Context(prog, Ranges(prog), eps, tuple(masks))
    return replace(ctx, driver=Driver())


BARE = Context(ranges=Ranges(None))  # for rules that read nothing from the program (proof tests)


def rebuild(e, args):
    """e with new arguments; Piecewise is not re-simplified (SymPy would fold nested ones and
    rewrite conditions, sometimes into forms that are not expressions)."""
    if isinstance(e, sp.Piecewise):
        return ir.piecewise(*args)
    if isinstance(e, sp.functions.elementary.piecewise.ExprCondPair):
        return sp.functions.elementary.piecewise.ExprCondPair(*args)
    if isinstance(e, (sp.Max, sp.Min, sp.Abs)) and ir.tree_size(*args) > ir.EVALUATE_NODES:
        return e.func(*args, evaluate=False)  # bounded work (ir.EVALUATE_NODES)
    if _sympy_function(e) and _larger_than(args, ir.EVALUATE_NODES):
        # SymPy's own functions evaluate by asking about their argument: exp of a product
        # runs logcombine over each factor, tanh asks is_real through Mod and gcd, whose
        # cost grows with the tree (exponentially in chained bindings)
        return e.func(*args, evaluate=False)
    if isinstance(e, (sp.Max, sp.Min)):
        try:
            return e.func(*args)
        except ValueError:  # SymPy cannot tell an argument is real (a guarded branch): keep them all
            return e.func(*args, evaluate=False)
    out = e.func(*args)
    return ir.real_parts(out) if isinstance(e, sp.Abs) else out


def _sympy_function(e) -> bool:
    return isinstance(e, sp.Function) and type(e).__module__.startswith("sympy.")


def _larger_than(exprs, cap: int) -> bool:
    """Whether the expressions have more than `cap` nodes as trees: at most cap steps."""
    stack, seen = list(exprs), 0
    while stack:
        seen += 1
        if seen > cap:
            return True
        stack.extend(stack.pop().args)
    return False


def _bounded(out, ctx) -> None:
    """E104 where a rule's result exceeds the limit 'rewritten_tree': rewrites that copy their
    argument into two branches (log-cosh) nest into trees five times larger a level, and SymPy
    walks trees in places, so the size is checked as each rule fires, not after the pass."""
    if ir.tree_size(out) <= limits.MAX_REWRITTEN_TREE:
        return
    spec = getattr(ctx.prog, "spec", None)
    last = spec.bindings[-1].loc if spec is not None and spec.bindings else Location()
    raise SpecError([Diagnostic(Location(getattr(spec, "path", "<formula>"), last.line, last.col), "E104",
                                f"formula exceeds the limit 'rewritten_tree' ({limits.MAX_REWRITTEN_TREE} "
                                "nodes after the stable rewrites and guards)")])


class Driver:
    """Runs bundles; one memo ((bundle, scope, node) -> result), one record of rules fired."""

    def __init__(self):
        self.memo: dict = {}
        self.fired: list[Fired] = []
        self.kept: set = set()     # (bundle name, node) a rule asked its bundle not to rewrite
        self.active: str | None = None

    def _try(self, bundle: Bundle, e, ctx):
        self.active = bundle.name
        for rule in bundle.rules:
            out = rule.apply(e, ctx)
            if out is not None and out != e:
                _bounded(out, ctx)
                if rule.record:
                    self.fired.append(Fired(rule.name, e, out))
                return out
        return None

    def node(self, bundle: Bundle, expr: sp.Expr, ctx: Context) -> sp.Expr:
        """`bundle`'s rules at every node of `expr`, children first."""
        memo, scope = self.memo, (bundle.name, ctx.cond)

        def visit(e, budget=FIXPOINT_BUDGET):
            key = (scope, e)
            got = memo.get(key)
            if got is not None:
                return got
            if e.is_Atom or isinstance(e, bundle.opaque) or (bundle.name, e) in self.kept:
                return e
            args = tuple(visit(a) for a in e.args)
            cur = rebuild(e, args) if args != e.args else e
            out = self._try(bundle, cur, ctx)
            if out is not None:
                # the result is visited again (children and rules) with one rewrite less to go,
                # so a chain of rewrites of one node is at most FIXPOINT_BUDGET long
                cur = visit(out, budget - 1) if bundle.fixpoint and budget > 1 else out
            memo[key] = cur
            return cur

        outer = self.active  # a rule that runs an inner bundle keeps its own name afterwards
        try:
            return visit(expr)
        finally:
            self.active = outer

    def result(self, bundle: Bundle, e: sp.Expr, ctx: Context) -> sp.Expr:
        """What `bundle` made of `e` where it visited it (e itself elsewhere)."""
        return self.memo.get(((bundle.name, ctx.cond), e), e)

    def root(self, bundle: Bundle, expr: sp.Expr | None, ctx: Context) -> sp.Expr | None:
        """`bundle`'s first rule that fires, once at a root; a mean's element count is the root None."""
        out = self._try(bundle, expr, ctx)
        return expr if out is None else out


@dataclass(frozen=True)
class Result:
    loss: sp.Expr
    denominators: dict          # reduction -> expression or None
    origin: dict                # expression given -> what the node bundles made of it
    fired: tuple[Fired, ...]


def run(bundles, ctx: Context, loss: sp.Expr, denominators: dict, track=()) -> Result:
    """Each bundle in turn over the loss and the denominators.  `track`: expressions (subtrees
    of the roots, such as the bindings) whose results are followed through the node bundles."""
    driver = ctx.driver
    origin = {e: e for e in track}
    for bundle in bundles:
        if bundle.when is not None and not bundle.when(ctx):
            continue
        if bundle.at == "root":
            loss = driver.root(bundle, loss, replace(ctx, root="loss"))
            denominators = {k: driver.root(bundle, v, replace(ctx, root=k)) for k, v in denominators.items()}
            continue
        loss = driver.node(bundle, loss, ctx)
        denominators = {k: (driver.node(bundle, v, ctx) if v is not None else None)
                        for k, v in denominators.items()}
        origin = {e: driver.result(bundle, cur, ctx) for e, cur in origin.items()}
    return Result(loss, denominators, origin, tuple(driver.fired))


def unique_names(bundles) -> dict[str, Rule]:
    """Every rule of `bundles` by name; a name used twice (for different rules) is an error."""
    out: dict[str, Rule] = {}
    for b in bundles:
        for r in b.rules:
            if out.setdefault(r.name, r) is not r:
                raise ValueError(f"rule name {r.name!r} is used twice")
    return out
