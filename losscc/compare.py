"""How `losscc verify` compares: tolerances, the two checks, and the messages.

Two checks per compared array (values of every reduction, gradients of the summed
loss), both of which must pass: the norm-wise one of earlier versions, and a per-element
relative one against the reference, bounded below by each element's own condition (see
``docs/verify.md``).  Pure NumPy: no framework is imported here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .cases import CaseData

TOLERANCES = {  # norm-wise (rtol, atol); atol is scaled by the largest magnitude of the compared array
    "float64": (1e-10, 1e-12),
    "float32": (1e-5, 1e-6),
}


@dataclass(frozen=True)
class Tolerance:
    """Per-element bound for one dtype and quantity: |actual - expected| <= rtol * |expected|
    wherever the expected value is a normal number of the dtype."""
    dtype: str
    quantity: str          # "value" or "gradient"
    rtol: float
    reason: str

    @property
    def ulps(self) -> float:
        return self.rtol / float(np.finfo(self.dtype).eps)

    def as_dict(self) -> dict:
        rtol0, atol = TOLERANCES[self.dtype]
        return {"per_element_rtol": self.rtol, "ulps": round(self.ulps, 1), "norm_rtol": rtol0,
                "norm_atol": atol, "reason": self.reason}


_EPS64, _EPS32 = 2.0 ** -52, 2.0 ** -23
ELEMENT_TOLERANCES = {
    ("float64", "value"): Tolerance(
        "float64", "value", 256 * _EPS64,
        "256 ulps: a value passes through a chain of up to a few dozen libm calls (log, exp, log1p, "
        "softplus, logsumexp), each within a few ulps, and through sums of a handful of terms; "
        "the reference (mpmath, 40 digits) is exact to far below one ulp"),
    ("float64", "gradient"): Tolerance(
        "float64", "gradient", 1024 * _EPS64,
        "1024 ulps, 4x the value's: reverse mode runs the forward chain and a backward chain of the same "
        "length whose local derivatives (1 - sigmoid, softmax - one_hot) round again; the reference is a "
        "central difference at 40 digits with step 1e-15 (truncation ~1e-30 relative; rounding ~1e-25 of "
        "the loss, at most 1e-16 of the entry, with more digits where the loss dwarfs it), so none of "
        "the looseness is for the reference"),
    ("float32", "value"): Tolerance(
        "float32", "value", 1e-5,
        "1e-5 (~84 ulps): float32 CPU kernels of both frameworks use vectorised exp/log approximations "
        "of a few ulps, and float32 sums accumulate in float32 (n * eps for n terms); compared with the "
        "reference at the float32-rounded inputs, so input rounding is not counted"),
    ("float32", "gradient"): Tolerance(
        "float32", "gradient", 4e-5,
        "4e-5 (~336 ulps), 4x the value's for the backward chain as in float64; the float32 reference "
        "gradient is the same 40-digit central difference at the rounded inputs"),
}


class Gradients(dict):
    """name -> expected gradient; `of_value`: the reference's derivative with each
    stop_gradient the identity (reference.Reference.value_grads), which the value's
    condition takes; None where it is the gradient itself.  `ties`: the one-sided slopes
    where the point has an exact tie (refties.TieSlopes), which the value's condition and
    the gradient's floor take as well."""

    of_value: dict | None = None
    ties: object = None
    condition: np.ndarray | None = None  # reference.Reference.condition: S_i element by element



