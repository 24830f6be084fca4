"""Arrays of the reference evaluator: the full-rank layout of a program's axes and the
mpmath object-array helpers (conversion, sums, selections, first extrema).

Every tensor is held at the program's full rank (one dimension per axis; a variadic
group expands to its runtime rank), size 1 where it lacks an axis, so NumPy
broadcasting does the alignment.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np
import sympy as sp

from .functions import HUGE
from .parse import Program


class ReferenceCost(ValueError):
    """A case the reference evaluator would take too long on (the limits 'reference_work' and
    'reference_seconds')."""


RELATIONS = {sp.StrictLessThan: lambda x, y: x < y, sp.LessThan: lambda x, y: x <= y,
             sp.StrictGreaterThan: lambda x, y: x > y, sp.GreaterThan: lambda x, y: x >= y,
             sp.Equality: lambda x, y: x == y, sp.Unequality: lambda x, y: x != y}


@dataclass
class Layout:
    """Where each axis lives in the full-rank arrays, for one set of sizes."""

    dims: dict[str, tuple[int, ...]]   # axis -> dimensions
    sizes: dict[str, tuple[int, ...]]  # axis -> sizes (one per dimension)
    rank: int

    @classmethod
    def of(cls, prog: Program, sizes: dict[str, tuple[int, ...]]) -> Layout:
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


def first_max(v) -> int:
    """Index of the largest entry, the first one at ties (both frameworks' argmax)."""
    best = 0
    for k in range(1, len(v)):
        if v[k] > v[best]:
            best = k
    return best


def first_min(v) -> int:
    best = 0
    for k in range(1, len(v)):
        if v[k] < v[best]:
            best = k
    return best


def select(c, a, b):
    if isinstance(c, np.ndarray):
        return np.where(c.astype(bool), a, b)
    return a if c else b


def total(a) -> mpmath.mpf:
    return mpmath.fsum(np.asarray(a, dtype=object).reshape(-1))


def sum_axes(x, dims):
    out = x
    for d in sorted(dims, reverse=True):
        out = np.apply_along_axis(lambda v: mpmath.fsum(v), d, out) if out.shape[d] else out
        out = np.expand_dims(out, d)
    return out.astype(object)


def place(arr: np.ndarray, axes: tuple[str, ...], inp, layout: Layout) -> np.ndarray:
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
    for new, src in prog.aliases.items():  # rename(x, N=M): M has N's size
        if src in sizes:
            sizes[new] = sizes[src]
    for a in prog.axes:
        if a not in sizes:
            if a not in absent:
                raise ValueError(f"no input gives the size of axis {a}")
            # carried only by optional inputs that are None: the compiler refuses a loss whose
            # value then depends on the size (E253), so any size gives the same value
            variadic = any(f"*{a}" in inp.shape for inp in prog.spec.inputs)
            sizes[a] = () if variadic else (1,)
    return sizes


def ieee_divide(a, b):
    """a / b with the floating-point meaning at b = 0 (NaN for 0 / 0, a signed infinity
    otherwise), as the frameworks compute a mean whose denominator sums to 0."""
    if b != 0:
        return a / b
    if a == 0 or mpmath.isnan(a):
        return mpmath.mpf("nan")
    return mpmath.mpf("inf") * mpmath.sign(a)


def near_mask(a, b, tol: float, scale=None) -> np.ndarray | None:
    """Where a and b differ by at most `tol` relative, but are not equal (an exact tie has its
    convention; a near one the dtype's rounding may make a tie or swap): a bool array, or
    None where there is none (or tol is 0, or neither is an array).  `scale` (like a): the
    size of the terms a side sums, where it exceeds the sides (`3x - t` at x = 0.1 and
    t = 0.30000000000000004 is -2.8e-17 exactly, and 0 in float64 arithmetic)."""
    if tol <= 0 or not (isinstance(a, np.ndarray) or isinstance(b, np.ndarray)):
        return None
    close = np.frompyfunc(lambda u, v, s: u != v and mpmath.isfinite(u) and mpmath.isfinite(v)
                          and abs(u - v) <= tol * max(abs(u), abs(v), s), 3, 1)
    m = np.asarray(close(a, b, 0 if scale is None else scale), dtype=bool)
    return m if m.any() else None


def any_of(masks: list):
    """The union of bool masks (broadcast together), None for none; masks of shapes that do
    not broadcast give every position (a relation under a reduction in a condition)."""
    if not masks:
        return None
    try:
        return np.logical_or.reduce(np.broadcast_arrays(*masks))
    except ValueError:
        return np.bool_(True)


def fit_mask(m, *sides):
    """Mask `m` of near relations reduced (any) to the shape of a selection's `sides`: a
    relation under a reduction in the selection's condition (relu(x - max(.., axis=K)))
    has axes the selection lacks, and is near wherever one entry along them is."""
    if m is None or np.ndim(m) == 0:
        return m
    try:
        target = np.broadcast_shapes(*[np.shape(v) for v in sides])
    except ValueError:
        return np.bool_(True)
    if not target:  # two numbers: the selection's shape is its condition's
        return m
    if len(target) < np.ndim(m):
        target = (1,) * (np.ndim(m) - len(target)) + tuple(target)
    axes = tuple(d for d, (k, t) in enumerate(zip(np.shape(m), target)) if t == 1 and k > 1)
    out = np.any(m, axis=axes, keepdims=True) if axes else m
    return out if len(np.shape(out)) == len(np.shape(m)) and np.ndim(out) else np.any(out)


_SLOPE_RTOL = mpmath.mpf(10) ** -6  # sides whose slopes agree this closely select the same gradient


def slopes_differ(mask, up: tuple, down: tuple, h) -> bool:
    """Whether the two sides of a selection change differently, somewhere in `mask`, between
    the runs `up` and `down` ((side a, side b) each, an entry moved by +h and -h): there the
    choice a dtype's rounding makes decides the entry's gradient."""
    (a1, b1), (a0, b0) = up, down
    da = (np.asarray(a1, dtype=object) - np.asarray(a0, dtype=object)) / (2 * h)
    db = (np.asarray(b1, dtype=object) - np.asarray(b0, dtype=object)) / (2 * h)
    try:
        m, da, db = np.broadcast_arrays(np.asarray(mask, dtype=bool), da, db)
    except ValueError:
        m, (da, db) = None, (np.asarray(v).reshape(-1) for v in np.broadcast_arrays(da, db))
    for u, v in (zip(da[m], db[m]) if m is not None else zip(da, db)):
        if not (mpmath.isfinite(u) and mpmath.isfinite(v)) or abs(u - v) > _SLOPE_RTOL * max(abs(u), abs(v)):
            return True
    return False


def mp_real(v):
    if isinstance(v, mpmath.mpc):
        return mpmath.mpf("nan") if v.imag != 0 else v.real
    return v


def mp_pow(a, b):
    try:
        if a == 0 and b < 0:
            return mpmath.mpf("inf")
        if a < 0 and not mpmath.isint(b):
            return mpmath.mpf("nan")
        if abs(b) > HUGE and abs(a) != 1:  # as a float's infinite exponent: costs its digits otherwise
            return mpmath.mpf("inf") if (abs(a) > 1) == (b > 0) else mpmath.mpf(0)
        return mp_real(mpmath.power(a, b))
    except (ValueError, ZeroDivisionError):
        return mpmath.mpf("nan")


def mp_sqrt(x):
    return mpmath.sqrt(x) if x >= 0 else mpmath.mpf("nan")
