"""Stage 4b: the symbolic backward pass, derived from the guarded IR.

The derivative of the per-element loss, and of each reduction's per-element denominator,
with respect to every float input is built as IR by reverse accumulation
(:func:`adjoints`): each node of the DAG gets its adjoint once, from one rule per node type
(``_Partials._p_<Type>``, the nearest along the MRO).  The rules keep the guards' gradient
semantics and the conventions of ``docs/spec.md`` ("Gradients at ties and kinks"):

- ``where``/``Piecewise``: the adjoint goes to the branch selected at the point (a guard's
  NaN-free branch stays NaN-free; the fractional power guarded at 0 has derivative 0 there);
- ``abs``: 0 at 0; ``clip``: 1 at either bound; ``max``/``min`` against a number or
  hyperparameter: the gradient goes to the tensor at a tie; between two tensors each side
  gets half, folded left over the arguments in the order the lowering uses;
- ``stop_gradient``, ``round``/``floor``/``ceil``/``sign``: nothing (a straight-through
  estimator ``x + stop_gradient(f(x) - x)`` differentiates to 1);
- over an axis (the canonical layout keeps it as size 1): sum, mean, logsumexp, softmax,
  log_softmax, max (ties shared evenly), gathers and entries of a fixed-size axis (``box[0]``:
  a one-hot of the index);
- ``diff`` along an axis: g[k - 1] - g[k] (``DiffAdjoint``), diff's last 0 masked out of g.

A node without a rule (``Item``) or learnable tensors make :func:`plan`
return the reason instead of a plan, and the spec keeps the framework's autograd (an input
broadcast from the left gets its gradient reshaped back; a number given for an input is a
tensor without a gradient, made before the call).  The work is linear in the IR's DAG; no SymPy simplification runs on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from . import dagwalk, hyperbolic, ir
from .ttype import TType

MODES = ("autograd", "custom", "auto")

# `auto`: the backend whose measured fwd+bwd time was lower with the custom backward, per
# spec (docs/backward.md, "Measurements"); everything else stays autograd
MEASURED_FASTER: frozenset = frozenset()


class DiffAdjoint(ir.TensorOp):
    """DiffAdjoint(g, axis): g[k - 1] - g[k] along `axis`, with g[-1] = 0 (same shape): the
    adjoint of ``Diff`` for a g that is 0 at the last position (losscc.lower_diff lowers it)."""

    nargs = 2


class NoRule(Exception):
    """An IR node the backward pass has no derivative rule for."""


@dataclass(frozen=True)
class Gradients:
    """One path of the call (every optional input given, or all of them None)."""

    loss: sp.Expr                      # per-element loss
    grads: tuple                       # (input name, d loss / d input) for each float input
    denominators: tuple                # (reduction, per-element denominator or None)
    den_grads: tuple                   # (reduction, ((input name, d den / d input), ...))
    # where the loss couples its elements (a sum over a batch axis used in every element): the
    # gradients of reduction none seeded with the upstream gradient DOUT (an input's gradient
    # is not its per-element derivative times dout there); None where it is
    seeded: tuple | None = None


DOUT = sp.Symbol("_losscc_dout")  # the upstream gradient of reduction none, in the loss's shape


@dataclass(frozen=True)
class Plan:
    general: Gradients
    none: Gradients | None             # the path with every optional input None
    none_inputs: tuple[str, ...] = ()


def chosen(spec, backend: str) -> bool:
    """Whether the generated class for `backend` uses the custom backward."""
    from .backends import get

    mode = spec.backward or "autograd"
    if mode == "autograd" or not get(backend).element_count:
        return False
    return mode == "custom" or (spec.name, backend) in MEASURED_FASTER


def plan(prep) -> Plan | str:
    """The gradients of `prep` (a pipeline.Prepared), or the reason it has none."""
    prog, spec = prep.prog, prep.prog.spec
    if spec.learnable:
        return "learnable tensors are not covered yet"
    params = frozenset(prog.symbols[p.name] for p in spec.params)
    try:
        general = _gradients(prog, params, prep.loss, prep.denominators)
        none = None
        if prep.none is not None:
            none = _gradients(prog, params, prep.none.loss, prep.none.denominators)
    except NoRule as exc:
        return str(exc)
    return Plan(general, none, tuple(prep.none.inputs) if prep.none is not None else ())


def _gradients(prog, params, loss, denominators) -> Gradients:
    spec = prog.spec
    xs = [(i.name, prog.symbols[i.name]) for i in spec.inputs if i.dtype == "float"]

    flags = [prog.symbols[p.name] for p in spec.params if p.kind == "bool"]

    def of(e, seed=sp.Integer(1), coupled=None):
        adj = adjoints(e, [x for _, x in xs], params, prog.typeof, seed, coupled)
        return tuple((n, _split(adj[x], flags)) for n, x in xs)

    dens = tuple(denominators.items())
    coupled: list = []
    grads = of(loss, coupled=coupled)
    seeded = None
    if coupled:
        prog.types[DOUT] = TType("float", prog.typeof(loss).axes)
        seeded = of(loss, DOUT)
    return Gradients(loss, grads, dens, tuple((r, of(d)) for r, d in dens if d is not None), seeded)


def _split(g, flags):
    """g as a select on each bool hyperparameter it reads, each side with the flag decided: the
    adjoint where(flag, g, 0) times the other side's derivative (log of a negative rate) is
    0 * nan, where the forward, a Python select on the flag, never computes that side."""
    for f in flags:
        if f in g.free_symbols:
            g = ir.Where(f, g.xreplace({f: sp.true}), g.xreplace({f: sp.false}))
    return g


def _unbroadcast(g, inner: tuple, outer: tuple):
    """The adjoint that a node of axes `inner` gets from its use in a node of axes `outer`
    it is broadcast into (a row sum in a row's elements: alpha / sum(alpha, axis=C)): the
    contribution summed over the axes it was broadcast along."""
    if not set(inner) <= set(outer):
        raise NoRule("no derivative rule for a value broadcast inside the loss")
    for a in outer:
        if a not in inner:
            g = ir.ReduceSum(g, sp.Symbol(a))
    return g


def derivative(e: sp.Expr, x: sp.Symbol, params=frozenset(), typeof=None) -> sp.Expr:
    """d e / d x as IR (see the module docstring); raises NoRule for a node without a rule."""
    return adjoints(e, [x], params, typeof)[x]


def adjoints(e: sp.Expr, xs, params=frozenset(), typeof=None, seed=sp.Integer(1), coupled=None) -> dict:
    """d e / d x for each symbol x of `xs`, by reverse accumulation over e's DAG: every
    node's adjoint is built once and shared by the derivatives of all its descendants, so
    d/d target of f(input - target) is the negation of d/d input's common part.  `params`:
    the hyperparameter symbols (a max/min bound made of them is not differentiated);
    `typeof`: the program's typing (an inner node broadcast into a larger one has no rule);
    `seed`: e's own adjoint; `coupled`: a list, appended to where e's elements are coupled
    (an adjoint summed over, or an operator along, one of e's axes)."""
    wanted = frozenset(xs)
    order: list = []
    seen: set = set()
    memo: dict = {}  # free symbols of the nodes, shared by every question below

    def visit(n):  # post-order over the nodes a wanted symbol flows through
        if n in seen:
            return
        seen.add(n)
        if not n.is_Atom:
            if not (dagwalk.free_symbols(n, memo) & wanted):
                return
            for a in _args(n):
                visit(a)
        order.append(n)

    visit(e)
    adj: dict = {e: seed}
    rules = _Partials(params, typeof)
    own = set(typeof(e).axes) if typeof is not None else set()
    for n in reversed(order):
        g = adj.get(n)
        if g is None or g == 0 or n.is_Atom:
            continue
        if coupled is not None and isinstance(n, ir.TensorOp) and any(
                isinstance(a, sp.Symbol) and a.name in own for a in n.args[1:]):
            coupled.append(n)  # along an axis of e: its elements read each other's
        for arg, contribution in rules.of(n, g):
            if arg.is_Atom and arg not in wanted:
                continue
            # an input too: its adjoint may mix uses of its own axes and broadcast ones
            if typeof is not None and not isinstance(n, ir.TensorOp) and not arg.is_Number \
                    and dagwalk.free_symbols(arg, memo) & wanted and typeof(arg).axes != typeof(n).axes:
                if coupled is not None and own & (set(typeof(n).axes) - set(typeof(arg).axes)):
                    coupled.append(n)  # summed over an axis of e
                contribution = _unbroadcast(contribution, typeof(arg).axes, typeof(n).axes)
            if contribution != 0:
                adj[arg] = adj[arg] + contribution if arg in adj else contribution
    return {x: adj.get(x, sp.Integer(0)) for x in xs}


def _args(n):
    if isinstance(n, sp.Piecewise):
        return tuple(p.expr for p in n.args)
    if isinstance(n, (ir.Where,)):
        return n.args[1:]
    return n.args


def _where(c, a, b):
    """where(c, a, b), without the select when both branches are the same."""
    return a if a == b else ir.Where(c, a, b)


class _Partials:
    """Per node type (``_p_<Type>``, the nearest along the MRO): (argument, the adjoint it
    receives) for a node of adjoint g."""

    def __init__(self, params, typeof=None):
        self.params, self.typeof = params, typeof

    def of(self, e, g):
        for cls in type(e).__mro__:
            method = getattr(self, f"_p_{cls.__name__}", None)
            if method is not None:
                return method(e, g)
        raise NoRule(f"no derivative rule for {type(e).__name__}")

    def constant_bound(self, e) -> bool:
        return e.is_number or (bool(e.free_symbols) and e.free_symbols <= self.params)

    # ---------------------------------------------------------------- arithmetic
    def _p_Add(self, e, g):
        return [(a, g) for a in e.args]

    def _p_Mul(self, e, g):
        return [(a, g * sp.Mul(*(e.args[:k] + e.args[k + 1:]))) for k, a in enumerate(e.args)]

    def _p_Pow(self, e, g):
        b, n = e.args
        if not n.is_number and not n.free_symbols <= self.params:
            raise NoRule("no derivative rule for a power with a differentiated exponent")
        return [(b, g * n * b ** (n - 1))]

    # ---------------------------------------------------------------- elementwise functions
    def _p_Function(self, e, g):
        if len(e.args) != 1:
            raise NoRule(f"no derivative rule for {type(e).__name__}")
        d = e.fdiff(1)
        if d.has(sp.Derivative, sp.Subs):  # trigamma's derivative: no node of the language
            raise NoRule(f"no derivative rule for {type(e).__name__}")
        return [(e.args[0], g * d)]

    def _p_cosh(self, e, g):  # sinh(u) = tanh(u) * cosh(u): operators every backend has
        u = e.args[0]
        return [(u, g * hyperbolic.tanh(u) * e)]

    def _p__PiecewiseConstant(self, e, g):
        return []

    def _p_StopGradient(self, e, g):
        return []

    def _p_Abs(self, e, g):  # sign(0) = 0: abs'(0) = 0
        u = e.args[0]
        return [(u, g * ir.Sign(u))]

    def _p_Clip(self, e, g):
        x, lo, hi = e.args
        if not (self.constant_bound(lo) and self.constant_bound(hi)):
            raise NoRule("no derivative rule for clip with tensor bounds")
        return [(x, _where(sp.StrictLessThan(x, lo), 0, _where(sp.StrictGreaterThan(x, hi), 0, g)))]

    def _p_MinMaxBase(self, e, g):
        """The lowering's left fold (tensors first, then bounds), differentiated back to front."""
        is_max = isinstance(e, sp.Max)
        args = sorted(e.args, key=lambda a: 1 if self.constant_bound(a) else 0)
        if self.constant_bound(args[0]):
            return []
        win, lose = (sp.StrictGreaterThan, sp.StrictLessThan) if is_max else (sp.StrictLessThan, sp.StrictGreaterThan)
        tie = sp.GreaterThan if is_max else sp.LessThan
        fold = [args[0]]
        for a in args[1:]:
            fold.append((sp.Max if is_max else sp.Min)(fold[-1], a, evaluate=False))
        out = []
        for k in range(len(args) - 1, 0, -1):
            cur, other = fold[k - 1], args[k]
            if self.constant_bound(other):  # clip: the tensor keeps the gradient at a tie
                g = _where(tie(cur, other), g, 0)
                continue
            half = g / 2
            out.append((other, _where(win(cur, other), 0, _where(lose(cur, other), g, half))))
            g = _where(win(cur, other), g, _where(lose(cur, other), 0, half))
        return out + [(args[0], g)]

    def _p_Piecewise(self, e, g):
        out = []
        for k, p in enumerate(e.args):
            sel = [(sp.Integer(0), q.cond) for q in e.args[:k]] + [(g, p.cond)]
            if p.cond is not sp.true:
                sel.append((sp.Integer(0), sp.true))
            out.append((p.expr, ir.piecewise(*sel) if len(sel) > 1 else g))
        return out

    def _p_Where(self, e, g):
        c, a, b = e.args
        return [(a, _where(c, g, 0)), (b, _where(c, 0, g))]

    # ---------------------------------------------------------------- over an axis (kept: the
    # canonical layout keeps reduced axes as size 1, so an adjoint broadcasts back by itself)
    def _p_ReduceSum(self, e, g):
        return [(e.args[0], g)]

    def _p_ReduceMean(self, e, g):
        return [(e.args[0], g / ir.Size(e.args[1]))]

    def _p_LogSumExp(self, e, g):
        x, ax = e.args
        return [(x, g * ir.Softmax(x, ax))]

    def _p_LogSoftmax(self, e, g):
        x, ax = e.args
        return [(x, g - ir.Softmax(x, ax) * ir.ReduceSum(g, ax))]

    def _p_Softmax(self, e, g):
        x, ax = e.args
        return [(x, e * (g - ir.ReduceSum(g * e, ax)))]

    def _p_ReduceMax(self, e, g):  # shared evenly among the tied entries
        x, ax = e.args
        tied = ir.piecewise((1, sp.Eq(x, e)), (0, True))
        return [(x, g * tied / ir.ReduceSum(tied, ax))]

    def _p_Gather(self, e, g):
        x, index, ax = e.args
        return [(x, g * ir.OneHot(index, ax))]

    def _p_Component(self, e, g):  # entry k of a fixed-size axis (kept as size 1): g at k, 0 elsewhere
        x, k, ax = e.args
        return [(x, g * ir.OneHot(k, ax))]

    def _p_Diff(self, e, g):  # x[k] is in steps k (+1) and k - 1 (-1); the last step is diff's 0
        x, ax = e.args
        last = sp.StrictLessThan(ir.Index(ax), ir.Size(ax) - 1)
        return [(x, DiffAdjoint(ir.Where(last, g, 0), ax))]

    def _p_Rename(self, e, g):  # x on axis N seen as on M: its adjoint is g back on N
        x, old, new = e.args
        return [(x, ir.Rename(g, new, old))]

    def _p_Size(self, e, g):
        return []

    def _p_OneHot(self, e, g):
        return []