def sensitivity(prog, case: CaseData, grads: dict, loss_shape) -> np.ndarray | None:
    """S_i = sum over the float inputs (not those of a finite set of values: labels are exact
    data) and learnables x of |x_j * d(sum)/d(x_j)|, gathered onto
    the loss elements i that x_j feeds (summed over the axes the loss lacks, spread over those
    x lacks).  An element's value can only be as accurate, relative to itself, as its
    condition: an error of eps in each operand moves it by about eps * S_i (log(cosh(d)) at
    d = 1e-8 has S ~ 2e-16 of its own size; exp(x) - 20 at x = 3 has S = 60).  None where the
    layout cannot be found (the check then uses |e| alone)."""
    from .refarrays import Layout, infer_sizes
    from .refarrays import place as _place

    try:
        sizes = infer_sizes(prog, case.inputs)
        lay = Layout.of(prog, sizes)
        loss_axes = prog.typeof(prog.loss).axes
        keep = {d for ax in loss_axes for d in lay.dims[ax]}
        full = [1] * lay.rank
        for ax in loss_axes:
            for d, n in zip(lay.dims[ax], sizes[ax]):
                full[d] = n
        total = np.zeros(full)
        extra = 0.0
        with np.errstate(invalid="ignore", over="ignore"):
            for inp in prog.spec.inputs:
                x = case.inputs.get(inp.name)
                if x is None or inp.name not in grads or inp.domain.is_set:
                    continue  # a label from a finite set ({0, 1}) is exact data, no operand to round
                sx = np.abs(np.asarray(x, dtype=float) * np.asarray(grads[inp.name], dtype=float).reshape(x.shape))
                sx = _place(np.where(np.isfinite(sx), sx, 0.0), prog.types[prog.symbols[inp.name]].axes, inp, lay)
                drop = tuple(d for d in range(lay.rank) if d not in keep and sx.shape[d] > 1)
                total = total + (sx.sum(axis=drop, keepdims=True) if drop else sx)
            for lr in prog.spec.learnable:
                if lr.name in grads:
                    w = np.abs(np.asarray(case.learnable[lr.name], dtype=float) * np.asarray(grads[lr.name]))
                    extra += float(np.sum(np.where(np.isfinite(w), w, 0.0)))
        out = lay.squeeze(np.broadcast_to(total + extra, full), loss_axes)
        return np.asarray(out, dtype=float).reshape(loss_shape)
    except (ValueError, KeyError, IndexError):
        return None


def value_floors(exp_none, sens) -> tuple[np.ndarray | None, float]:
    """(per-element floor of the 'none' value, floor of a sum or mean relative to itself):
    the 'none' floor is S_i; a sum or mean of terms l_i may lose (sum |l_i| + S_i) / |sum l_i|
    of its relative accuracy (mixed signs, cancelling operands)."""
    e = np.asarray(exp_none, dtype=float).reshape(-1)
    fin = np.isfinite(e)
    s = np.zeros(e.shape) if sens is None else np.asarray(sens, dtype=float).reshape(-1)
    total = abs(float(np.sum(e[fin])))
    spread = float(np.sum(np.abs(e[fin]) + s[fin]))
    cond = 1.0 if spread == 0.0 else (float("inf") if total == 0.0 else max(1.0, spread / total))
    return (None if sens is None else np.asarray(sens, dtype=float)), cond


@dataclass
class Check:
    """The outcome of comparing one array: norm-wise error measure, largest per-element relative
    error (normal expected values only) and, if it failed, what and where."""
    ok: bool
    norm_err: float = 0.0
    rel_err: float | None = 0.0  # None: no per-element check ran (--norm-only, a library's gradient)
    problem: str = ""
    per_element: bool = False    # failed the per-element check alone (the norm-wise one passed)


def _fmt_index(idx, shape) -> str:
    return "[" + ", ".join(str(int(i)) for i in idx) + "]" if len(shape) else "[] (the scalar)"


def _describe(x: float) -> str:
    return "NaN" if np.isnan(x) else ("inf" if x > 0 else "-inf") if np.isinf(x) else f"{x:.17g}"


