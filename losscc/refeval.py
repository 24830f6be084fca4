"""The reference evaluator's walk: the spec's IR, as written, evaluated with mpmath.

Elementwise functions are evaluated by their registry record's mpmath function
(``losscc.functions``); every other node by a method ``_eval_<Node>`` (the first one
along the node class's MRO), in object arrays of ``mpmath.mpf`` (``losscc.refarrays``).
"""

from __future__ import annotations

import functools
import time

import mpmath
import numpy as np
import sympy as sp

from . import functions, ir, limits
from .parse import Program
from .refarrays import (
    RELATIONS,
    Layout,
    ReferenceCost,
    any_of,
    fit_mask,
    ieee_divide,
    infer_sizes,
    mp_pow,
    mp_sqrt,
    near_mask,
    place,
    select,
    to_mp,
    total,
)
from .reftensor import TensorOps


def _vec(f):
    return np.frompyfunc(f, 1, 1)


_elementwise = functools.cache(_vec)  # the vectorised mpmath function of an elementwise record


def _neg_sigmoid_arg(term):
    """term == -sigmoid(x) -> x, else None."""
    if isinstance(term, sp.Mul) and len(term.args) == 2 and term.args[0] == -1 \
            and isinstance(term.args[1], ir.sigmoid):
        return term.args[1].args[0]
    return None


_POW = np.frompyfunc(mp_pow, 2, 1)
_SQRT = _vec(mp_sqrt)
_SIGMOID = _vec(functions.mp_sigmoid)
_SIGN = np.frompyfunc(lambda v: mpmath.mpf(mpmath.sign(v)), 1, 1)
_ABS = np.frompyfunc(abs, 1, 1)
_MAX2 = np.frompyfunc(max, 2, 1)


