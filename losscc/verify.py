"""``losscc verify``: run the generated code and compare it with the references.

For each spec x backend x dtype x mode the generated class is built with each
case's hyperparameters and called for every reduction; the gradient of the
summed loss is taken with respect to every float input and learnable tensor.
Expectations come from the spec's own cases, from case files (``references:`` or
``--cases``), and for random cases from :mod:`losscc.reference` (mpmath).

This is the only module of the package that imports the frameworks, and only
inside the runner functions.  MindSpore is always imported before Paddle.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .cases import CaseData, extreme_cases, load_case_file, random_cases, reference_cases, spec_cases
from .errors import SpecError
from .parse import build_program
from .reference import reference
from .spec import Spec

BACKENDS = ("mindspore", "paddle")
MODES = ("eager", "graph")
DTYPES = ("float64", "float32")


@dataclass
class Row:
    spec: str
    backend: str
    dtype: str
    mode: str
    cases: int = 0
    value_err: float = 0.0      # largest norm-wise error measure of values
    grad_err: float = 0.0       # ... of gradients
    value_rel: float = 0.0      # largest per-element relative error of values (normal expectations)
    grad_rel: float = 0.0       # ... of gradients
    skipped_kinks: int = 0
    failures: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict:
        tols = {q: ELEMENT_TOLERANCES[(self.dtype, q)].as_dict() for q in ("value", "gradient")}
        return dict(spec=self.spec, backend=self.backend, dtype=self.dtype, mode=self.mode, cases=self.cases,
                    max_rel_value=self.value_err, max_rel_grad=self.grad_err,
                    max_elem_rel_value=self.value_rel, max_elem_rel_grad=self.grad_rel,
                    kinks_skipped=self.skipped_kinks, tolerances=tols,
                    verdict="pass" if self.ok else "FAIL", failures=self.failures)


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
        "central difference at 40 digits with step 1e-15 (truncation ~1e-30, rounding ~1e-25 relative), "
        "so none of the looseness is for the reference"),
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


def sensitivity(prog, case: CaseData, grads: dict, loss_shape) -> np.ndarray | None:
    """S_i = sum over the float inputs and learnables x of |x_j * d(sum)/d(x_j)|, gathered onto
    the loss elements i that x_j feeds (summed over the axes the loss lacks, spread over those
    x lacks).  An element's value can only be as accurate, relative to itself, as its
    condition: an error of eps in each operand moves it by about eps * S_i (log(cosh(d)) at
    d = 1e-8 has S ~ 2e-16 of its own size; exp(x) - 20 at x = 3 has S = 60).  None where the
    layout cannot be found (the check then uses |e| alone)."""
    from .reference import Layout, _place, infer_sizes

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
                if x is None or inp.name not in grads:
                    continue
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
    rel_err: float = 0.0
    problem: str = ""


def _fmt_index(idx, shape) -> str:
    return "[" + ", ".join(str(int(i)) for i in idx) + "]" if len(shape) else "[] (the scalar)"


def _describe(x: float) -> str:
    return "NaN" if np.isnan(x) else ("inf" if x > 0 else "-inf") if np.isinf(x) else f"{x:.17g}"


def check(actual, expected, dtype: str, quantity: str = "value", mask=None, rtol=None,
          magnitude: float = 1.0, condition: float = 1.0, floor=None, truth=None) -> Check:
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
    `truth=False` skips check 2.  NaN and inf must match exactly. Masked entries (kinks)
    are not compared."""
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
    err = np.abs(af - ef)
    with np.errstate(divide="ignore", invalid="ignore"):
        norm = err / np.maximum(np.abs(ef), atol * scale / rtol0)
    norm_err = float(np.max(norm))
    if truth is False:
        return Check(True, norm_err, 0.0) if not np.any(err > atol * scale + rtol0 * np.abs(ef)) else \
            _norm_failure(a, e, err, norm, fin, atol, scale, rtol0, norm_err)
    if truth is not None:
        t_arr = np.asarray(truth, dtype=float).reshape(e.shape)
        fin_t = np.isfinite(t_arr[fin])
        ef = np.where(fin_t, t_arr[fin], ef)
        err = np.abs(af - ef)
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
    if np.any(err_n > atol * scale + rtol0 * np.abs(e[fin])):
        c = _norm_failure(a, e, err_n, norm, fin, atol, scale, rtol0, norm_err)
        return Check(False, norm_err, rel_err, c.problem)
    over_el = err > bound
    if over_el.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            k = int(np.argmax(np.where(over_el, err / bound, -1.0)))
        t = tuple(positions[k])
        what = f"relative error {rel[k]:.3g}" if normal[k] else f"absolute error {err[k]:.3g} (expected value subnormal or 0)"
        cond = f" x condition {condition:.3g}" if condition > 1 else ""
        return Check(False, norm_err, rel_err,
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


def compare(actual, expected, dtype: str, mask=None, rtol=None, magnitude: float = 1.0,
            quantity: str = "value", condition: float = 1.0, floor=None) -> tuple[bool, float]:
    """(ok, norm-wise error) of :func:`check`, which see."""
    c = check(actual, expected, dtype, quantity, mask, rtol, magnitude, condition, floor)
    return c.ok, c.norm_err


# --------------------------------------------------------------------------- modules


def load_module(path: Path, name: str):
    """Import one generated file on its own (it must be self-contained)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # MindSpore's graph compiler re-imports functions' modules by name
    spec.loader.exec_module(mod)
    return mod


def import_frameworks(backends) -> None:
    os.environ.setdefault("GLOG_minloglevel", "2")  # Paddle's C++ log lines
    if "mindspore" in backends:
        import mindspore  # noqa: F401  (must come before paddle: both ship libdnnl)
    if "paddle" in backends:
        import paddle  # noqa: F401


def error_line(exc: BaseException) -> str:
    """`Type: message` of an exception raised by generated code, reduced to the line that says
    what went wrong, with the generated line that raised it where the framework names one:
    Paddle's to_static wraps the original error in a dump of the transformed code ("In
    transformed code: ..."), whose last `SomethingError: ...` line is the original and whose
    `<--- HERE` marks the statement; MindSpore's graph compiler appends C++ call stacks and a
    traceback of the construct code ("# 0 In file ...") after the message."""
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


# --------------------------------------------------------------------------- runners


class MindSporeRunner:
    name = "mindspore"

    def __init__(self):
        import mindspore as ms

        self.ms = ms
        self._cells: dict = {}

    def tensor(self, a, dtype):
        a = np.asarray(a)
        if a.dtype.kind in "iu":
            return self.ms.Tensor(a.astype(np.int64))
        return self.ms.Tensor(a.astype(dtype))

    def make(self, mod, spec: Spec, params: dict, reduction: str, dtype: str, learnable: dict):
        ms = self.ms
        cls = getattr(mod, spec.class_name)
        kw = dict(params)
        if spec.learnable:
            kw["dtype"] = getattr(ms, dtype)
        cell = cls(**kw, reduction=reduction)
        for lr in spec.learnable:
            getattr(cell, lr.name).set_data(ms.Tensor(np.asarray(learnable[lr.name], dtype=dtype)))
        return cell

    def run(self, mod, spec, case: CaseData, dtype: str, mode: str, reductions) -> tuple[dict, dict]:
        ms = self.ms
        args, names = self.args(spec, case, dtype)
        values = {}
        for red in reductions:
            cell = self.make(mod, spec, case.params, red, dtype, case.learnable)
            fn = ms.jit(cell) if mode == "graph" else cell
            values[red] = fn(*args).asnumpy().astype(float)
        cell = self.make(mod, spec, case.params, "sum", dtype, case.learnable)
        pos = tuple(k for k, n in enumerate(names) if n is not None)
        weights = cell.trainable_params() if spec.learnable else None
        vg = ms.value_and_grad(cell, grad_position=pos, weights=weights)
        if mode == "graph":
            vg = ms.jit(vg)
        _, g = vg(*args)
        grads = {}
        if weights is not None:
            g_in, g_w = g
        else:
            g_in, g_w = g, ()
        if not isinstance(g_in, tuple):
            g_in = (g_in,)
        for k, gi in zip(pos, g_in):
            grads[names[k]] = gi.asnumpy().astype(float)
        for lr, gw in zip(spec.learnable, g_w):
            grads[lr.name] = gw.asnumpy().astype(float)
        return values, grads

    def args(self, spec, case, dtype):
        order = [i for i in spec.inputs if not i.optional] + [i for i in spec.inputs if i.optional]
        args, names = [], []
        for inp in order:
            v = case.inputs.get(inp.name)
            args.append(None if v is None else self.tensor(v, dtype))
            names.append(inp.name if (v is not None and inp.dtype == "float" and not inp.optional) else None)
        return args, names


class PaddleRunner:
    name = "paddle"

    def __init__(self):
        import paddle

        self.paddle = paddle

    def make(self, mod, spec, params, reduction, dtype, learnable):
        paddle = self.paddle
        cls = getattr(mod, spec.class_name)
        kw = dict(params)
        if spec.learnable:
            kw["dtype"] = dtype
        layer = cls(**kw, reduction=reduction)
        for lr in spec.learnable:
            getattr(layer, lr.name).set_value(paddle.to_tensor(np.asarray(learnable[lr.name], dtype=dtype)))
        return layer

    def run(self, mod, spec, case, dtype, mode, reductions):
        paddle = self.paddle
        values = {}
        for red in reductions:
            layer = self.make(mod, spec, case.params, red, dtype, case.learnable)
            fn = paddle.jit.to_static(layer, full_graph=True) if mode == "graph" else layer
            args, _ = self.args(spec, case, dtype)
            values[red] = fn(*args).numpy().astype(float)
        layer = self.make(mod, spec, case.params, "sum", dtype, case.learnable)
        fn = paddle.jit.to_static(layer, full_graph=True) if mode == "graph" else layer
        args, names = self.args(spec, case, dtype)
        out = fn(*args)
        out.backward()
        grads = {}
        for a, n in zip(args, names):
            if n is not None:  # an input the loss does not differentiate through has no .grad
                grads[n] = a.grad.numpy().astype(float) if a.grad is not None else np.zeros(a.shape)
        for lr in spec.learnable:
            grads[lr.name] = getattr(layer, lr.name).grad.numpy().astype(float)
        return values, grads

    def args(self, spec, case, dtype):
        paddle = self.paddle
        order = [i for i in spec.inputs if not i.optional] + [i for i in spec.inputs if i.optional]
        args, names = [], []
        for inp in order:
            v = case.inputs.get(inp.name)
            if v is None:
                args.append(None)
                names.append(None)
                continue
            v = np.asarray(v)
            diff = inp.dtype == "float" and not inp.optional
            t = paddle.to_tensor(v.astype(np.int64) if v.dtype.kind in "iu" else v.astype(dtype),
                                 stop_gradient=not diff)
            args.append(t)
            names.append(inp.name if diff else None)
        return args, names


RUNNERS = {"mindspore": MindSporeRunner, "paddle": PaddleRunner}


# --------------------------------------------------------------------------- driver


def _round32(case: CaseData) -> CaseData:
    inputs = {k: (None if v is None else (v.astype(np.float32).astype(float) if v.dtype.kind == "f" else v))
              for k, v in case.inputs.items()}
    learn = {k: np.asarray(v, dtype=np.float32).astype(float) for k, v in case.learnable.items()}
    return CaseData(case.id, case.source, inputs, case.params, learn, {}, {}, True)


def _exact32(case: CaseData) -> bool:
    arrays = [v for v in case.inputs.values() if v is not None and v.dtype.kind == "f"]
    arrays += [np.asarray(v, dtype=float) for v in case.learnable.values()]
    return all(np.array_equal(a.astype(np.float32).astype(float), a) for a in arrays)


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
    sens = sensitivity(prog, case, exp_grads, shape) if none is not None and exp_grads else None
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
        out.append(("gradient", n, grads[n], w, mask, 1.0, gradient_floor(w, mask), False if case.grads else None))
    return out


def _extreme_check(case, vals, grads, exp_vals, exp_grads, kinks, dtype, reds, row=None, prog=None) -> list[str]:
    """Extreme inputs: every value and gradient finite wherever the reference, rounded to the
    computation dtype, is finite; and equal to it there, by :func:`check` (norm-wise atol ten
    times the ordinary one, no input magnitude: the inputs are extreme on purpose)."""
    fails = []
    for quantity, name, got, w, skip, cond, floor, _ in _items(prog, case, vals, grads, exp_vals, exp_grads,
                                                               kinks, reds, dtype):
        label = f"value ({name})" if quantity == "value" else f"gradient d/d{name}"
        if np.size(got) == np.size(w):
            got = np.asarray(got, dtype=float).reshape(np.shape(w))
        keep = np.isfinite(w) if skip is None else ~np.broadcast_to(skip, np.shape(w))
        big = float(np.max(np.abs(np.asarray(w)[keep]), initial=0.0))
        c = check(got, w, dtype, quantity, skip, magnitude=10 * max(1.0, big), condition=cond, floor=floor)
        if row is not None:
            _note(row, quantity, c)
        if not c.ok:
            fails.append(f"{case.id}: {label} {c.problem}")
    return fails


def _note(row: Row, quantity: str, c: Check) -> None:
    if quantity == "value":
        row.value_err, row.value_rel = max(row.value_err, c.norm_err), max(row.value_rel, c.rel_err)
    else:
        row.grad_err, row.grad_rel = max(row.grad_err, c.norm_err), max(row.grad_rel, c.rel_err)


def _check_case(row: Row, case: CaseData, vals, grads, exp_vals, exp_grads, kinks, dtype, reds,
                prog=None, truth=None) -> list[str]:
    """The ordinary comparison of one case's values (every reduction) and gradients."""
    fails = []
    mag = _magnitude(case)
    for quantity, name, got, want, mask, cond, floor, tv in _items(prog, case, vals, grads, exp_vals, exp_grads,
                                                                   kinks, reds, truth=truth):
        if quantity == "gradient" and mask is not None:
            row.skipped_kinks += int(np.sum(mask))
        c = check(got, want, dtype, quantity, mask, rtol=case.rtol if quantity == "value" else None,
                  magnitude=mag, condition=cond, floor=floor, truth=tv)
        _note(row, quantity, c)
        if not c.ok:
            fails.append(f"{case.id}: {'value (' + name + ')' if quantity == 'value' else 'gradient d/d' + name} "
                         f"{c.problem}")
    return fails


def _magnitude(case: CaseData) -> float:
    vals = [np.max(np.abs(v)) for v in case.inputs.values() if v is not None and v.dtype.kind == "f" and v.size]
    return float(max(vals, default=1.0))


def expectations(prog, case: CaseData):
    """Expected values and gradients (and kink masks) for a case, from the reference where needed."""
    diff_names = [i.name for i in prog.spec.inputs
                  if i.dtype == "float" and not i.optional and case.inputs.get(i.name) is not None]
    diff_names += [lr.name for lr in prog.spec.learnable]
    need_ref = case.from_reference or not case.grads
    kinks = {}
    exp_vals, exp_grads = dict(case.expected), dict(case.grads)
    if need_ref:
        ref = reference(prog, case.inputs, case.params, case.learnable, diff_names,
                        max_dps=120 if case.source == "extreme" else None)
        if case.from_reference:
            exp_vals = ref.values
        if not exp_grads:
            exp_grads = ref.grads
            kinks = ref.kinks
    return exp_vals, exp_grads, kinks


def verify_spec(spec: Spec, modules: dict, runners: dict, dtypes, modes, cases: list[CaseData],
                progress=None) -> list[Row]:
    prog = build_program(spec)
    rows = []
    expect64 = []
    for c in cases:
        vals, grads, kinks = expectations(prog, c)
        if c.from_reference and not all(np.all(np.isfinite(v)) for v in vals.values()):
            # a random draw outside the loss's domain for these parameters (e.g. a negative
            # rate with poisson_nll's log_input=False): use the default parameters instead
            c.params = {p.name: p.default for p in spec.params}
            vals, grads, kinks = expectations(prog, c)
        expect64.append((c, vals, grads, kinks))
    expect32 = []
    for c, vals, grads, kinks in expect64:
        if not c.from_reference and _exact32(c):
            # inputs that float32 holds exactly: the case's own expectations apply as they are
            expect32.append((c, vals, grads, kinks))
        elif c.from_reference or "float32" not in dtypes:
            c32 = _round32(c) if c.from_reference else None
            expect32.append((c32, *expectations(prog, c32)) if c32 else (c, vals, grads, kinks))
        else:
            # library values are for the float64 inputs; in float32 compare with the
            # reference at the float32-rounded inputs (the same math, exact inputs)
            c32 = _round32(c)
            expect32.append((c32, *expectations(prog, c32)))
    truths = {}
    for c, *_ in expect64 + expect32:
        if not c.from_reference and id(c) not in truths:
            # hand-written and library values check the formula; the per-element check
            # compares with the reference's values at the same inputs
            truths[id(c)] = reference(prog, c.inputs, c.params, c.learnable, []).values
    for backend, runner in runners.items():
        mod = modules[backend]
        for dtype in dtypes:
            table = expect64 if dtype == "float64" else expect32
            for mode in modes:
                row = Row(spec.name, backend, dtype, mode)
                for case, exp_vals, exp_grads, kinks in table:
                    reds = [r for r in spec.reduction_names if r in exp_vals] if not case.from_reference \
                        else list(spec.reduction_names)
                    try:
                        vals, grads = runner.run(mod, spec, case, dtype, mode, reds)
                    except Exception as exc:  # a crash of generated code is a failure, not an abort
                        row.failures.append(f"{case.id}: {error_line(exc)}")
                        continue
                    row.cases += 1
                    if case.source == "extreme":
                        row.failures += _extreme_check(case, vals, grads, exp_vals, exp_grads, kinks, dtype,
                                                       reds, row, prog)
                    else:
                        row.failures += _check_case(row, case, vals, grads, exp_vals, exp_grads, kinks, dtype,
                                                    reds, prog, truths.get(id(case)))
                rows.append(row)
                if progress:
                    progress(row)
    return rows


def collect_cases(spec: Spec, root: Path, extra_files: list[str], n_random: int, seed: int,
                  extreme: bool = False) -> list[CaseData]:
    if extreme:
        return extreme_cases(spec, seed)
    cases = spec_cases(spec) + reference_cases(spec, root)
    for f in extra_files:
        cases += load_case_file(f, spec)
    cases += random_cases(spec, n_random, seed)
    return cases


def run(specs: list[Spec], backends=BACKENDS, dtypes=DTYPES, modes=MODES, extra_files=(), n_random=3,
        seed=0, root: Path = Path("."), progress=None, extreme: bool = False) -> list[Row]:
    from .backends import get
    from .emit import compile_spec

    import_frameworks(backends)
    all_cases = {s.name: collect_cases(s, root, list(extra_files), n_random, seed, extreme) for s in specs}
    runners = {b: RUNNERS[b]() for b in backends}
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="losscc-verify-") as tmp:
        for spec in specs:
            modules = {}
            for b in backends:
                path = Path(tmp) / b / f"{spec.name}.py"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(compile_spec(spec, get(b)), encoding="utf-8")
                modules[b] = load_module(path, f"losscc_verify_{b}_{spec.name}")
            rows += verify_spec(spec, modules, runners, dtypes, modes, all_cases[spec.name], progress)
    return rows