def check(actual, expected, dtype: str, quantity: str = "value", mask=None, rtol=None,
          magnitude: float = 1.0, condition: float = 1.0, floor=None, truth=None, spread=None) -> Check:
    """Compare an array with its expectation, two ways; both must pass.

    1. Norm-wise: |a - e| <= atol * scale + rtol * |e| with scale = max(1, max |e|, magnitude)
       (`magnitude`: the case's largest float input; a result formed from operands of size M
       carries rounding errors of about eps * M however small it is after cancellation).
    2. Per element: |a - e| <= rtol_q * (condition * |e| + floor) where e is a normal number
       of `dtype` (ELEMENT_TOLERANCES[dtype, quantity]); `condition` (>= 1) is the
       cancellation factor of a sum or mean, `floor` (an array like e, or a number) the
       element's own condition scale: S_i of :func:`sensitivity` for values, the largest
       |gradient| of the array for gradients (see docs/verify.md).  Where e is zero or
       subnormal the check is absolute: |a - e| <= max(rtol_q * floor, smallest normal).
    `truth` (same shape), where given, replaces `expected` in check 2: a library's float64
    value is a fine check of the formula but not correct to the last ulps where it cancels;
    `truth=False` skips check 2.  `spread` (an array like e): the gradient's own condition
    C_i, which widens check 1 too by rtol_q * C_i (no float code can do better than its
    inputs' rounding allows, norm-wise either).  NaN and inf must match exactly. Masked
    entries (kinks) are not compared."""
    rtol0, atol = TOLERANCES[dtype]
    rtol0 = max(rtol0, rtol or 0.0)
    tol = ELEMENT_TOLERANCES[(dtype, quantity)]
    rtol_el = max(tol.rtol, rtol or 0.0)
    a = np.asarray(actual, dtype=float)
    e = np.asarray(expected, dtype=float)
    if a.shape != e.shape:
        if a.size != e.size:
            return Check(False, float("inf"), float("inf"),
                         f"has shape {list(a.shape)}, expected {list(e.shape)}")
        a = a.reshape(e.shape)
    keep = np.ones(e.shape, dtype=bool) if mask is None else ~np.broadcast_to(mask, e.shape)
    if not keep.any():
        return Check(True)
    bad_nonfinite = keep & ~((np.isfinite(a) & np.isfinite(e)) | (a == e) | (np.isnan(a) & np.isnan(e)))
    if bad_nonfinite.any():
        idx = np.argwhere(bad_nonfinite)[0]
        t = tuple(idx)
        return Check(False, float("inf"), float("inf"),
                     f"is {_describe(a[t])} at element {_fmt_index(idx, e.shape)} (expected {_describe(e[t])})")
    fin = keep & np.isfinite(e)
    if not fin.any():
        return Check(True)
    ef, af = e[fin], a[fin]
    scale = max(1.0, float(np.max(np.abs(ef))), magnitude)
    widen = 0.0
    if spread is not None:
        s = np.broadcast_to(np.asarray(spread, dtype=float), e.shape)[fin]
        widen = rtol_el * np.where(np.isfinite(s), s, 0.0)
    err = np.abs(af - ef)
    with np.errstate(divide="ignore", invalid="ignore"):
        norm = err / np.maximum(np.abs(ef), atol * scale / rtol0)
    norm_err = float(np.max(norm))
    if truth is False:
        return Check(True, norm_err, None) if not np.any(err > atol * scale + rtol0 * np.abs(ef) + widen) else \
            _norm_failure(a, e, err, norm, fin, atol, scale, rtol0, norm_err)
    if truth is not None:
        t_arr = np.asarray(truth, dtype=float).reshape(e.shape)
        fin_t = np.isfinite(t_arr[fin])
        ef = np.where(fin_t, t_arr[fin], ef)
        err = np.abs(af - ef)
    if floor is None and quantity == "gradient":
        floor = gradient_floor(e, mask)
    tiny = float(np.finfo(dtype).tiny)
    normal = np.abs(ef) >= tiny
    fl = np.zeros(e.shape) if floor is None else np.broadcast_to(np.asarray(floor, dtype=float), e.shape)
    fl = np.where(np.isfinite(fl), fl, 0.0)[fin]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rel = np.where(normal, err / np.where(normal, np.abs(ef), 1.0), 0.0)
        bound = np.where(normal, rtol_el * (max(1.0, condition) * np.abs(ef) + fl), np.maximum(rtol_el * fl, tiny))
    rel_err = float(np.max(rel))
    positions = np.argwhere(fin)
    err_n = np.abs(af - e[fin])
    if np.any(err_n > atol * scale + rtol0 * np.abs(e[fin]) + widen):
        c = _norm_failure(a, e, err_n, norm, fin, atol, scale, rtol0, norm_err)
        return Check(False, norm_err, rel_err, c.problem)
    over_el = err > bound
    if over_el.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            k = int(np.argmax(np.where(over_el, err / bound, -1.0)))
        t = tuple(positions[k])
        what = f"relative error {rel[k]:.3g}" if normal[k] else f"absolute error {err[k]:.3g} (expected value subnormal or 0)"
        cond = f" x condition {condition:.3g}" if condition > 1 else ""
        return Check(False, norm_err, rel_err, per_element=True, problem=
                     f"{what} at element {_fmt_index(positions[k], e.shape)}: got {_describe(a[t])}, "
                     f"expected {_describe(float(ef[k]))}{' (reference)' if truth is not None else ''} (bound {bound[k]:.3g}: per-element {quantity} rtol "
                     f"{rtol_el:.3g}{cond}, floor {fl[k]:.3g})")
    return Check(True, norm_err, rel_err)


