"""``python -m benchmarks.extreme [--out docs] [--only spec,...]``: the extreme-input suite
run on the generated losses, the frameworks' built-ins and naive hand-written versions.

For every spec that has a built-in or a naive counterpart (``CONTENDERS``), each contender
is run on exactly the cases of :func:`losscc.cases.extreme_cases`, in float32, MindSpore and
Paddle, eager and graph (``ms.jit`` / ``paddle.jit.to_static(full_graph=True)``), and judged
by the rule of ``losscc verify --extreme``: the expectations come from
:func:`losscc.verify.expectations` at the float32-rounded inputs and each case is checked
with :func:`losscc.verify._extreme_check` (every value, for every reduction of the spec, and
every gradient finite where the reference is, and within float32's relative tolerance).

Contenders:

* ``generated``: ``generated/<backend>/<spec>.py`` run through losscc's own runner
  (:func:`losscc.verify.runner`), exactly as ``verify`` runs it;
* ``builtin``: the framework's own loss, with the mappings of ``benchmarks/ms_impl.py`` /
  ``pd_impl.py`` extended to every reduction;
* ``naive``: the usual hand-written version (softmax then ``log(p + 1e-8)`` and the like).

Gradients are taken of the summed loss w.r.t. the float inputs the generated check uses.
Each contender first runs on the ordinary case the extreme cases are made from
(:func:`ordinary_case`).  There, an input whose gradient is ``None`` (Paddle eager) or
identically zero (MindSpore; Paddle under to_static) while the reference's is not is one
the contender does not differentiate (``no_gradient``): it is left out.  An output (a
reduction's value, an input's gradient) already wrong on the ordinary case is a difference
of definition, not of stability (``not_compared``): it is left out of ``passed`` and kept
in ``strict_passed``, which applies the rule to every output.

Failure classes per case (a case may have several; ``primary`` is the first in this
order): unsupported (the contender raised), non-finite value, non-finite gradient, wrong
value, wrong gradient.  Writes ``<out>/stability.json`` and ``<out>/stability.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("GLOG_minloglevel", "2")  # Paddle's C++ log lines

import numpy as np  # noqa: E402

import mindspore as ms  # noqa: E402  (before paddle: both ship libdnnl)
import paddle  # noqa: E402
import paddle.nn.functional as F  # noqa: E402
from mindspore import nn, ops  # noqa: E402

from losscc import verify  # noqa: E402
from losscc.cases import extreme_cases, random_cases  # noqa: E402
from losscc.emit import find_specs, load_all  # noqa: E402
from losscc.parse import build_program  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DTYPE = "float32"
BACKENDS = ("mindspore", "paddle")
MODES = ("eager", "graph")
KINDS = ("generated", "builtin", "naive")
MARK = "<!-- hand-written commentary below; `python -m benchmarks.extreme` keeps it -->"
CLASSES = ("unsupported", "non-finite value", "non-finite gradient", "wrong value", "wrong gradient")


# =========================================================================== MindSpore
# Every function takes the spec's (non-optional) inputs in spec order and the reduction;
# hyperparameters are the spec defaults (the extreme cases use the defaults).


def _ms_reduce(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "batchmean":
        return loss.sum() / loss.shape[0]
    return loss.mean()


def ms_builtin_huber(x, y, reduction):
    return ops.huber_loss(x, y, reduction, 1.0)


def ms_builtin_smooth_l1(x, y, reduction):
    return ops.smooth_l1_loss(x, y, 1.0, reduction)


def ms_builtin_mse(x, y, reduction):
    return ops.mse_loss(x, y, reduction)


def ms_builtin_l1(x, y, reduction):
    return ops.l1_loss(x, y, reduction)


def ms_builtin_bce(p, t, reduction):
    return ops.binary_cross_entropy(p, t, None, reduction)


def ms_builtin_bce_with_logits(x, t, reduction):
    return ops.binary_cross_entropy_with_logits(x, t, None, None, reduction)


def ms_builtin_kl_div(x, t, reduction):
    return ops.kl_div(x, t, reduction)


def ms_builtin_gaussian_nll(x, y, v, reduction):
    return ops.gaussian_nll_loss(x, y, v, False, 1e-6, reduction)


def ms_builtin_margin_ranking(a, b, t, reduction):
    return ops.margin_ranking_loss(a, b, t, 0.0, reduction)


def ms_builtin_cosine_embedding(a, b, t, reduction):
    return ops.cosine_embedding_loss(a, b, t, 0.0, reduction)


def ms_builtin_cross_entropy(x, t, reduction):
    return ops.cross_entropy(x, t, None, -100, reduction, 0.0)


def ms_builtin_cross_entropy_probs(x, t, reduction):
    return ops.cross_entropy(x, t, None, -100, reduction, 0.0)


def ms_builtin_nll(x, t, reduction):
    return ops.nll_loss(x, t, None, -100, reduction)


def ms_naive_huber(x, y, reduction):
    d = ops.abs(x - y)
    return _ms_reduce(ops.where(d < 1.0, 0.5 * d * d, d - 0.5), reduction)


def ms_naive_bce(p, t, reduction):
    return _ms_reduce(-(t * ops.log(p) + (1 - t) * ops.log(1 - p)), reduction)


def ms_naive_bce_with_logits(x, t, reduction):
    p = ops.sigmoid(x)
    return _ms_reduce(-(t * ops.log(p) + (1 - t) * ops.log(1 - p)), reduction)


def ms_naive_kl_div(x, t, reduction):
    return _ms_reduce(t * (ops.log(t) - x), reduction)


def ms_naive_gaussian_nll(x, y, v, reduction):
    return _ms_reduce(0.5 * (ops.log(v) + (x - y) ** 2 / v), reduction)


def ms_naive_cosine_embedding(a, b, t, reduction):
    cos = (a * b).sum(axis=1) / (ops.sqrt((a * a).sum(axis=1)) * ops.sqrt((b * b).sum(axis=1)))
    return _ms_reduce(ops.where(t == 1, 1 - cos, ops.clamp(cos, min=0.0)), reduction)


def ms_naive_cross_entropy(x, t, reduction):
    logp = ops.log(ops.softmax(x, axis=1))
    keep = t != -100
    idx = ops.where(keep, t, ops.zeros_like(t))
    picked = ops.gather_elements(logp, 1, ops.expand_dims(idx, 1)).squeeze(1)
    loss = -picked * keep.astype(x.dtype)
    if reduction == "mean":
        return loss.sum() / keep.astype(x.dtype).sum()
    return _ms_reduce(loss, reduction)


def ms_naive_focal(x, t, reduction):
    p = ops.softmax(x, axis=1)
    pt = ops.gather_elements(p, 1, ops.reshape(t, (-1, 1))).squeeze(1)
    return _ms_reduce(-0.25 * (1 - pt) ** 2 * ops.log(pt + 1e-8), reduction)


def ms_naive_sigmoid_focal(x, y, reduction):
    p = ops.sigmoid(x)
    pt = p * y + (1 - p) * (1 - y)
    alpha_t = 0.25 * y + 0.75 * (1 - y)
    bce = -(y * ops.log(p) + (1 - y) * ops.log(1 - p))
    return _ms_reduce(alpha_t * (1 - pt) ** 2 * bce, reduction)


class _MSFn(nn.Cell):
    """A contender function with its reduction fixed (a Cell, so ms.jit and value_and_grad
    treat it as losscc's runner treats the generated classes)."""

    def __init__(self, fn, reduction):
        super().__init__()
        self.fn = fn
        self.reduction = reduction

    def construct(self, *args):
        return self.fn(*args, self.reduction)


class _MSPoisson(nn.Cell):
    def __init__(self, reduction):
        super().__init__()
        self.loss = nn.PoissonNLLLoss(log_input=True, full=False, eps=1e-8, reduction=reduction)

    def construct(self, x, y):
        return self.loss(x, y)


class _MSFocal(nn.Cell):
    """nn.FocalLoss has no alpha: scaled by the spec's alpha (0.25), labels as (N, 1)."""

    def __init__(self, reduction):
        super().__init__()
        self.loss = nn.FocalLoss(gamma=2.0, reduction=reduction)

    def construct(self, x, t):
        return 0.25 * self.loss(x, ops.reshape(t, (-1, 1)))


# =========================================================================== Paddle


def _pd_reduce(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "batchmean":
        return loss.sum() / loss.shape[0]
    return loss.mean()


def pd_builtin_huber(x, y, reduction):
    return F.smooth_l1_loss(x, y, reduction=reduction, delta=1.0)  # is_huber=True: Huber


def pd_builtin_smooth_l1(x, y, reduction):
    return F.smooth_l1_loss(x, y, reduction=reduction, delta=1.0, is_huber=False)


def pd_builtin_mse(x, y, reduction):
    return F.mse_loss(x, y, reduction=reduction)


def pd_builtin_l1(x, y, reduction):
    return F.l1_loss(x, y, reduction=reduction)


def pd_builtin_bce(p, t, reduction):
    return F.binary_cross_entropy(p, t, reduction=reduction)


def pd_builtin_bce_with_logits(x, t, reduction):
    return F.binary_cross_entropy_with_logits(x, t, reduction=reduction)


def pd_builtin_kl_div(x, t, reduction):
    return F.kl_div(x, t, reduction=reduction)


def pd_builtin_gaussian_nll(x, y, v, reduction):
    return F.gaussian_nll_loss(x, y, v, full=False, epsilon=1e-6, reduction=reduction)


def pd_builtin_poisson_nll(x, y, reduction):
    return F.poisson_nll_loss(x, y, log_input=True, full=False, epsilon=1e-8, reduction=reduction)


def pd_builtin_margin_ranking(a, b, t, reduction):
    return F.margin_ranking_loss(a, b, t, margin=0.0, reduction=reduction)


def pd_builtin_cosine_embedding(a, b, t, reduction):
    return F.cosine_embedding_loss(a, b, t, margin=0.0, reduction=reduction)


def pd_builtin_cross_entropy(x, t, reduction):
    return F.cross_entropy(x, t, ignore_index=-100, reduction=reduction, axis=1)


def pd_builtin_cross_entropy_probs(x, t, reduction):
    return F.cross_entropy(x, t, reduction=reduction, soft_label=True, axis=1)


def pd_builtin_nll(x, t, reduction):
    return F.nll_loss(x, t, ignore_index=-100, reduction=reduction)


def pd_builtin_sigmoid_focal(x, y, reduction):
    return F.sigmoid_focal_loss(x, y, alpha=0.25, gamma=2.0, reduction=reduction)


def pd_naive_huber(x, y, reduction):
    d = paddle.abs(x - y)
    return _pd_reduce(paddle.where(d < 1.0, 0.5 * d * d, d - 0.5), reduction)


def pd_naive_bce(p, t, reduction):
    return _pd_reduce(-(t * paddle.log(p) + (1 - t) * paddle.log(1 - p)), reduction)


def pd_naive_bce_with_logits(x, t, reduction):
    p = F.sigmoid(x)
    return _pd_reduce(-(t * paddle.log(p) + (1 - t) * paddle.log(1 - p)), reduction)


def pd_naive_kl_div(x, t, reduction):
    return _pd_reduce(t * (paddle.log(t) - x), reduction)


def pd_naive_gaussian_nll(x, y, v, reduction):
    return _pd_reduce(0.5 * (paddle.log(v) + (x - y) ** 2 / v), reduction)


def pd_naive_cosine_embedding(a, b, t, reduction):
    cos = (a * b).sum(axis=1) / (paddle.sqrt((a * a).sum(axis=1)) * paddle.sqrt((b * b).sum(axis=1)))
    return _pd_reduce(paddle.where(t == 1, 1 - cos, paddle.clip(cos, min=0.0)), reduction)


def pd_naive_cross_entropy(x, t, reduction):
    logp = paddle.log(F.softmax(x, axis=1))
    keep = t != -100
    idx = paddle.where(keep, t, paddle.zeros_like(t))
    picked = paddle.take_along_axis(logp, idx.unsqueeze(1), axis=1).squeeze(1)
    loss = -picked * keep.astype(x.dtype)
    if reduction == "mean":
        return loss.sum() / keep.astype(x.dtype).sum()
    return _pd_reduce(loss, reduction)


def pd_naive_focal(x, t, reduction):
    p = F.softmax(x, axis=1)
    pt = paddle.take_along_axis(p, t.unsqueeze(1), axis=1).squeeze(1)
    return _pd_reduce(-0.25 * (1 - pt) ** 2 * paddle.log(pt + 1e-8), reduction)


def pd_naive_sigmoid_focal(x, y, reduction):
    p = F.sigmoid(x)
    pt = p * y + (1 - p) * (1 - y)
    alpha_t = 0.25 * y + 0.75 * (1 - y)
    bce = -(y * paddle.log(p) + (1 - y) * paddle.log(1 - p))
    return _pd_reduce(alpha_t * (1 - pt) ** 2 * bce, reduction)


class _PDFn2(paddle.nn.Layer):
    """A two-input contender function with its reduction fixed (to_static needs the arity)."""

    def __init__(self, fn, reduction):
        super().__init__()
        self.fn = fn
        self.reduction = reduction

    def forward(self, a, b):
        return self.fn(a, b, self.reduction)


class _PDFn3(_PDFn2):
    def forward(self, a, b, c):
        return self.fn(a, b, c, self.reduction)


# =========================================================================== registry


@dataclass(frozen=True)
class Contender:
    what: str  # shown in the report
    build: object  # reduction -> Cell / Layer


def _ms(fn):
    return lambda red: _MSFn(fn, red)


def _pd(fn):
    cls = _PDFn3 if fn.__code__.co_argcount == 4 else _PDFn2
    return lambda red: cls(fn, red)


MS_FOCAL = "0.25 * nn.FocalLoss(gamma=2) (no alpha: scaled by the spec's alpha; labels (N,1); deprecated since 2.8)"
NAIVE_FOCAL = {"mindspore": "softmax, gather_elements, log(p + 1e-8)",
               "paddle": "softmax, take_along_axis, log(p + 1e-8)"}


def _naive(desc, ms_fn, pd_fn):
    return {"mindspore": Contender(desc if isinstance(desc, str) else desc["mindspore"], _ms(ms_fn)),
            "paddle": Contender(desc if isinstance(desc, str) else desc["paddle"], _pd(pd_fn))}


# spec -> kind -> backend -> Contender
CONTENDERS: dict = {
    "huber": {
        "builtin": {"mindspore": Contender("ops.huber_loss(delta=1)", _ms(ms_builtin_huber)),
                    "paddle": Contender("F.smooth_l1_loss(delta=1) (is_huber=True: Huber)", _pd(pd_builtin_huber))},
        "naive": _naive("d = abs(x - y); where(d < 1, 0.5*d*d, d - 0.5)", ms_naive_huber, pd_naive_huber),
    },
    "smooth_l1": {
        "builtin": {"mindspore": Contender("ops.smooth_l1_loss(beta=1)", _ms(ms_builtin_smooth_l1)),
                    "paddle": Contender("F.smooth_l1_loss(is_huber=False)", _pd(pd_builtin_smooth_l1))},
    },
    "mse": {
        "builtin": {"mindspore": Contender("ops.mse_loss", _ms(ms_builtin_mse)),
                    "paddle": Contender("F.mse_loss", _pd(pd_builtin_mse))},
    },
    "l1": {
        "builtin": {"mindspore": Contender("ops.l1_loss", _ms(ms_builtin_l1)),
                    "paddle": Contender("F.l1_loss", _pd(pd_builtin_l1))},
    },
    "bce": {
        "builtin": {"mindspore": Contender("ops.binary_cross_entropy", _ms(ms_builtin_bce)),
                    "paddle": Contender("F.binary_cross_entropy", _pd(pd_builtin_bce))},
        "naive": _naive("-(t*log(p) + (1-t)*log(1-p))", ms_naive_bce, pd_naive_bce),
    },
    "bce_with_logits": {
        "builtin": {"mindspore": Contender("ops.binary_cross_entropy_with_logits",
                                           _ms(ms_builtin_bce_with_logits)),
                    "paddle": Contender("F.binary_cross_entropy_with_logits", _pd(pd_builtin_bce_with_logits))},
        "naive": _naive("p = sigmoid(x); -(t*log(p) + (1-t)*log(1-p))", ms_naive_bce_with_logits,
                        pd_naive_bce_with_logits),
    },
    "kl_div": {
        "builtin": {"mindspore": Contender("ops.kl_div", _ms(ms_builtin_kl_div)),
                    "paddle": Contender("F.kl_div", _pd(pd_builtin_kl_div))},
        "naive": _naive("t * (log(t) - x)", ms_naive_kl_div, pd_naive_kl_div),
    },
    "gaussian_nll": {
        "builtin": {"mindspore": Contender("ops.gaussian_nll_loss(eps=1e-6)", _ms(ms_builtin_gaussian_nll)),
                    "paddle": Contender("F.gaussian_nll_loss(epsilon=1e-6)", _pd(pd_builtin_gaussian_nll))},
        "naive": _naive("0.5 * (log(var) + (x - y)**2 / var)", ms_naive_gaussian_nll, pd_naive_gaussian_nll),
    },
    "poisson_nll": {
        "builtin": {"mindspore": Contender("nn.PoissonNLLLoss", lambda red: _MSPoisson(red)),
                    "paddle": Contender("F.poisson_nll_loss", _pd(pd_builtin_poisson_nll))},
    },
    "margin_ranking": {
        "builtin": {"mindspore": Contender("ops.margin_ranking_loss", _ms(ms_builtin_margin_ranking)),
                    "paddle": Contender("F.margin_ranking_loss", _pd(pd_builtin_margin_ranking))},
    },
    "cosine_embedding": {
        "builtin": {"mindspore": Contender("ops.cosine_embedding_loss", _ms(ms_builtin_cosine_embedding)),
                    "paddle": Contender("F.cosine_embedding_loss", _pd(pd_builtin_cosine_embedding))},
        "naive": _naive("cos = dot / (norm * norm); where(t == 1, 1 - cos, clip(cos, 0))",
                        ms_naive_cosine_embedding, pd_naive_cosine_embedding),
    },
    "cross_entropy": {
        "builtin": {"mindspore": Contender("ops.cross_entropy (int32 labels)", _ms(ms_builtin_cross_entropy)),
                    "paddle": Contender("F.cross_entropy(axis=1)", _pd(pd_builtin_cross_entropy))},
        "naive": _naive("log(softmax(x))[label], ignored positions masked", ms_naive_cross_entropy,
                        pd_naive_cross_entropy),
    },
    "cross_entropy_probs": {
        "builtin": {"mindspore": Contender("ops.cross_entropy (probability target)",
                                           _ms(ms_builtin_cross_entropy_probs)),
                    "paddle": Contender("F.cross_entropy(soft_label=True, axis=1)",
                                        _pd(pd_builtin_cross_entropy_probs))},
    },
    "nll": {
        "builtin": {"mindspore": Contender("ops.nll_loss (int32 labels)", _ms(ms_builtin_nll)),
                    "paddle": Contender("F.nll_loss", _pd(pd_builtin_nll))},
    },
    "focal": {
        "builtin": {"mindspore": Contender(MS_FOCAL, lambda red: _MSFocal(red))},
        "naive": _naive(NAIVE_FOCAL, ms_naive_focal, pd_naive_focal),
    },
    "softmax_focal": {
        "builtin": {"mindspore": Contender(MS_FOCAL, lambda red: _MSFocal(red))},
        "naive": _naive(NAIVE_FOCAL, ms_naive_focal, pd_naive_focal),
    },
    "sigmoid_focal": {
        "builtin": {"paddle": Contender("F.sigmoid_focal_loss(alpha=0.25, gamma=2)", _pd(pd_builtin_sigmoid_focal))},
        "naive": _naive("p = sigmoid(x); alpha_t * (1 - p_t)**2 * -(y*log(p) + (1-y)*log(1-p))",
                        ms_naive_sigmoid_focal, pd_naive_sigmoid_focal),
    },
}


# =========================================================================== running


def _first_line(exc: BaseException) -> str:
    """The informative line of an exception (Paddle's to_static wraps the real error)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    generic = ("In transformed code:", "In user code:")
    inner = [ln for ln in lines if re.match(r"\w*(Error|Exception)\b", ln) and not ln.endswith(generic)]
    msg = inner[-1] if inner else next((ln for ln in lines if ln not in generic), "")
    return f"{type(exc).__name__}: {msg[:200]}"


class ContenderRunner:
    """Runs a built-in or naive contender like losscc's runners run generated classes:
    one Cell/Layer per reduction (compiled once per mode and reused across the cases of
    a spec, whose shapes are all equal), gradient of the 'sum' loss."""

    def __init__(self, backend: str, contender: Contender, mode: str):
        self.backend, self.contender, self.mode = backend, contender, mode
        self._cache: dict = {}

    def _fn(self, reduction):
        if reduction not in self._cache:
            obj = self.contender.build(reduction)
            if self.backend == "mindspore":
                self._cache[reduction] = (obj, ms.jit(obj) if self.mode == "graph" else obj)
            else:
                self._cache[reduction] = (obj, paddle.jit.to_static(obj, full_graph=True)
                                          if self.mode == "graph" else obj)
        return self._cache[reduction]

    def _grad_fn(self, pos):
        key = ("grad", pos)
        if key not in self._cache:
            cell = self.contender.build("sum")
            vg = ms.value_and_grad(cell, grad_position=pos)
            self._cache[key] = ms.jit(vg) if self.mode == "graph" else vg
        return self._cache[key]

    def _args(self, spec, case, grad=False):
        out, names = [], []
        for inp in spec.inputs:
            v = case.inputs.get(inp.name)
            if inp.optional:
                if v is not None:
                    raise ValueError(f"optional input {inp.name} given: not supported by this harness")
                continue
            v = np.asarray(v)
            is_float = v.dtype.kind == "f"
            if self.backend == "mindspore":
                out.append(ms.Tensor(v.astype(np.float32 if is_float else np.int32)))
            else:
                out.append(paddle.to_tensor(v.astype(np.float32 if is_float else np.int64),
                                            stop_gradient=not (grad and is_float)))
            names.append(inp.name if is_float else None)
        return out, names

    def values(self, spec, case, reductions) -> tuple[dict, dict]:
        vals, errors = {}, {}
        for red in reductions:
            try:
                args, _ = self._args(spec, case)
                out = self._fn(red)[1](*args)
                vals[red] = (out.asnumpy() if self.backend == "mindspore" else out.numpy()).astype(float)
            except Exception as exc:  # noqa: BLE001 - a contender that raises is 'unsupported'
                errors[red] = _first_line(exc)
        return vals, errors

    def grads(self, spec, case, wanted) -> dict:
        """d(sum)/d(input) for every float input in `wanted`; None where the framework gives none."""
        if self.backend == "mindspore":
            args, names = self._args(spec, case)
            pos = tuple(k for k, n in enumerate(names) if n in wanted)
            _, g = self._grad_fn(pos)(*args)
            if not isinstance(g, tuple):
                g = (g,)
            return {names[k]: gi.asnumpy().astype(float) for k, gi in zip(pos, g)}
        args, names = self._args(spec, case, grad=True)
        layer, fn = self._fn("sum")
        out = fn(*args)
        out.backward()
        return {n: (None if a.grad is None else a.grad.numpy().astype(float))
                for a, n in zip(args, names) if n in wanted}


def _classify(messages: list[str]) -> list[str]:
    out = []
    for m in messages:
        if m.startswith("unsupported"):
            c = "unsupported"
        else:
            is_grad = ": gradient d/d" in m
            if "is not finite" in m:
                c = "non-finite gradient" if is_grad else "non-finite value"
            else:  # 'differs from the reference' or 'has the wrong shape'
                c = "wrong gradient" if is_grad else "wrong value"
        if c not in out:
            out.append(c)
    return sorted(out, key=CLASSES.index)


@dataclass
class Expect:
    case: object
    vals: dict
    grads: dict
    kinks: dict


def expectations32(spec, cases) -> list[Expect]:
    """What `verify --extreme` expects in float32: the reference at the float32-rounded inputs."""
    prog = build_program(spec)
    out = []
    for c in cases:
        c32 = verify._round32(c)
        out.append(Expect(c32, *verify.expectations(prog, c32)))
    return out


def ordinary_case(spec, seed: int = 0):
    """The ordinary case extreme_cases() makes its variants from (see losscc.cases.extreme_cases)."""
    base = random_cases(spec, 1, seed + 1000)[0]
    base.params = {p.name: p.default for p in spec.params}
    base.id = "ordinary"
    return base


def _check(e: Expect, vals, grads, reds, errors) -> list[str]:
    """verify's extreme rule on the outputs given, plus one 'unsupported' message per call that raised."""
    msgs = [f"unsupported: {e.case.id}: {where}: {err}" for where, err in errors.items()]
    msgs += verify._extreme_check(e.case, vals, grads, e.vals, e.grads, e.kinks, DTYPE,
                                  [r for r in reds if r in vals])
    return msgs


_LABEL = re.compile(r": (?:value \((\w+)\)|gradient d/d(\w+)) ")


def _failed_outputs(msgs) -> tuple[set, set]:
    """The reductions and inputs named in _extreme_check's messages."""
    reds, names = set(), set()
    for m in msgs:
        hit = _LABEL.search(m)
        if hit:
            (reds.add(hit.group(1)) if hit.group(1) else names.add(hit.group(2)))
    return reds, names


def _nonfinite_reference(e: Expect, reds, names) -> int:
    """Entries the rule skips because the reference (rounded to float32) is not finite there."""
    with np.errstate(over="ignore", invalid="ignore"):
        arrays = [np.asarray(e.vals[r], dtype=float).astype(DTYPE) for r in reds if r in e.vals]
        arrays += [np.asarray(e.grads[n], dtype=float).astype(DTYPE) for n in names if n in e.grads]
    return int(sum(np.sum(~np.isfinite(a)) for a in arrays))


def _generated_module(backend, spec):
    path = ROOT / "generated" / backend / f"{spec.name}.py"
    return verify.load_module(path, f"benchmarks_extreme_{backend}_{spec.name}")


class GeneratedRunner:
    """The generated class through losscc's own runner (verify.runner), as `verify` runs it."""

    def __init__(self, runner, spec, backend, mode):
        self.runner, self.mode = runner, mode
        self.mod = _generated_module(backend, spec)
        self.what = f"generated/{backend}/{spec.name}.py"

    def outputs(self, spec, case, reds, names):
        try:
            vals, grads = self.runner.run(self.mod, spec, case, DTYPE, self.mode, reds)
        except Exception as exc:  # noqa: BLE001 - verify counts a crash as a failure too
            return {}, {}, {"call": _first_line(exc)}
        return vals, {n: g for n, g in grads.items() if n in names}, {}


class BuiltRunner(ContenderRunner):
    def __init__(self, backend, contender, mode):
        super().__init__(backend, contender, mode)
        self.what = contender.what

    def outputs(self, spec, case, reds, names):
        vals, errors = self.values(spec, case, reds)
        grads = {}
        if names:
            try:
                grads = self.grads(spec, case, names)
            except Exception as exc:  # noqa: BLE001
                errors["gradient"] = _first_line(exc)
        return vals, grads, errors


def run_one(spec, runner, ordinary: Expect, expects) -> dict:
    """All extreme cases for one contender; see the module docstring for the two counts."""
    reds = list(spec.reduction_names)
    wanted = list(ordinary.grads)
    # the ordinary case: which inputs get a gradient, and which outputs are the spec's loss at all
    vals, grads, errors = runner.outputs(spec, ordinary.case, reds, wanted)
    no_grad = []
    for n in wanted:
        if n in grads and grads[n] is None and not np.any(ordinary.grads[n]):
            grads[n] = np.zeros(np.shape(ordinary.grads[n]))  # no gradient, and none is due
        elif n in grads and (grads[n] is None or (not np.any(grads[n]) and np.any(ordinary.grads[n]))):
            no_grad.append(n)
            del grads[n]
    diff = [n for n in wanted if n not in no_grad]
    ordinary_msgs = _check(ordinary, vals, grads, reds, errors)
    bad_reds, bad_names = _failed_outputs(ordinary_msgs)
    cmp_reds = [r for r in reds if r not in bad_reds]
    cmp_names = [n for n in diff if n not in bad_names]

    cases = {}
    for e in expects:
        vals, grads, errors = runner.outputs(spec, e.case, reds, diff)
        grads = {n: (np.zeros(np.shape(e.grads[n])) if g is None else g) for n, g in grads.items()}
        strict = _check(e, vals, grads, reds, errors)
        stable = _check(e, {r: v for r, v in vals.items() if r in cmp_reds},
                        {n: g for n, g in grads.items() if n in cmp_names},
                        cmp_reds, {k: v for k, v in errors.items() if k not in bad_reds})
        cases[e.case.id] = {"strict": strict, "stable": stable,
                            "reference_nonfinite": _nonfinite_reference(e, reds, diff)}
    return {"what": runner.what, "no_gradient": no_grad, "ordinary": ordinary_msgs,
            "not_compared": sorted(f"value ({r})" for r in bad_reds) + sorted(f"d/d{n}" for n in bad_names),
            "cases": cases}


def _summarise(entry: dict) -> dict:
    per_case = {}
    counts = {c: 0 for c in CLASSES}
    for cid, c in entry["cases"].items():
        classes = _classify(c["stable"])
        per_case[cid] = {"pass": not c["stable"], "classes": classes, "messages": c["stable"],
                         "strict_pass": not c["strict"], "reference_nonfinite_entries": c["reference_nonfinite"]}
        if c["strict"] != c["stable"]:
            per_case[cid].update(strict_classes=_classify(c["strict"]), strict_messages=c["strict"])
        if classes:
            counts[classes[0]] += 1
    return {"what": entry["what"], "passed": sum(1 for c in per_case.values() if c["pass"]),
            "strict_passed": sum(1 for c in per_case.values() if c["strict_pass"]),
            "total": len(per_case), "failures_by_primary_class": {k: v for k, v in counts.items() if v},
            "no_gradient": entry["no_gradient"], "not_compared": entry["not_compared"],
            "ordinary_case": {"pass": not entry["ordinary"], "messages": entry["ordinary"]},
            "cases": per_case}


def evaluate(specs, backends=BACKENDS, modes=MODES, kinds=KINDS, progress=None) -> list[dict]:
    """One record per spec x backend x mode x contender kind that exists."""
    runners = {b: verify.runner(b) for b in backends}
    records = []
    for spec in specs:
        table = CONTENDERS.get(spec.name, {})
        expects = expectations32(spec, extreme_cases(spec))
        ordinary = expectations32(spec, [ordinary_case(spec)])[0]
        for backend in backends:
            for mode in modes:
                for kind in kinds:
                    t0 = time.time()
                    if kind == "generated":
                        runner = GeneratedRunner(runners[backend], spec, backend, mode)
                    elif backend in table.get(kind, {}):
                        runner = BuiltRunner(backend, table[kind][backend], mode)
                    else:
                        continue
                    entry = run_one(spec, runner, ordinary, expects)
                    rec = {"spec": spec.name, "backend": backend, "mode": mode, "kind": kind, **_summarise(entry),
                           "seconds": round(time.time() - t0, 2)}
                    records.append(rec)
                    if progress:
                        progress(rec)
    return records


# =========================================================================== report


def _versions() -> dict:
    def git(*a):
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    import losscc

    return {"python": platform.python_version(), "platform": platform.platform(), "cpu": cpu,
            "nproc": os.cpu_count(), "numpy": np.__version__, "mindspore": ms.__version__,
            "paddle": paddle.__version__, "losscc": losscc.__version__, "git": git("rev-parse", "--short", "HEAD"),
            "device": "CPU"}


def totals(records) -> dict:
    out = {}
    for r in records:
        key = f"{r['backend']}/{r['mode']}/{r['kind']}"
        t = out.setdefault(key, {"passed": 0, "strict_passed": 0, "total": 0, "specs": 0})
        t["passed"] += r["passed"]
        t["strict_passed"] += r["strict_passed"]
        t["total"] += r["total"]
        t["specs"] += 1
    return out


_SHORT = {"unsupported": "unsup", "non-finite value": "nf-val", "non-finite gradient": "nf-grad",
          "wrong value": "val", "wrong gradient": "grad"}


def _cell(rec):
    if rec is None:
        return "—"
    s = f"{rec['passed']}/{rec['total']}"
    if rec["failures_by_primary_class"]:
        s += " (" + ", ".join(f"{_SHORT[k]} {v}" for k, v in rec["failures_by_primary_class"].items()) + ")"
    if rec["no_gradient"]:
        s += " ‡"
    if rec["not_compared"]:
        s += f" § strict {rec['strict_passed']}/{rec['total']}"
    return s


def _frac(t, key="passed"):
    return f"{t[key]}/{t['total']}"


def render_md(doc: dict, commentary: str = "") -> str:
    recs = doc["records"]
    idx = {(r["spec"], r["backend"], r["mode"], r["kind"]): r for r in recs}
    specs = list(dict.fromkeys(r["spec"] for r in recs))
    v = doc["versions"]
    lines = [
        "# Stability: extreme inputs, generated code vs built-ins vs naive versions",
        "",
        f"Generated by `{doc['command']}` on {doc['date']} (git {v['git']}, {doc['seconds']:.0f} s).",
        f"Machine: {v['cpu']}, {v['nproc']} cores, {v['platform']}; Python {v['python']}, numpy {v['numpy']}, "
        f"MindSpore {v['mindspore']}, Paddle {v['paddle']} (CPU), losscc {v['losscc']}.",
        "Raw results, every message per case: `docs/stability.json`.",
        "",
        "Contenders: `generated` is the committed `generated/<backend>/<spec>.py`, run through",
        "`losscc.verify.runner` as `verify` runs it; `built-in` is the framework's own loss;",
        "`naive` is the usual hand-written version (table \"Contenders\" below).",
        "",
        "Every contender runs on exactly the cases of `losscc.cases.extreme_cases(spec)` (entries of",
        "magnitude 1e2, 1e4, 1e18 in each unbounded float input; probabilities exactly 0 and 1;",
        "positive inputs at 1e-30, 1e30 and 0; pairs of inputs made equal), in float32, eager and",
        "graph (`ms.jit` / `paddle.jit.to_static(full_graph=True)`), with the expectations and the",
        "pass rule of `losscc verify --extreme` (`verify.expectations` at the float32-rounded",
        "inputs, `verify._extreme_check`): every value, for every reduction of the spec, and every",
        "gradient of the summed loss must be finite where the mpmath reference is, and within rtol",
        "1e-5 of it. A case passes when all of them do. Hyperparameters are the spec defaults.",
        "",
        "Before the extreme cases each contender runs on the *ordinary* case they are made from",
        "(`random_cases(spec, 1, 1000)`, default parameters). An output (a reduction's value, an",
        "input's gradient) that is already wrong there is a difference of definition, not of",
        "stability: it is left out of the main count and listed under §; the *strict* count keeps",
        "it. An input the contender returns no gradient for is left out of both (‡).",
        "",
        "Cells: cases passed / cases, then failing cases by their first failure class: `unsup`",
        "(the contender raised), `nf-val` (non-finite value), `nf-grad` (non-finite gradient),",
        "`val` (wrong value), `grad` (wrong gradient); ‡ and § as above; — : no such contender.",
        "",
        "## Totals",
        "",
        "| backend | mode | generated | built-in | built-in, strict | naive | naive, strict "
        "| generated, on the built-ins' specs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    tot = doc["totals"]
    for b in BACKENDS:
        for m in MODES:
            row = [b, m]
            for k in KINDS:
                t = tot.get(f"{b}/{m}/{k}")
                row.append("—" if not t else f"{_frac(t)} ({t['specs']} specs)")
                if k != "generated":
                    row.append("—" if not t else _frac(t, "strict_passed"))
            gb = [idx[(s, b, m, "generated")] for s in specs
                  if (s, b, m, "builtin") in idx and (s, b, m, "generated") in idx]
            row.append(f"{sum(r['passed'] for r in gb)}/{sum(r['total'] for r in gb)}" if gb else "—")
            lines.append("| " + " | ".join(row) + " |")
    lines += ["", "## Per spec", ""]
    for b in BACKENDS:
        lines += [f"### {b}", "", "| spec | cases | generated eager | generated graph | built-in eager "
                  "| built-in graph | naive eager | naive graph |", "|---|---|---|---|---|---|---|---|"]
        for s in specs:
            recs_s = [idx.get((s, b, m, k)) for k in KINDS for m in MODES]
            if all(r is None for r in recs_s):
                continue
            n = next(r["total"] for r in recs_s if r is not None)
            lines.append(f"| {s} | {n} | " + " | ".join(_cell(r) for r in recs_s) + " |")
        lines.append("")
    if doc.get("not_compared"):
        lines += [f"Not compared (no built-in or naive contender here): {', '.join(doc['not_compared'])}.", ""]
    lines += ["## Contenders", "", "| spec | backend | built-in | naive |", "|---|---|---|---|"]
    for s in specs:
        for b in BACKENDS:
            bi = idx.get((s, b, "eager", "builtin"))
            nv = idx.get((s, b, "eager", "naive"))
            if bi or nv:
                lines.append(f"| {s} | {b} | {bi['what'] if bi else '—'} | {nv['what'] if nv else '—'} |")
    ng = [r for r in recs if r["no_gradient"]]
    if ng:
        lines += ["", "## ‡ Inputs without a gradient (not compared)", "",
                  "On the ordinary case the gradient is None (Paddle) or identically zero where the",
                  "reference's is not.", "", "| spec | backend | mode | contender | inputs |", "|---|---|---|---|---|"]
        lines += [f"| {r['spec']} | {r['backend']} | {r['mode']} | {r['kind']} | {', '.join(r['no_gradient'])} |"
                  for r in ng]
    bad = [r for r in recs if r["not_compared"]]
    if bad:
        lines += ["", "## § Outputs that differ from the spec on the ordinary case (strict count only)", "",
                  "| spec | backend | mode | contender | outputs | on the ordinary case |", "|---|---|---|---|---|---|"]
        for r in bad:
            msg = "; ".join(m.split(": ", 1)[1] for m in r["ordinary_case"]["messages"][:3])
            lines.append(f"| {r['spec']} | {r['backend']} | {r['mode']} | {r['kind']} | "
                         f"{', '.join(r['not_compared'])} | {msg} |")
    vac = sorted({(r["spec"], cid, c["reference_nonfinite_entries"]) for r in recs if r["kind"] == "generated"
                  for cid, c in r["cases"].items() if c["reference_nonfinite_entries"]})
    if vac:
        lines += ["", "## Entries where the reference is not finite (skipped by the rule, for every contender)", ""]
        lines += [f"- {s} / {cid}: {n} value or gradient entries" for s, cid, n in vac]
    lines += ["", "## Failing cases", "",
              "First message per failing case, main count (eager and graph listed once when they agree).", ""]
    for s in specs:
        for b in BACKENDS:
            for k in KINDS:
                e, g = idx.get((s, b, "eager", k)), idx.get((s, b, "graph", k))
                for cid in (e or g or {"cases": {}})["cases"]:
                    ce = e["cases"][cid] if e else None
                    cg = g["cases"][cid] if g else None
                    parts = []
                    if ce and cg and ce["messages"] == cg["messages"] and ce["messages"]:
                        parts.append(("eager+graph", ce))
                    else:
                        parts += [(m, c) for m, c in (("eager", ce), ("graph", cg)) if c and c["messages"]]
                    for m, c in parts:
                        more = f" (+{len(c['messages']) - 1} more)" if len(c["messages"]) > 1 else ""
                        lines.append(f"- {s} / {b} / {k} / {m}: `{c['messages'][0]}`{more}")
    lines += ["", MARK, "", commentary.strip() or "(commentary: hand-written, kept when the file is regenerated)"]
    return "\n".join(lines) + "\n"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.extreme", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="docs", help="directory for stability.json and stability.md (default docs)")
    ap.add_argument("--only", default="", help="comma-separated spec names")
    ap.add_argument("--backend", action="append", choices=BACKENDS)
    ap.add_argument("--mode", action="append", choices=MODES)
    args = ap.parse_args(argv)
    specs = load_all(find_specs([str(ROOT / "specs")]))
    if args.only:
        wanted = [s.strip() for s in args.only.split(",") if s.strip()]
        unknown = set(wanted) - {s.name for s in specs}
        if unknown:
            ap.error(f"unknown spec(s): {', '.join(sorted(unknown))}")
        specs = [s for s in specs if s.name in wanted]
    skipped = [s.name for s in specs if s.name not in CONTENDERS]
    specs = [s for s in specs if s.name in CONTENDERS]
    start = time.time()
    warnings.filterwarnings("ignore")

    def progress(r):
        log(f"{r['spec']:20s} {r['backend']:9s} {r['mode']:5s} {r['kind']:9s} {r['passed']}/{r['total']} "
            f"strict {r['strict_passed']} "
            f"({r['seconds']:.1f}s, {time.time() - start:.0f}s)")

    records = evaluate(specs, tuple(args.backend or BACKENDS), tuple(args.mode or MODES), KINDS, progress)
    cmd = "python -m benchmarks.extreme" + (f" --out {args.out}" if args.out != "docs" else "") + \
        (f" --only {args.only}" if args.only else "")
    doc = {"command": cmd, "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "seconds": time.time() - start, "versions": _versions(), "dtype": DTYPE,
           "not_compared": skipped, "totals": totals(records), "records": records}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "stability.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    md = out / "stability.md"
    old = md.read_text(encoding="utf-8") if md.exists() else ""
    commentary = old.split(MARK, 1)[1] if MARK in old else ""
    md.write_text(render_md(doc, commentary), encoding="utf-8")
    for k, t in doc["totals"].items():
        log(f"{k:30s} {t['passed']}/{t['total']} (strict {t['strict_passed']})")
    log(f"wrote {out / 'stability.json'} and {out / 'stability.md'} ({time.time() - start:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