def format_table(rows: list[Row]) -> str:
    head = ("spec", "backend", "dtype", "mode", "cases", "value err", "grad err", "value rel", "grad rel",
            "verdict")
    body = [(r.spec, r.backend, r.dtype, r.mode, str(r.cases), f"{r.value_err:.2e}", f"{r.grad_err:.2e}",
             f"{r.value_rel:.2e}", f"{r.grad_rel:.2e}", "pass" if r.ok else "FAIL") for r in rows]
    widths = [max(len(x[k]) for x in [head] + body) for k in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    fails = [f"  {r.spec}/{r.backend}/{r.dtype}/{r.mode}: {f}" for r in rows for f in r.failures]
    if fails:
        lines += ["", "failures:"] + fails
    return "\n".join(lines) + "\n"


def run_cli(args) -> int:
    from .emit import find_specs, load_all

    specs = load_all(find_specs(args.specs), eps=getattr(args, "eps", None))
    if args.cases and len(specs) != 1:
        raise SpecError([])  # pragma: no cover - argparse-level misuse is reported below
    backends = tuple(args.backend or BACKENDS)
    dtypes = tuple(args.dtype or DTYPES)
    modes = tuple(args.mode or MODES)
    start = time.time()
    tty = sys.stderr.isatty()

    def progress(row: Row):
        if tty:
            sys.stderr.write(f"\r\x1b[Kverify: {row.spec} {row.backend} {row.dtype} {row.mode} "
                             f"({time.time() - start:.0f}s)")
            sys.stderr.flush()

    if args.extreme:
        dtypes = tuple(args.dtype or ("float32",))
    rows = run(specs, backends, dtypes, modes, args.cases, args.random, args.seed, Path("."), progress,
               extreme=args.extreme)
    if tty:
        sys.stderr.write("\r\x1b[K")
    if args.format == "json":
        print(json.dumps([r.as_dict() for r in rows], indent=1))
    else:
        sys.stdout.write(format_table(rows))
        n_fail = sum(1 for r in rows if not r.ok)
        print(f"\n{len(rows) - n_fail} passed, {n_fail} failed ({time.time() - start:.0f}s)")
    return 0 if all(r.ok for r in rows) else 1