def _norm_failure(a, e, err, norm, fin, atol, scale, rtol0, norm_err) -> Check:
    positions = np.argwhere(fin)
    over = err > atol * scale + rtol0 * np.abs(e[fin])
    k = int(np.argmax(np.where(over, norm, -1.0)))
    t = tuple(positions[k])
    return Check(False, norm_err, 0.0,
                 f"off by {norm_err:.3g} (norm-wise) at element {_fmt_index(positions[k], e.shape)}: "
                 f"got {_describe(a[t])}, expected {_describe(e[t])} (bound {atol:g} * {scale:.3g} + "
                 f"{rtol0:g} * |expected|)")


def compare(actual, expected, dtype: str, mask=None, rtol=None, magnitude: float = 1.0) -> tuple[bool, float]:
    """(ok, error measure) of the norm-wise check alone, as before the per-element check
    existed (kept for property tests of random formulas, whose accuracy as written is not
    the point); `losscc verify` uses :func:`check`."""
    c = check(actual, expected, dtype, "value", mask, rtol, magnitude, truth=False)
    return c.ok, c.norm_err


def error_line(exc: BaseException) -> str:
    """`Type: message` of an exception raised by generated code, reduced to the line that says
    what went wrong, with the generated line that raised it where the framework names one.
    Two shapes of compiler error are known: one wraps the original error in a dump of the
    transformed code ("In transformed code: ..."), whose last `SomethingError: ...` line is the
    original and whose `<--- HERE` marks the statement; the other appends C++ call stacks and
    a traceback of the compiled code ("# 0 In file ...") after the message."""
    text = str(exc).strip()
    raw = text.splitlines()
    lines = [ln.strip() for ln in raw if ln.strip()]
    kind = type(exc).__name__
    where = ""
    for k, ln in enumerate(raw):
        if "<--- HERE" in ln and k > 0:
            where = raw[k - 1].strip()
        elif re.match(r"^# ?0 In file ", ln.strip()) and k + 1 < len(raw):
            where = raw[k + 1].strip()
    at = f" (at: {where[:120]})" if where else ""
    if "In transformed code" in text:
        orig = [ln for ln in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b:", ln)
                and "In transformed code" not in ln]
        if orig:
            return orig[-1][:300] + at
        body = [ln for ln in lines if not ln.startswith(("File ", "In transformed code")) and "<--- HERE" not in ln
                and not set(ln) <= set("~^ ")]
        return f"{kind}: {(body or lines or [''])[-1][:300]}{at}"
    banner = re.compile(r"^(-{3,}|={3,}|- (C\+\+ Call Stack|The Traceback|Framework Error Message|Python Traceback)"
                        r"|\(See |For more details|#\s?\d* ?In file )")
    meaningful = [ln for ln in lines if not banner.match(ln)]
    return f"{kind}: {(meaningful or [''])[0][:300]}{at}"


def _magnitude(case: CaseData) -> float:
    vals = [np.max(np.abs(v)) for v in case.inputs.values() if v is not None and v.dtype.kind == "f" and v.size]
    return float(max(vals, default=1.0))


