"""The reference evaluator's tensor operators (a part of :class:`losscc.refeval.Evaluator`):
sizes, items, one-hot, index, rename, shifts, gathers, reductions over an axis and the
softmax family, on object arrays of mpf in the evaluator's layout."""

from __future__ import annotations

import mpmath
import numpy as np

from . import functions
from .refarrays import first_max, first_min, ieee_divide, sum_axes

_IEEE_DIVIDE = np.frompyfunc(ieee_divide, 2, 1)
_ISNAN = np.frompyfunc(mpmath.isnan, 1, 1)

_EXP = np.frompyfunc(functions.mp_exp, 1, 1)
_LOG = np.frompyfunc(functions.mp_log, 1, 1)


class TensorOps:
    """Mixin of Evaluator: needs its layout, sizes, params, `_fixed` and the near-tie watch
    (`_sides`, `_terms`, `_out`)."""

    def _eval_Size(self, e, ev):
        return mpmath.mpf(int(np.prod(self.sizes[e.args[0].name])))

    def _eval_Item(self, e, ev):
        return ev(e.args[0]).reshape(-1)[int(e.args[1])]

    def _eval_Component(self, e, ev):
        x = np.asarray(ev(e.args[0]), dtype=object)
        (d,) = self.layout.dims[e.args[-1].name]
        k = int(e.args[1]) if x.shape[d] > 1 else 0  # a value constant along the axis
        return np.take(x, [k], axis=d)

    def _eval_StopGradient(self, e, ev):
        if self._freeze and not self.thaw and e in self.frozen:
            return self.frozen[e]
        v = ev(e.args[0])
        if not self._freeze:
            self.frozen[e] = v
        return v

    def _eval_OneHot(self, e, ev):
        L = self.layout
        idx = ev(e.args[0])
        ax = e.args[1].name
        (d,) = L.dims[ax]
        shape = [1] * L.rank
        shape[d] = self.sizes[ax][0]
        rng = np.arange(self.sizes[ax][0]).reshape(shape)
        hit = np.asarray(idx, dtype=object) == rng
        return np.where(hit, mpmath.mpf(1), mpmath.mpf(0)).astype(object)

    def _eval_Index(self, e, ev):
        ax = e.args[0].name
        (d,) = self.layout.dims[ax]
        shape = [1] * self.layout.rank
        shape[d] = self.sizes[ax][0]
        return np.array([mpmath.mpf(k) for k in range(shape[d])], dtype=object).reshape(shape)

    def _eval_Rename(self, e, ev):
        x = np.asarray(ev(e.args[0]), dtype=object)
        (old,), (new,) = self.layout.dims[e.args[1].name], self.layout.dims[e.args[2].name]
        if x.ndim < self.layout.rank:
            x = x.reshape((1,) * (self.layout.rank - x.ndim) + x.shape)
        return np.swapaxes(x, old, new)

    def _eval_Diff(self, e, ev):
        x, (d,) = self._along(e, ev)
        n = x.shape[d]
        later = np.take(x, range(1, n), axis=d) - np.take(x, range(0, n - 1), axis=d)
        zero = np.full_like(np.take(x, [0], axis=d), mpmath.mpf(0))
        return np.concatenate([later, zero], axis=d)

    def _eval_Gather(self, e, ev):
        x = np.asarray(ev(e.args[0]), dtype=object)
        x = x.reshape((1,) * (self.layout.rank - x.ndim) + x.shape)  # a value constant along the axis too
        idx = np.asarray(ev(e.args[1]), dtype=object).astype(np.int64)
        (d,) = self.layout.dims[e.args[-1].name]
        full = list(np.broadcast_shapes(x.shape, idx.shape))
        full[d] = x.shape[d]
        ishape = list(full)
        ishape[d] = 1
        ib = np.broadcast_to(idx, ishape)
        if (ib < 0).any() or (ib >= self.sizes[e.args[-1].name][0]).any():
            raise IndexError("label out of range")
        return np.take_along_axis(np.broadcast_to(x, full), ib if x.shape[d] > 1 else 0 * ib, axis=d)

    def _along(self, e, ev):
        """The operand of an operator over an axis, at the axis's full size, and its dimensions."""
        x = np.asarray(ev(e.args[0]), dtype=object)
        if x.ndim < self.layout.rank:  # a number (x - x folded to 0): at the layout's rank
            x = x.reshape((1,) * (self.layout.rank - x.ndim) + x.shape)
        dims = self.layout.dims[e.args[-1].name]
        return np.broadcast_to(x, tuple(self.sizes_full(dims, x.shape))), dims

    def _eval_ReduceSum(self, e, ev):
        x, dims = self._along(e, ev)
        return sum_axes(x, dims)

    def _eval_ReduceMean(self, e, ev):
        x, dims = self._along(e, ev)
        n = int(np.prod([x.shape[d] for d in dims]))
        return sum_axes(x, dims) / n

    def _eval_ReduceMax(self, e, ev):
        x, dims = self._along(e, ev)
        top = np.max(x, axis=dims, keepdims=True)
        nan_row = np.any(np.asarray(_ISNAN(x), dtype=bool), axis=dims, keepdims=True)
        top = np.where(nan_row, mpmath.mpf("nan"), top)  # NaN propagates, as in the frameworks
        hit = self._fixed(e, lambda: np.asarray(x == top, dtype=bool))
        self._mark(np.sum(np.asarray(hit, dtype=int), axis=tuple(dims)) > 1)
        # an entry near the maximum (relative to them or to the terms x sums) is a near tie
        # the dtype's rounding may make exact or swap: watched like max(a, b)'s two sides
        self._sides((e, "max"), np.broadcast_to(top, x.shape), x, scale=self._terms(ev, e.args[0]))
        # the tied entries' mean: equal to the maximum, gradient shared evenly among them; a
        # row holding NaN has no entry equal to its maximum, and its maximum is NaN
        out = _IEEE_DIVIDE(sum_axes(np.where(hit, x, mpmath.mpf(0)), dims), sum_axes(hit.astype(int), dims))
        return self._out((e, "max"), out, dims)

    def _eval_ArgMax(self, e, ev):
        x, (d,) = self._along(e, ev)
        return np.expand_dims(np.apply_along_axis(first_max, d, x), d)

    def _eval_ArgMin(self, e, ev):
        x, (d,) = self._along(e, ev)
        return np.expand_dims(np.apply_along_axis(first_min, d, x), d)

    def _softmax_parts(self, e, ev):
        x, dims = self._along(e, ev)
        m = np.max(x, axis=dims, keepdims=True)
        ex = _EXP(x - m)
        s = sum_axes(ex, dims)
        return x, ex, s, _LOG(s) + m

    def _eval_LogSumExp(self, e, ev):
        return self._softmax_parts(e, ev)[3]

    def _eval_LogSoftmax(self, e, ev):
        x, _, _, lse = self._softmax_parts(e, ev)
        return x - lse

    def _eval_Softmax(self, e, ev):
        _, ex, s, _ = self._softmax_parts(e, ev)
        return ex / s

    def sizes_full(self, dims, shape):
        out = list(shape)
        for a, ds in self.layout.dims.items():
            if set(ds) & set(dims):
                for d, n in zip(ds, self.sizes[a]):
                    out[d] = n
        return out

