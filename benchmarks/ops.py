"""``python -m benchmarks.ops``: forward+backward of single operators, for the operator table.

Not part of ``python -m benchmarks`` (which does not run it); it backs the observations
in benchmarks/notes.md with figures: how the spellings losscc could emit for the same
operation (``d**2`` vs ``d*d`` vs square, ``x - logsumexp`` vs log_softmax, mean vs sum,
where vs clip, take_along_axis vs index_sample) compare, eager mode, float32, regression [4096, 1024] / logits [8192, 1000].
Prints a Markdown table (median of 5 alternating rounds after one warm-up, ms).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("GLOG_minloglevel", "2")

import numpy as np  # noqa: E402


def _ms_cases():
    import mindspore as ms
    from mindspore import ops

    def sq_pow(x):
        return (x**2).sum()

    def sq_mul(x):
        return (x * x).sum()

    def sq_square(x):
        return ops.square(x).sum()

    def red_mean(x):
        return x.mean()

    def red_sum(x):
        return x.sum()

    def sel_where(x):
        return ops.where(x > 0, x, 0.5 * x).sum()

    def sel_relu_like(x):
        return ops.maximum(x, 0.5 * x).sum()

    def abs_(x):
        return ops.abs(x).sum()

    def hinge_where(x):
        return ops.where(x >= 0, x, ops.zeros_like(x)).sum()

    def hinge_clamp(x):
        return ops.clamp(x, min=0).sum()

    def lsm_sub(z):
        return (z - ops.logsumexp(z, -1, keepdim=True)).sum()

    def lsm_op(z):
        return ops.log_softmax(z, -1).sum()

    def softmax(z):
        return ops.softmax(z, -1).sum()

    def softplus_where(x):
        return (ops.where(x > 0, x, 0) + ops.log1p(ops.exp(-ops.abs(x)))).sum()

    def softplus_op(x):
        return ops.softplus(x).sum()

    def sigmoid_op(x):
        return ops.sigmoid(x).sum()

    def sigmoid_sides(x):  # the tables' _sigmoid
        positive = x > 0
        small = ops.sigmoid(ops.where(positive, -x, x))
        return ops.where(positive, 1 - small, small).sum()

    lab = ms.Tensor(np.random.default_rng(1).integers(0, 1000, (8192, 1)).astype(np.int32))

    def gather(z):
        return ops.gather_elements(z, 1, lab).sum()

    cases = [("x**2", sq_pow, "reg"), ("x*x", sq_mul, "reg"), ("ops.square(x)", sq_square, "reg"),
             ("x.mean()", red_mean, "reg"), ("x.sum()", red_sum, "reg"), ("abs(x)", abs_, "reg"),
             ("where(x>0, x, 0.5x)", sel_where, "reg"), ("maximum(x, 0.5x)", sel_relu_like, "reg"),
             ("hinge where(x>=0, x, 0)", hinge_where, "reg"), ("hinge ops.clamp(x, min=0)", hinge_clamp, "reg"),
             ("softplus via where+log1p(exp(-|x|))", softplus_where, "reg"), ("ops.softplus", softplus_op, "reg"),
             ("ops.sigmoid(x)", sigmoid_op, "reg"), ("sigmoid by sides (_sigmoid)", sigmoid_sides, "reg"),
             ("z - logsumexp(z)", lsm_sub, "cls"), ("ops.log_softmax(z)", lsm_op, "cls"),
             ("ops.softmax(z)", softmax, "cls"), ("ops.gather_elements(z, 1, label)", gather, "cls")]
    from mindspore.common.api import _pynative_executor as pe

    def make(fn, arr):
        t = ms.Tensor(arr)
        vg = ms.value_and_grad(fn, grad_position=0)

        def run():
            vg(t)
            pe.sync()

        return run

    return cases, make


def _pd_lse(paddle, z):
    peak = paddle.amax(z, axis=-1, keepdim=True).detach()
    return peak + paddle.log(paddle.sum(paddle.exp(z - peak), axis=-1, keepdim=True))


def _pd_sigmoid_sides(paddle, F, x):  # the table's _sigmoid
    positive = x > 0
    small = F.sigmoid(paddle.where(positive, -x, x))
    return paddle.where(positive, 1 - small, small)


def _pd_cases():
    import paddle
    import paddle.nn.functional as F

    lab = paddle.to_tensor(np.random.default_rng(1).integers(0, 1000, (8192, 1)))
    cases = [("x**2", lambda x: (x**2).sum(), "reg"), ("x*x", lambda x: (x * x).sum(), "reg"),
             ("paddle.square(x)", lambda x: paddle.square(x).sum(), "reg"),
             ("x.mean()", lambda x: x.mean(), "reg"), ("x.sum()", lambda x: x.sum(), "reg"),
             ("abs(x)", lambda x: paddle.abs(x).sum(), "reg"),
             ("where(x>0, x, 0.5x)", lambda x: paddle.where(x > 0, x, 0.5 * x).sum(), "reg"),
             ("maximum(x, 0.5x)", lambda x: paddle.maximum(x, 0.5 * x).sum(), "reg"),
             ("hinge where(x>=0, x, 0)", lambda x: paddle.where(x >= 0, x, paddle.full_like(x, 0)).sum(), "reg"),
             ("hinge paddle.clip(x, min=0)", lambda x: paddle.clip(x, min=0).sum(), "reg"),
             ("softplus via where+log1p(exp(-|x|))",
              lambda x: (paddle.where(x > 0, x, paddle.zeros_like(x)) + paddle.log1p(paddle.exp(-paddle.abs(x)))).sum(),
              "reg"),
             ("F.softplus(x, threshold=40)", lambda x: F.softplus(x, threshold=40.0).sum(), "reg"),
             ("F.sigmoid(x)", lambda x: F.sigmoid(x).sum(), "reg"),
             ("sigmoid by sides (_sigmoid)", lambda x: _pd_sigmoid_sides(paddle, F, x).sum(), "reg"),
             ("z - logsumexp(z)", lambda z: (z - paddle.logsumexp(z, axis=-1, keepdim=True)).sum(), "cls"),
             ("F.log_softmax(z)", lambda z: F.log_softmax(z, axis=-1).sum(), "cls"),
             ("F.softmax(z)", lambda z: F.softmax(z, axis=-1).sum(), "cls"),
             ("shifted logsumexp (peak detached)", lambda z: _pd_lse(paddle, z).sum(), "cls"),
             ("paddle.logsumexp(z)", lambda z: paddle.logsumexp(z, axis=-1, keepdim=True).sum(), "cls"),
             ("paddle.take_along_axis(z, label, 1)", lambda z: paddle.take_along_axis(z, lab, 1).sum(), "cls"),
             ("take_along_axis(z, label, 1, broadcast=False)",
              lambda z: paddle.take_along_axis(z, lab, 1, broadcast=False).sum(), "cls"),
             ("paddle.index_sample(z, label)", lambda z: paddle.index_sample(z, lab).sum(), "cls")]

    def make(fn, arr):
        t = paddle.to_tensor(arr, stop_gradient=False)

        def run():
            paddle.grad([fn(t)], [t])

        return run

    return cases, make


def main():
    rng = np.random.default_rng(0)
    arrays = {"reg": rng.standard_normal((4096, 1024), dtype=np.float32),
              "cls": rng.standard_normal((8192, 1000), dtype=np.float32)}
    fws = sys.argv[1:] or ["mindspore", "paddle"]
    print("| framework | op | fwd+bwd ms |\n|---|---|---|")
    for fw in ("mindspore", "paddle"):  # mindspore first: both ship libdnnl
        if fw not in fws:
            continue
        cases, make = _ms_cases() if fw == "mindspore" else _pd_cases()
        runs = [(name, make(fn, arrays[size])) for name, fn, size in cases]
        for _, run in runs:
            run()
        samples = {name: [] for name, _ in runs}
        for r in range(5):
            for name, run in runs[r % len(runs):] + runs[: r % len(runs)]:
                t0 = time.perf_counter()
                run()
                samples[name].append(1e3 * (time.perf_counter() - t0))
        for name, _ in runs:
            print(f"| {fw} | `{name}` | {statistics.median(samples[name]):.1f} |", flush=True)


if __name__ == "__main__":
    main()