def gradient_floor(g, mask=None) -> float:
    """The largest finite |entry| of an expected gradient (kinks left out): a gradient entry
    is a sum of chain-rule terms whose cancellation leaves an error of eps times their size,
    and those terms are as large as the array's largest entries (softmax - one_hot)."""
    g = np.asarray(g, dtype=float)
    keep = np.isfinite(g) if mask is None else np.isfinite(g) & ~np.broadcast_to(mask, g.shape)
    return float(np.max(np.abs(g[keep]), initial=0.0))


def _items(prog, case, vals, grads, exp_vals, exp_grads, kinks, reds, dtype=None, truth=None):
    """(quantity, name, actual, expected, mask, condition, floor, truth) of every compared array;
    with `dtype` the expectations are rounded to it and their non-finite entries masked.
    `truth`: the reference's values where the expectations are a library's (None: they are
    the reference's); gradients taken from a library file get the norm-wise check only."""
    def rounded(w):
        if dtype is None:
            return w
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(w, dtype=float).astype(dtype).astype(float)

    none = exp_vals.get("none") if truth is None else truth.get("none")
    shape = np.shape(none) if none is not None else None
    ties = getattr(exp_grads, "ties", None)
    of_value = getattr(exp_grads, "of_value", None) or exp_grads
    own = getattr(exp_grads, "condition", None)
    if own is not None and none is not None and np.size(own) == np.size(none):  # the reference's, per element
        sens = np.reshape(own, np.shape(none))
    else:  # a library's gradients: spread from them
        sens = sensitivity(prog, case, of_value, shape) if prog is not None and none is not None and exp_grads else None
    if ties is not None and none is not None and np.size(ties.condition) == np.size(none):
        at_ties = np.reshape(ties.condition, np.shape(none))
        sens = at_ties if sens is None else np.maximum(sens, at_ties)
    el_floor, cond = value_floors(none, sens) if none is not None else (None, 1.0)
    out = []
    for r in reds:
        w = rounded(exp_vals[r])
        mask = None if dtype is None else ~np.isfinite(w)
        tv = None if truth is None else truth.get(r, False)
        out.append(("value", r, vals[r], w, mask, 1.0 if r == "none" else cond, el_floor if r == "none" else 0.0,
                    tv))
    for n, g in exp_grads.items():
        if n not in grads:
            continue
        w = rounded(g)
        mask = kinks.get(n)
        if dtype is not None:
            mask = ~np.isfinite(w) if mask is None else ~np.isfinite(w) | np.broadcast_to(mask, w.shape)
        floor = gradient_floor(w, mask)
        if ties is not None and n in ties.grads:  # at an exact tie: at least the one-sided slopes
            floor = np.maximum(floor, np.where(np.isfinite(ties.grads[n]), ties.grads[n], 0.0).reshape(np.shape(w)))
        out.append(("gradient", n, grads[n], w, mask, 1.0, floor, False if case.grads else None))
    return out


def _with_condition(c: Check, name: str, grad_cond, redo) -> Check:
    """A gradient that failed with finite errors, checked again with its floor raised to its
    own condition, which widens the norm-wise bound too (`grad_cond(name)`:
    reference.gradient_condition, computed only here, where the largest entry of the array
    is not floor enough)."""
    if c.ok or not (c.per_element or np.isfinite(c.norm_err)) or grad_cond is None:
        return c
    extra = grad_cond(name)
    return c if extra is None else redo(extra)


