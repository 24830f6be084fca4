"""The reference evaluator: the spec's IR, as written, evaluated with mpmath.

It shares nothing with the lowering or the templates: it walks the *unrewritten*
IR (no stable rewrites, no guards) on concrete NumPy inputs, in object arrays of
``mpmath.mpf`` at :data:`DPS` significant digits, so that a wrong operator
mapping, a broken rewrite or a missing guard in the generated code shows up as a
mismatch.  Gradients are central differences at that precision, with every
selection (comparison, max/min, clip, abs, maximum over an axis) made at the
unperturbed point, so that at a tie the difference gives the documented one-sided
value (docs/spec.md, "Gradients at ties and kinks"); points where the left and
right differences still disagree (sqrt at 0: a true kink of a smooth operation) or
that the precision does not resolve are reported as kinks and left out of gradient
comparisons.

Every tensor is held at the program's full rank (one dimension per axis; a
variadic group expands to its runtime rank), size 1 where it lacks an axis, so
NumPy broadcasting does the alignment.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np
import sympy as sp

from . import ir, limits
from .casecheck import reference_digits
from .parse import Program

DPS = 40
_H = mpmath.mpf(10) ** -15  # relative step of the differences


def _vec(f):
    return np.frompyfunc(f, 1, 1)


def _real(v):
    if isinstance(v, mpmath.mpc):
        return mpmath.mpf("nan") if v.imag != 0 else v.real
    return v


def _log(x):
    if x == 0:
        return mpmath.mpf("-inf")
    if x < 0:
        return mpmath.mpf("nan")
    return mpmath.log(x)


def _pow(a, b):
    try:
        if a == 0 and b < 0:
            return mpmath.mpf("inf")
        if a < 0 and not mpmath.isint(b):
            return mpmath.mpf("nan")
        return _real(mpmath.power(a, b))
    except (ValueError, ZeroDivisionError):
        return mpmath.mpf("nan")


def _sigmoid(x):
    return 1 / (1 + mpmath.exp(-x))


def _softplus(x):
    return mpmath.log1p(mpmath.exp(x)) if x < 0 else x + mpmath.log1p(mpmath.exp(-x))


def _neg_sigmoid_arg(term):
    """term == -sigmoid(x) -> x, else None."""
    if isinstance(term, sp.Mul) and len(term.args) == 2 and term.args[0] == -1 \
            and isinstance(term.args[1], ir.sigmoid):
        return term.args[1].args[0]
    return None


def _sqrt(x):
    return mpmath.sqrt(x) if x >= 0 else mpmath.mpf("nan")


def _log1p(x):
    return _log(1 + x) if x <= -1 else mpmath.log1p(x)


UNARY = {
    sp.exp: _vec(mpmath.exp), sp.log: _vec(_log), ir.log1p: _vec(_log1p), ir.expm1: _vec(mpmath.expm1),
    sp.Abs: _vec(abs), sp.tanh: _vec(mpmath.tanh), sp.cosh: _vec(mpmath.cosh), ir.sigmoid: _vec(_sigmoid), ir.softplus: _vec(_softplus),
    # piecewise constant; mpmath.nint rounds half to even, as both frameworks' round
    ir.Round: _vec(lambda v: mpmath.mpf(mpmath.nint(v))), ir.Floor: _vec(lambda v: mpmath.mpf(mpmath.floor(v))),
    ir.Ceil: _vec(lambda v: mpmath.mpf(mpmath.ceil(v))), ir.Sign: _vec(lambda v: mpmath.mpf(mpmath.sign(v))),
}
_POW = np.frompyfunc(_pow, 2, 1)
_SQRT = _vec(_sqrt)


@dataclass
class Layout:
    """Where each axis lives in the full-rank arrays, for one set of sizes."""

    dims: dict[str, tuple[int, ...]]   # axis -> dimensions
    sizes: dict[str, tuple[int, ...]]  # axis -> sizes (one per dimension)
    rank: int

    @classmethod
    def of(cls, prog: Program, sizes: dict[str, tuple[int, ...]]) -> "Layout":
        dims, k = {}, 0
        for a in prog.axes:
            n = len(sizes[a])
            dims[a] = tuple(range(k, k + n))
            k += n
        return cls(dims, sizes, k)

    def expand(self, arr: np.ndarray, axes: tuple[str, ...]) -> np.ndarray:
        shape = [1] * self.rank
        src = iter(arr.shape)
        for a in axes:
            for d in self.dims[a]:
                shape[d] = next(src)
        return arr.reshape(shape)

    def squeeze(self, arr: np.ndarray, axes: tuple[str, ...]) -> np.ndarray:
        keep = [d for a in axes for d in self.dims[a]]
        drop = tuple(d for d in range(self.rank) if d not in keep)
        full_shape = list(arr.shape)
        for a in axes:
            for d, n in zip(self.dims[a], self.sizes[a]):
                full_shape[d] = n
        arr = np.broadcast_to(arr, full_shape)
        return arr.squeeze(axis=drop) if drop else arr


def to_mp(a) -> np.ndarray:
    a = np.asarray(a)
    out = np.empty(a.shape, dtype=object)
    flat = a.reshape(-1)
    o = out.reshape(-1)
    for k, v in enumerate(flat):
        o[k] = mpmath.mpf(float(v)) if a.dtype.kind == "f" else int(v)
    return out


class Evaluator:
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
                arr = _place(arr, t.axes, inp, self.layout)
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
            loss = self.ev(self.prog.loss, env, memo)
            loss_t = self.prog.typeof(self.prog.loss)
            loss = np.broadcast_to(np.asarray(loss, dtype=object), self._full(loss_t.axes))
            if valid is not None:
                valid = np.broadcast_to(valid, loss.shape)
                loss = np.where(valid, loss, mpmath.mpf(0))
            out = {"none": self.layout.squeeze(loss, loss_t.axes)}
            total = _sum(loss)
            out["sum"] = total
            for red in self.prog.spec.reductions:
                if red.name in ("none", "sum"):
                    continue
                den_expr = self.prog.denominators.get(red.name)
                if den_expr is None:
                    den = np.ones(loss.shape, dtype=object)
                else:
                    d = self.ev(den_expr, env, memo)
                    if not self.prog.typeof(den_expr).axes:  # a scalar: not masked
                        out[red.name] = total / (d if not isinstance(d, np.ndarray) else d.reshape(-1)[0])
                        continue
                    den = np.broadcast_to(np.asarray(d, dtype=object), loss.shape)
                if valid is not None:
                    den = np.where(valid, den, 0)
                out[red.name] = total / _sum(den)
            return out
        finally:
            self.learnable = saved

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
        return v

    def _ev(self, e, env, memo):
        ev = lambda x: self.ev(x, env, memo)  # noqa: E731
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
        if isinstance(e, sp.Add):
            if len(e.args) == 2 and sp.S.One in e.args:
                x = _neg_sigmoid_arg(e.args[0] if e.args[1] == 1 else e.args[1])
                if x is not None:
                    # 1 - sigmoid(x) is sigmoid(-x) exactly; evaluated so, it needs no
                    # thousands of digits to survive the cancellation at x = 1e4 or 1e18
                    return _apply(UNARY[ir.sigmoid], -ev(x))
            out = ev(e.args[0])
            for a in e.args[1:]:
                out = out + ev(a)
            return out
        if isinstance(e, sp.Mul):
            out = ev(e.args[0])
            for a in e.args[1:]:
                out = out * ev(a)
            return out
        if isinstance(e, sp.Pow):
            base, ex = ev(e.args[0]), ev(e.args[1])
            if e.args[1] == sp.Rational(1, 2):
                return _apply(_SQRT, base)
            return _apply2(_POW, base, ex)
        for cls, f in UNARY.items():
            if isinstance(e, cls) and not isinstance(e, sp.Abs):
                return _apply(f, ev(e.args[0]))
        if isinstance(e, (sp.Max, sp.Min, ir.Clip, sp.Abs, sp.Rel)):
            return self._selection(e, ev)
        if isinstance(e, sp.Piecewise):
            out = None
            for pair in reversed(e.args):
                val = ev(pair.expr)
                if out is None:
                    out = val
                    continue
                c = ev(pair.cond)
                out = np.where(np.asarray(c, dtype=bool), val, out) if isinstance(c, np.ndarray) else (val if c else out)
            return out
        if isinstance(e, (ir.Where, sp.ITE)):
            c, a, b = (ev(x) for x in e.args)
            return np.where(np.asarray(c, dtype=bool), a, b) if isinstance(c, np.ndarray) else (a if c else b)
        if isinstance(e, sp.And):
            out = ev(e.args[0])
            for a in e.args[1:]:
                out = np.logical_and(out, ev(a))
            return out
        if isinstance(e, sp.Or):
            out = ev(e.args[0])
            for a in e.args[1:]:
                out = np.logical_or(out, ev(a))
            return out
        if isinstance(e, sp.Not):
            return np.logical_not(ev(e.args[0]))
        return self._tensor(e, ev, env, memo)

    # ------------------------------------------------------- ties and kinks
    # The selections (comparisons, max/min, clip, abs, the maximum over an axis) are made
    # at the unperturbed point and kept fixed while the differences perturb it (run's
    # `freeze`): each side of a selection is then smooth, and the central difference is
    # the gradient of the side chosen there, with the tie conventions of docs/spec.md:
    # max/min against a bound (a number or hyperparameter) passes the gradient to the
    # tensor, between two differentiated values each side gets half; clip passes it at
    # its bounds; abs'(0) = 0; a condition picks one branch; the maximum over an axis
    # shares it evenly among the tied entries.

    def _fixed(self, e, compute):
        """compute() at the unperturbed point (remembered), its remembered value while frozen."""
        key = ("selection", e)
        if self._freeze and key in self.frozen:
            return self.frozen[key]
        v = compute()
        if not self._freeze:
            self.frozen[key] = v
        return v

    def _selection(self, e, ev):
        if isinstance(e, sp.Rel):
            return self._fixed(e, lambda: self._relation(e, ev))
        if isinstance(e, sp.Abs):
            x = ev(e.args[0])
            sign = self._fixed(e, lambda: _SIGN(x) if isinstance(x, np.ndarray) else mpmath.sign(x))
            return sign * x
        if isinstance(e, ir.Clip):
            x, lo, hi = (ev(a) for a in e.args)
            below, above = self._fixed(e, lambda: (x < lo, x > hi))
            return _where(below, lo, _where(above, hi, x))
        # max/min folded left, tensors first (as the lowering): a tie with a bound keeps the
        # tensor, a tie of two differentiated values is their mean (half the gradient each)
        args = sorted(e.args, key=self._is_bound)
        bigger = np.frompyfunc((lambda u, v: (u > v) - (u < v)) if isinstance(e, sp.Max) else
                               (lambda u, v: (u < v) - (u > v)), 2, 1)
        out = ev(args[0])
        for k, a in enumerate(args[1:]):
            v = ev(a)
            order = self._fixed((e, k), lambda u=out, w=v: _apply2(bigger, u, w))
            tie = out if self._is_bound(a) else (out + v) / 2
            out = _where(order > 0, out, _where(order < 0, v, tie))
        return out

    def _is_bound(self, a) -> bool:
        """A value no gradient flows into: a number or an expression in hyperparameters."""
        params = {self.prog.symbols[p.name] for p in self.prog.spec.params}
        return a.free_symbols <= params and not a.has(ir.Item)

    def _relation(self, e, ev):
        a, b = ev(e.args[0]), ev(e.args[1])
        f = {sp.StrictLessThan: lambda x, y: x < y, sp.LessThan: lambda x, y: x <= y,
             sp.StrictGreaterThan: lambda x, y: x > y, sp.GreaterThan: lambda x, y: x >= y,
             sp.Equality: lambda x, y: x == y, sp.Unequality: lambda x, y: x != y}[type(e)]
        return np.asarray(np.frompyfunc(f, 2, 1)(a, b)).astype(bool) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else bool(f(a, b))

    def _tensor(self, e, ev, env, memo):
        L = self.layout
        if isinstance(e, ir.Size):
            return mpmath.mpf(int(np.prod(self.sizes[e.args[0].name])))
        if isinstance(e, ir.Item):
            return ev(e.args[0]).reshape(-1)[int(e.args[1])]
        if isinstance(e, ir.StopGradient):
            if self._freeze and e in self.frozen:
                return self.frozen[e]
            v = ev(e.args[0])
            if not self._freeze:
                self.frozen[e] = v
            return v
        if isinstance(e, ir.OneHot):
            idx = ev(e.args[0])
            ax = e.args[1].name
            (d,) = L.dims[ax]
            shape = [1] * L.rank
            shape[d] = self.sizes[ax][0]
            rng = np.arange(self.sizes[ax][0]).reshape(shape)
            hit = np.asarray(idx, dtype=object) == rng
            return np.where(hit, mpmath.mpf(1), mpmath.mpf(0)).astype(object)
        x = np.asarray(ev(e.args[0]), dtype=object)
        ax = e.args[-1].name
        dims = L.dims[ax]
        if isinstance(e, ir.Gather):
            idx = np.asarray(ev(e.args[1]), dtype=object).astype(np.int64)
            (d,) = dims
            full = list(np.broadcast_shapes(x.shape, idx.shape))
            full[d] = x.shape[d]
            xb = np.broadcast_to(x, full)
            ishape = list(full)
            ishape[d] = 1
            ib = np.broadcast_to(idx, ishape)
            if (ib < 0).any() or (ib >= x.shape[d]).any():
                raise IndexError("label out of range")
            return np.take_along_axis(xb, ib, axis=d)
        x = np.broadcast_to(x, tuple(self.sizes_full(dims, x.shape)))
        if isinstance(e, ir.ReduceSum):
            return _sum_axes(x, dims)
        if isinstance(e, ir.ReduceMean):
            n = int(np.prod([x.shape[d] for d in dims]))
            return _sum_axes(x, dims) / n
        if isinstance(e, ir.ReduceMax):
            top = np.max(x, axis=dims, keepdims=True)
            hit = self._fixed(e, lambda: np.asarray(x == top, dtype=bool))
            # the tied entries' mean: equal to the maximum, gradient shared evenly among them
            return _sum_axes(np.where(hit, x, mpmath.mpf(0)), dims) / _sum_axes(hit.astype(int), dims)
        if isinstance(e, ir.ARG_EXTREMA):
            (d,) = dims
            return np.expand_dims(np.apply_along_axis(_first_max if isinstance(e, ir.ArgMax) else _first_min,
                                                      d, x), d)
        if isinstance(e, (ir.LogSumExp, ir.Softmax, ir.LogSoftmax)):
            m = np.max(x, axis=dims, keepdims=True)
            ex = _apply(UNARY[sp.exp], x - m)
            s = _sum_axes(ex, dims)
            lse = _apply(UNARY[sp.log], s) + m
            if isinstance(e, ir.LogSumExp):
                return lse
            if isinstance(e, ir.LogSoftmax):
                return x - lse
            return ex / s
        raise TypeError(f"reference: no rule for {type(e).__name__}")

    def sizes_full(self, dims, shape):
        out = list(shape)
        for a, ds in self.layout.dims.items():
            if set(ds) & set(dims):
                for d, n in zip(ds, self.sizes[a]):
                    out[d] = n
        return out


def _first_max(v) -> int:
    """Index of the largest entry, the first one at ties (both frameworks' argmax)."""
    best = 0
    for k in range(1, len(v)):
        if v[k] > v[best]:
            best = k
    return best


def _first_min(v) -> int:
    best = 0
    for k in range(1, len(v)):
        if v[k] < v[best]:
            best = k
    return best


_SIGN = np.frompyfunc(lambda v: mpmath.mpf(mpmath.sign(v)), 1, 1)


def _where(c, a, b):
    if isinstance(c, np.ndarray):
        return np.where(c.astype(bool), a, b)
    return a if c else b


def _apply(f, x):
    return f(x) if isinstance(x, np.ndarray) else f(x)


def _apply2(f, a, b):
    return f(a, b)


def _sum(a) -> mpmath.mpf:
    return mpmath.fsum(np.asarray(a, dtype=object).reshape(-1))


def _sum_axes(x, dims):
    out = x
    for d in sorted(dims, reverse=True):
        out = np.apply_along_axis(lambda v: mpmath.fsum(v), d, out) if out.shape[d] else out
        out = np.expand_dims(out, d)
    return out.astype(object)


def _place(arr: np.ndarray, axes: tuple[str, ...], inp, layout: Layout) -> np.ndarray:
    if inp.broadcast:
        # NumPy broadcasting against the declared (trailing) axes
        target = sum((layout.dims[a] for a in axes), ())
        want = len(target)
        if arr.ndim < want:
            pad = (1,) * (want - arr.ndim)
            arr = arr.reshape(arr.shape + pad if inp.broadcast == "left" else pad + arr.shape)
        shape = [1] * layout.rank
        for d, n in zip(target, arr.shape):
            shape[d] = n
        return arr.reshape(shape)
    return layout.expand(arr, axes)


def infer_sizes(prog: Program, inputs: dict) -> dict[str, tuple[int, ...]]:
    sizes: dict[str, tuple[int, ...]] = {}
    for inp in prog.spec.inputs:
        v = inputs.get(inp.name)
        if v is None or inp.broadcast:
            continue
        shape = np.shape(v)
        names = list(inp.shape)
        nvar = len(shape) - (len(names) - sum(1 for a in names if a.startswith("*")))
        k = 0
        for a in names:
            n = nvar if a.startswith("*") else 1
            got = tuple(shape[k:k + n])
            sizes.setdefault(a.lstrip("*"), got)
            if sizes[a.lstrip("*")] != got:
                raise ValueError(f"input '{inp.name}': axis {a.lstrip('*')} has size {got}, expected {sizes[a.lstrip('*')]}")
            k += n
    absent = {a.lstrip("*") for inp in prog.spec.inputs if inp.optional and inputs.get(inp.name) is None
              for a in inp.shape}
    for a in prog.axes:
        if a not in sizes:
            if a not in absent:
                raise ValueError(f"no input gives the size of axis {a}")
            # carried only by optional inputs that are None: the compiler refuses a loss whose
            # value then depends on the size (E253), so any size gives the same value
            variadic = any(f"*{a}" in inp.shape for inp in prog.spec.inputs)
            sizes[a] = () if variadic else (1,)
    return sizes


def digits_for(inputs: dict, learnable: dict) -> int:
    """Working precision: DPS digits, plus enough that exp(-|x|) still counts next to 1
    (1 - sigmoid(1000) must not cancel to 0), for the largest input magnitude."""
    big = 0.0
    for v in list(inputs.values()) + list(learnable.values()):
        if v is not None:
            a = np.asarray(v, dtype=float)
            if a.size:
                big = max(big, float(np.max(np.abs(a))))
    return reference_digits(big)


@dataclass
class Reference:
    values: dict                  # reduction -> float64 array / float
    grads: dict                   # name -> float64 array of d(sum)/d(name)
    kinks: dict                   # name -> bool mask of non-differentiable points


def reference(prog: Program, inputs: dict, params: dict, learnable: dict | None = None,
              grad_of: list[str] | None = None, max_dps: int | None = None) -> Reference:
    """Values of every reduction and gradients of the summed loss, at DPS digits (more for
    large inputs, at most `max_dps`: the extreme-input suite caps it and compares only
    where the result is finite)."""
    learnable = learnable or {}
    dps = min(digits_for(inputs, learnable), max_dps or limits.MAX_REFERENCE_DPS)
    with mpmath.workdps(dps):
        ev = Evaluator(prog, inputs, params, learnable)
        base = ev.run()
        with np.errstate(over="ignore", invalid="ignore"):  # beyond float64: inf; 0/0: nan
            values = {k: (np.array(v, dtype=object).astype(float) if isinstance(v, np.ndarray) else float(v))
                      for k, v in base.items()}
        grads, kinks = {}, {}
        names = grad_of if grad_of is not None else [
            i.name for i in prog.spec.inputs if i.dtype == "float" and inputs.get(i.name) is not None
        ] + [lr.name for lr in prog.spec.learnable]
        # differences of the per-element loss, summed afterwards: a huge entry elsewhere
        # (exp(8000)) must not absorb the change of this one
        f0 = np.asarray(base["none"], dtype=object).reshape(-1)
        # rounding noise of the differences: entries of size |f| resolve changes of |f| * 10^-dps
        noise = mpmath.fsum(abs(v) for v in f0 if mpmath.isfinite(v)) * mpmath.mpf(10) ** (-mpmath.mp.dps + 2)
        for name in names:
            is_learn = name in learnable
            src = np.asarray(learnable[name] if is_learn else inputs[name], dtype=float)
            mp = to_mp(src)
            g = np.zeros(src.shape)
            kink = np.zeros(src.shape, dtype=bool)
            for k in np.ndindex(src.shape):
                x0 = mp[k]
                h = _H * max(1, abs(x0))
                vals = []
                for sign in (1, -1):
                    pert = mp.copy()
                    pert[k] = x0 + sign * h
                    if is_learn:
                        lrn = dict(ev.learnable)
                        lrn[name] = pert
                        out = ev.run(learnable=lrn, freeze=True)["none"]
                    else:
                        cur = dict(inputs)
                        cur[name] = pert
                        out = ev.run(inputs=cur, freeze=True)["none"]
                    vals.append(np.asarray(out, dtype=object).reshape(-1))
                fp, fm = vals
                right = mpmath.fsum(fp - f0) / h
                left = mpmath.fsum(f0 - fm) / h
                g[k] = float(mpmath.fsum(fp - fm) / (2 * h))
                scale = max(abs(right), abs(left), 1)
                if abs(right - left) > mpmath.mpf(10) ** -6 * scale or noise / h > mpmath.mpf(10) ** -8 * scale:
                    kink[k] = True  # not differentiable here, or not resolved at this precision
            grads[name] = g
            kinks[name] = kink
        return Reference(values, grads, kinks)