class Evaluator(TensorOps):
    """Evaluate a Program's IR on one case; values are object arrays of mpf."""

    def __init__(self, prog: Program, inputs: dict, params: dict, learnable: dict):
        self.prog = prog
        spec = prog.spec
        self.sizes = infer_sizes(prog, inputs)
        self.layout = Layout.of(prog, self.sizes)
        self.params = {p.name: params.get(p.name, p.default) for p in spec.params}
        self.raw = dict(inputs)
        self.learnable = {k: to_mp(np.asarray(v, dtype=float)) for k, v in learnable.items()}
        self.frozen: dict = {}
        self.thaw = False  # stop_gradient recomputed also while frozen: the value's own derivative
        # free: every selection made afresh at the moved point (refties); tied: the unperturbed
        # point has an exact tie (a selection's two sides equal)
        self.free, self.tied = False, False
        # a backstop beside the work estimate (erf at hundreds of digits costs far more)
        self.deadline = time.monotonic() + limits.MAX_REFERENCE_SECONDS
        # near ties (refarrays.near_mask) at the unperturbed point: selection -> positions,
        # relation -> positions; and each watched selection's two sides in the last run
        self.near_tol, self.watch, self._rel_near, self.sides, self.nudge = 0.0, {}, {}, {}, None

    def env(self, inputs: dict) -> dict:
        prog, spec = self.prog, self.prog.spec
        env = {}
        valid = None
        for inp in spec.inputs:
            v = inputs.get(inp.name)
            t = prog.types[prog.symbols[inp.name]]
            if v is None:
                shape = [1] * self.layout.rank
                if not inp.broadcast:
                    for a in t.axes:
                        for d, n in zip(self.layout.dims[a], self.sizes[a]):
                            shape[d] = n
                arr = np.full(tuple(shape), mpmath.mpf(inp.default), dtype=object)
            else:
                arr = to_mp(v) if not isinstance(v, np.ndarray) or v.dtype != object else v
                arr = place(arr, t.axes, inp, self.layout)
            if inp.ignore:
                ig = self.params[inp.ignore]
                ok = np.vectorize(lambda z: z != ig, otypes=[bool])(arr)
                arr = np.where(ok, arr, 0)
                valid = ok if valid is None else valid & ok
            env[prog.symbols[inp.name]] = arr
        for p in spec.params:
            val = self.params[p.name]
            env[prog.symbols[p.name]] = mpmath.mpf(val) if p.kind == "float" else val
        for lr in spec.learnable:
            env[prog.symbols[lr.name]] = self.learnable[lr.name]
        return env, valid

    def run(self, inputs: dict | None = None, learnable: dict | None = None, freeze: bool = False) -> dict:
        """All reductions of the loss: {'none': array, 'sum': mpf, 'mean': mpf, ...}."""
        inputs = self.raw if inputs is None else inputs
        saved = self.learnable
        if learnable is not None:
            self.learnable = learnable
        try:
            env, valid = self.env(inputs)
            memo: dict = {}
            self._freeze = freeze
            if not freeze:
                self.watch, self._rel_near, self.tied = {}, {}, False
            self.sides = {}
            loss = self.ev(self.prog.loss, env, memo)
            loss_t = self.prog.typeof(self.prog.loss)
            loss = np.broadcast_to(np.asarray(loss, dtype=object), self._full(loss_t.axes))
            if valid is not None:
                valid = np.broadcast_to(valid, loss.shape)
                loss = np.where(valid, loss, mpmath.mpf(0))
            out = {"none": self.layout.squeeze(loss, loss_t.axes)}
            whole = total(loss)
            out["sum"] = whole
            for red in self.prog.spec.reductions:
                if red.name in ("none", "sum"):
                    continue
                den_expr = self.prog.denominators.get(red.name)
                if den_expr is None:
                    den = np.ones(loss.shape, dtype=object)
                else:
                    d = self.ev(den_expr, env, memo)
                    if not self.prog.typeof(den_expr).axes:  # a scalar: not masked
                        out[red.name] = ieee_divide(whole, d if not isinstance(d, np.ndarray) else d.reshape(-1)[0])
                        continue
                    den = np.broadcast_to(np.asarray(d, dtype=object), loss.shape)
                if valid is not None:
                    den = np.where(valid, den, 0)
                out[red.name] = ieee_divide(whole, total(den))
            return out
        finally:
            self.learnable = saved

    def _terms(self, ev, *exprs):
        """The largest sum of |term| over the sums among `exprs` (their values' scale before
        cancellation), or None: only at the unperturbed point, where near ties are found."""
        if self._freeze or not self.near_tol:
            return None
        sums = [functools.reduce(lambda u, v: u + v, [_ABS(ev(t)) for t in x.args]) for x in exprs
                if isinstance(x, sp.Add)]
        return functools.reduce(_MAX2, sums) if sums else None

    def _sides(self, key, a, b, cond=None, scale=None) -> None:
        """Watch selection `key` between `a` and `b` where they are a near tie at the
        unperturbed point (or where the relations of condition `cond` are), relative to the
        sides or to `scale`; remember both sides in every run, for the differences to
        compare their slopes."""
        if not self._freeze:
            m = near_mask(a, b, self.near_tol, scale) if cond is None else fit_mask(any_of(
                [self._rel_near[r] for r in sp.preorder_traversal(cond) if r in self._rel_near]), a, b)
            if m is not None:
                self.watch[key] = m
        if key in self.watch:
            self.sides[key] = (a, b)

    def _out(self, key, out, dims=()):
        """A selection's output, moved where `nudge` (key, scale) names it: at its near ties
        (any along `dims`, which a reduction removed), by `scale` relative (reference.reference
        asks whether the loss feels it)."""
        if self.nudge is None or self.nudge[0] != key:
            return out
        m = np.asarray(self.watch[key], dtype=bool)
        m = np.any(m, axis=tuple(dims), keepdims=True) if dims else m
        m = fit_mask(m, out) if np.ndim(out) else m
        return out + np.where(m, (np.abs(np.asarray(out, dtype=object)) + 1) * self.nudge[1], 0)

    def _full(self, axes):
        shape = [1] * self.layout.rank
        for a in axes:
            for d, n in zip(self.layout.dims[a], self.sizes[a]):
                shape[d] = n
        return tuple(shape)

    # ------------------------------------------------------------- the walk
    def ev(self, e, env, memo):
        got = memo.get(e)
        if got is not None:
            return got
        v = self._ev(e, env, memo)
        memo[e] = v
        if time.monotonic() > self.deadline:
            raise ReferenceCost(f"the reference evaluator ran past the limit 'reference_seconds' "
                                f"({limits.MAX_REFERENCE_SECONDS} s) on it; make the case smaller")
        return v

    def _ev(self, e, env, memo):
        if e in env:
            return env[e]
        if e is sp.true:
            return True
        if e is sp.false:
            return False
        if e.is_Number or e in (sp.pi, sp.E):
            if e.is_Integer:
                return mpmath.mpf(int(e))
            if e.is_Rational:
                return mpmath.mpf(int(e.p)) / int(e.q)
            if e is sp.pi:
                return +mpmath.pi
            return mpmath.mpf(float(e))

        def ev(x):
            return self.ev(x, env, memo)

        f = functions.of_node(e)
        if f is not None and callable(f.reference):
            return _elementwise(f.reference)(ev(e.args[0]))
        for cls in type(e).__mro__:
            method = getattr(self, "_eval_" + cls.__name__, None)
            if method is not None:
                return method(e, ev)
        raise TypeError(f"reference: no rule for {type(e).__name__}")

    # ------------------------------------------------------- syntax
    def _eval_Add(self, e, ev):
        if len(e.args) == 2 and sp.S.One in e.args:
            x = _neg_sigmoid_arg(e.args[0] if e.args[1] == 1 else e.args[1])
            if x is not None:
                # 1 - sigmoid(x) is sigmoid(-x) exactly; evaluated so, it needs no
                # thousands of digits to survive the cancellation at x = 1e4 or 1e18
                return _SIGMOID(-ev(x))
        out = ev(e.args[0])
        for a in e.args[1:]:
            out = out + ev(a)
        return out

    def _eval_Mul(self, e, ev):
        out = ev(e.args[0])
        for a in e.args[1:]:
            out = out * ev(a)
        return out

    def _eval_Pow(self, e, ev):
        base, ex = ev(e.args[0]), ev(e.args[1])
        if e.args[1] == sp.Rational(1, 2):
            return _SQRT(base)
        return _POW(base, ex)

    def _eval_Piecewise(self, e, ev):
        out = None
        for pair in reversed(e.args):
            val = ev(pair.expr)
            if out is None:
                out = val
                continue
            c = ev(pair.cond)
            self._sides((e, pair), val, out, pair.cond)
            out = np.where(np.asarray(c, dtype=bool), val, out) if isinstance(c, np.ndarray) else (val if c else out)
            out = self._out((e, pair), out)
        return out

    def _eval_Where(self, e, ev):
        c, a, b = (ev(x) for x in e.args)
        self._sides(e, a, b, e.args[0])
        return self._out(e, np.where(np.asarray(c, dtype=bool), a, b) if isinstance(c, np.ndarray) else (a if c else b))

    _eval_ITE = _eval_Where

    def _eval_And(self, e, ev):
        return functools.reduce(np.logical_and, [ev(a) for a in e.args])

    def _eval_Or(self, e, ev):
        return functools.reduce(np.logical_or, [ev(a) for a in e.args])

    def _eval_Not(self, e, ev):
        return np.logical_not(ev(e.args[0]))

    # ------------------------------------------------------- ties and kinks
    # The selections (comparisons, max/min, clip, abs, the maximum over an axis) are made
    # at the unperturbed point and kept fixed while the differences perturb it (run's
    # `freeze`): each side of a selection is then smooth, and the central difference is
    # the gradient of the side chosen there, with the tie conventions of docs/spec.md:
    # max/min against a bound (a number or hyperparameter) passes the gradient to the
    # tensor, between two differentiated values each side gets half; clip passes it at
    # its bounds; abs'(0) = 0; a condition picks one branch; the maximum over an axis
    # shares it evenly among the tied entries.

    def _fixed(self, e, compute, continuous: bool = True):
        """compute() at the unperturbed point (remembered), its remembered value while frozen;
        `free` makes a continuous selection afresh (a condition, which may jump, stays)."""
        key = ("selection", e)
        if self._freeze and key in self.frozen and not (self.free and continuous):
            return self.frozen[key]
        v = compute()
        if not self._freeze:
            self.frozen[key] = v
        return v

    def _mark(self, equal) -> None:
        """Note an exact tie at the unperturbed point (`equal`: a bool or bool array)."""
        if not self._freeze and np.any(np.asarray(equal, dtype=bool)):
            self.tied = True

    def _eval_Relational(self, e, ev):
        return self._fixed(e, lambda: self._relation(e, ev), continuous=False)

    def _eval_Abs(self, e, ev):
        x = ev(e.args[0])
        self._sides((e, "abs"), x, -x, scale=self._terms(ev, e.args[0]))  # |3x - t| near a cancelling 0
        sign = self._fixed(e, lambda: _SIGN(x) if isinstance(x, np.ndarray) else mpmath.sign(x))
        self._mark(np.asarray(sign == 0))
        return self._out((e, "abs"), sign * x)

    def _eval_Clip(self, e, ev):
        x, lo, hi = (ev(a) for a in e.args)
        scale = self._terms(ev, e.args[0])
        self._sides((e, "lo"), x, lo, scale=scale)
        self._sides((e, "hi"), x, hi, scale=scale)
        below, above = self._fixed(e, lambda: (x < lo, x > hi))
        self._mark(np.asarray(x == lo) | np.asarray(x == hi))
        return self._out((e, "lo"), self._out((e, "hi"), select(below, lo, select(above, hi, x))))

    def _eval_MinMaxBase(self, e, ev):
        # max/min folded left, tensors first (as the lowering): a tie with a bound keeps the
        # tensor, a tie of two differentiated values is their mean (half the gradient each)
        args = sorted(e.args, key=self._is_bound)
        bigger = np.frompyfunc((lambda u, v: (u > v) - (u < v)) if isinstance(e, sp.Max) else
                               (lambda u, v: (u < v) - (u > v)), 2, 1)
        out = ev(args[0])
        for k, a in enumerate(args[1:]):
            v = ev(a)
            self._sides((e, k), out, v, scale=self._terms(ev, *args[:k + 2]))
            order = self._fixed((e, k), lambda u=out, w=v: bigger(u, w))
            self._mark(np.asarray(order == 0))
            tie = out if self._is_bound(a) else (out + v) / 2
            out = self._out((e, k), select(order > 0, out, select(order < 0, v, tie)))
        return out

    def _is_bound(self, a) -> bool:
        """A value no gradient flows into: a number or an expression in hyperparameters."""
        params = {self.prog.symbols[p.name] for p in self.prog.spec.params}
        return a.free_symbols <= params and not a.has(ir.Item)

    def _relation(self, e, ev):
        a, b = ev(e.args[0]), ev(e.args[1])
        m = near_mask(a, b, self.near_tol, self._terms(ev, *e.args))
        if m is not None:
            self._rel_near[e] = m
        f = RELATIONS[type(e)]
        return np.asarray(np.frompyfunc(f, 2, 1)(a, b)).astype(bool) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else bool(f(a, b))