def _extreme_check(case, vals, grads, exp_vals, exp_grads, kinks, dtype, reds, row=None, prog=None,
                   strict: bool = False, grad_cond=None) -> list[str]:
    """Extreme inputs: every value and gradient finite wherever the reference, rounded to the
    computation dtype, is finite; and equal to it there, by :func:`check` (norm-wise atol ten
    times the ordinary one, no input magnitude: the inputs are extreme on purpose).
    `grad_cond(name)`: the gradient's own condition, for :func:`_with_condition`."""
    fails = []
    for quantity, name, got, w, skip, cond, floor, _ in _items(prog, case, vals, grads, exp_vals, exp_grads,
                                                               kinks, reds, dtype):
        label = f"value ({name})" if quantity == "value" else f"gradient d/d{name}"
        if np.size(got) == np.size(w):
            got = np.asarray(got, dtype=float).reshape(np.shape(w))
        keep = np.isfinite(w) if skip is None else ~np.broadcast_to(skip, np.shape(w))
        big = float(np.max(np.abs(np.asarray(w)[keep]), initial=0.0))
        def run(fl, spread=None, got=got, w=w, quantity=quantity, skip=skip, big=big, cond=cond):
            return check(got, w, dtype, quantity, skip, magnitude=10 * max(1.0, big), condition=cond, floor=fl,
                         truth=None if strict else False, spread=spread)
        c = run(floor)
        if quantity == "gradient":
            c = _with_condition(c, name, grad_cond, lambda g, run=run, floor=floor, w=w: run(
                np.maximum(floor, np.reshape(g, np.shape(w))), np.reshape(g, np.shape(w))))
        if row is not None:
            _note(row, quantity, c)
        if not c.ok:
            fails.append(f"{case.id}: {label} {c.problem}")
        elif quantity == "value":
            fails += _overflowed(case, label, got, w, dtype)
    return fails


def _overflowed(case, label: str, got, w, dtype: str) -> list[str]:
    """Where the reference's value overflows the dtype (inf once rounded), a program can give
    inf of its sign, a value as large, or NaN (inf - inf on the way), not an ordinary number:
    `exp(x) - 1` at x = 100 in float32 returned -1 and passed (red-team round 15)."""
    w = np.asarray(w, dtype=float)
    if np.shape(got) != np.shape(w) or not np.isinf(w).any():
        return []
    a = np.asarray(got, dtype=float)
    big = float(np.finfo(dtype).max) / 2
    with np.errstate(invalid="ignore"):
        ok = np.isnan(a) | ((np.sign(a) == np.sign(w)) & (np.abs(a) >= big))
    bad = np.isinf(w) & ~ok
    if not bad.any():
        return []
    idx = np.argwhere(bad)[0]
    t = tuple(idx)
    return [f"{case.id}: {label} is {_describe(a[t])} at element {_fmt_index(idx, w.shape)}, where the reference "
            f"overflows {dtype} ({_describe(w[t])})"]


def _note(row, quantity: str, c: Check) -> None:
    def worst(seen, new):  # None until a per-element check has run
        return seen if new is None else new if seen is None else max(seen, new)

    if quantity == "value":
        row.value_err, row.value_rel = max(row.value_err, c.norm_err), worst(row.value_rel, c.rel_err)
    else:
        row.grad_err, row.grad_rel = max(row.grad_err, c.norm_err), worst(row.grad_rel, c.rel_err)


def _check_case(row, case: CaseData, vals, grads, exp_vals, exp_grads, kinks, dtype, reds,
                prog=None, truth=None, strict: bool = False, grad_cond=None) -> list[str]:
    """The ordinary comparison of one case's values (every reduction) and gradients."""
    fails = []
    mag = _magnitude(case)
    for quantity, name, got, want, mask, cond, floor, tv in _items(prog, case, vals, grads, exp_vals, exp_grads,
                                                                   kinks, reds, truth=truth):
        if quantity == "gradient" and mask is not None:
            row.skipped_kinks += int(np.sum(mask))
        def run(fl, spread=None, got=got, want=want, quantity=quantity, mask=mask, cond=cond, tv=tv):
            return check(got, want, dtype, quantity, mask, rtol=case.rtol if quantity == "value" else None,
                         magnitude=mag, condition=cond, floor=fl, truth=tv if strict else False, spread=spread)
        c = run(floor)
        if quantity == "gradient":
            c = _with_condition(c, name, grad_cond, lambda g, run=run, floor=floor, want=want: run(
                np.maximum(floor, np.reshape(g, np.shape(want))), np.reshape(g, np.shape(want))))
        _note(row, quantity, c)
        if not c.ok:
            fails.append(f"{case.id}: {'value (' + name + ')' if quantity == 'value' else 'gradient d/d' + name} "
                         f"{c.problem}")
    return fails
