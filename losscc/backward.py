"""Stage 4b: the symbolic backward pass, derived from the guarded IR.

For a spec whose loss is elementwise (every input of one shape, or broadcast to it) the
derivative of the per-element loss, and of each reduction's per-element denominator, with
respect to every float input is built as IR by :func:`derivative`, one rule per node type
(``_d_<Type>``, the nearest along the MRO).  The rules keep the guards' gradient
semantics and the conventions of ``docs/spec.md`` ("Gradients at ties and kinks"):

- ``where``/``Piecewise``: the derivative of the branch that is selected, under the same
  conditions (a guard's NaN-free branch stays NaN-free; the fractional power guarded at 0
  has derivative 0 there);
- ``abs``: 0 at 0; ``clip``: 1 at either bound; ``max``/``min`` against a number or
  hyperparameter: the gradient goes to the tensor at a tie; between two tensors each side
  gets half, folded left over the arguments in the order the lowering uses;
- ``stop_gradient``, ``round``/``floor``/``ceil``/``sign``: 0 (a straight-through estimator
  ``x + stop_gradient(f(x) - x)`` differentiates to 1).

A node without a rule (a reduction inside the loss, a gather, softmax) makes :func:`plan`
return the reason instead of a plan, and the spec keeps the framework's autograd.  The
derivative is memoised per node, so its size is linear in the IR's DAG; no SymPy
simplification runs on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from . import ir

MODES = ("autograd", "custom", "auto")

# `auto`: the backend whose measured fwd+bwd time was lower with the custom backward, per
# spec (docs/backward.md, "Measurements"); everything else stays autograd
MEASURED_FASTER: frozenset = frozenset()


class NoRule(Exception):
    """An IR node the backward pass has no derivative rule for."""


@dataclass(frozen=True)
class Gradients:
    """One path of the call (every optional input given, or all of them None)."""

    loss: sp.Expr                      # per-element loss
    grads: tuple                       # (input name, d loss / d input) for each float input
    denominators: tuple                # (reduction, per-element denominator or None)
    den_grads: tuple                   # (reduction, ((input name, d den / d input), ...))


@dataclass(frozen=True)
class Plan:
    general: Gradients
    none: Gradients | None             # the path with every optional input None
    none_inputs: tuple[str, ...] = ()


def chosen(spec, backend: str) -> bool:
    """Whether the generated class for `backend` uses the custom backward."""
    mode = getattr(spec, "backward", "autograd")
    if backend not in ("paddle", "mindspore") or mode == "autograd":
        return False
    return mode == "custom" or (spec.name, backend) in MEASURED_FASTER


def plan(prep) -> Plan | str:
    """The gradients of `prep` (a pipeline.Prepared), or the reason it has none."""
    prog, spec = prep.prog, prep.prog.spec
    if spec.learnable:
        return "learnable tensors are not covered yet"
    if prep.masks:
        return "ignored positions (ignore masks) are not covered yet"
    first = spec.inputs[0]
    for inp in spec.inputs:
        if inp.dtype != "float":
            return f"input {inp.name} is not a float tensor"
        if tuple(inp.shape) != tuple(first.shape) or inp.broadcast == "left":
            return f"input {inp.name} has a shape of its own: the loss is not elementwise"
    optional = tuple(i.name for i in spec.inputs if i.optional)
    if len(optional) > 1:
        return "more than one optional input"
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
    xs = [(i.name, prog.symbols[i.name]) for i in spec.inputs]
    grads = tuple((n, derivative(loss, x, params)) for n, x in xs)
    dens = tuple(denominators.items())
    den_grads = tuple((r, tuple((n, derivative(d, x, params)) for n, x in xs)) for r, d in dens if d is not None)
    return Gradients(loss, grads, dens, den_grads)


def derivative(e: sp.Expr, x: sp.Symbol, params=frozenset()) -> sp.Expr:
    """d e / d x as IR (see the module docstring); raises NoRule for a node without a rule.
    `params`: the hyperparameter symbols (a bound of max/min made of them is not differentiated)."""
    return _Deriv(x, params).d(e)


def _where(c, a, b):
    """where(c, a, b), without the select when both branches are the same."""
    return a if a == b else ir.Where(c, a, b)


class _Deriv:
    def __init__(self, x, params):
        self.x, self.params, self.memo = x, params, {}

    def d(self, e):
        got = self.memo.get(e)
        if got is None:
            if e.is_Atom:
                got = sp.Integer(1 if e == self.x else 0)
            elif self.x not in e.free_symbols:
                got = sp.Integer(0)
            else:
                got = self._rule(e)
            self.memo[e] = got
        return got

    def _rule(self, e):
        for cls in type(e).__mro__:
            method = getattr(self, f"_d_{cls.__name__}", None)
            if method is not None:
                return method(e)
        raise NoRule(f"no derivative rule for {type(e).__name__}")

    def constant_bound(self, e) -> bool:
        return e.is_number or (bool(e.free_symbols) and e.free_symbols <= self.params)

    # ---------------------------------------------------------------- arithmetic
    def _d_Add(self, e):
        return sp.Add(*[self.d(a) for a in e.args])

    def _d_Mul(self, e):
        terms = []
        for k, a in enumerate(e.args):
            da = self.d(a)
            if da != 0:
                terms.append(sp.Mul(*(e.args[:k] + (da,) + e.args[k + 1:])))
        return sp.Add(*terms)

    def _d_Pow(self, e):
        b, n = e.args
        if self.x in n.free_symbols:
            raise NoRule("no derivative rule for a power with a differentiated exponent")
        return n * b ** (n - 1) * self.d(b)

    # ---------------------------------------------------------------- elementwise functions
    def _d_Function(self, e):
        if len(e.args) != 1:
            raise NoRule(f"no derivative rule for {type(e).__name__}")
        return e.fdiff(1) * self.d(e.args[0])

    def _d_cosh(self, e):  # sinh(u) = tanh(u) * cosh(u): operators every backend has
        u = e.args[0]
        return sp.tanh(u) * e * self.d(u)

    def _d__PiecewiseConstant(self, e):
        return sp.Integer(0)

    def _d_Abs(self, e):
        u = e.args[0]
        du = self.d(u)
        return _where(sp.StrictGreaterThan(u, 0), du, _where(sp.StrictLessThan(u, 0), -du, 0))

    def _d_Clip(self, e):
        x, lo, hi = e.args
        if not (self.constant_bound(lo) or lo.is_number) or not (self.constant_bound(hi) or hi.is_number):
            raise NoRule("no derivative rule for clip with tensor bounds")
        return _where(sp.StrictLessThan(x, lo), 0, _where(sp.StrictGreaterThan(x, hi), 0, self.d(x)))

    def _d_MinMaxBase(self, e):
        is_max = isinstance(e, sp.Max)
        args = sorted(e.args, key=lambda a: 1 if self.constant_bound(a) else 0)  # the lowering's order
        if self.constant_bound(args[0]):
            return sp.Integer(0)
        cur, dcur = args[0], self.d(args[0])
        win, lose = (sp.StrictGreaterThan, sp.StrictLessThan) if is_max else (sp.StrictLessThan, sp.StrictGreaterThan)
        for other in args[1:]:
            if self.constant_bound(other):  # clip: the tensor keeps the gradient at a tie
                tie = sp.GreaterThan if is_max else sp.LessThan
                dcur = _where(tie(cur, other), dcur, 0)
            else:  # maximum/minimum: half to each side at a tie
                do = self.d(other)
                dcur = _where(win(cur, other), dcur, _where(lose(cur, other), do, (dcur + do) / 2))
            cur = (sp.Max if is_max else sp.Min)(cur, other, evaluate=False)
        return dcur

    def _d_Piecewise(self, e):
        return sp.Piecewise(*[(self.d(p.expr), p.cond) for p in e.args], evaluate=False)

    def _d_Where(self, e):
        c, a, b = e.args
        return _where(c, self.d(a), self.d(b))

    def _d_StopGradient(self, e):
        return sp.Integer(0)
