"""Timing harness: forward+backward of each contender, alternating within a group.

A *group* is one case in one framework and mode; its contenders (generated,
built-in, hand-written, floor) run on the same input tensors.  Each contender is
called ``warmup`` times (the first call includes ms.jit / to_static compilation and
is reported separately as ``first_ms``), then ``reps`` rounds follow, each calling every
contender once in a rotated order, so that drifting machine load hits all of them
alike.  Reported: the median of the rounds, and per call the minor page faults and
the process's CPU time (user and system, all threads; ``getrusage``), which do not
depend on how busy the machine is the way wall time does.
"""

from __future__ import annotations

import gc
import resource
import statistics
import time
import traceback

import numpy as np

from .cases import KINDS

PREFIX = {"generated": "gen", "builtin": "builtin", "handwritten": "hand", "floor": "floor"}


class MindSporeBackend:
    name = "mindspore"
    modes = ("eager", "jit")

    def __init__(self):
        import mindspore as ms
        from mindspore.common.api import _pynative_executor

        from . import ms_impl

        self.ms, self.impl, self._pe = ms, ms_impl, _pynative_executor

    def contenders(self, case):
        out = {}
        for kind in KINDS:
            fn = getattr(self.impl, f"{PREFIX[kind]}_{case.name}", None)
            if fn is not None:
                out[kind] = fn
        return out

    def tensors(self, arrays, grads):
        return [self.impl.to_tensor(a) for a in arrays]

    def step(self, fn, tensors, grads, mode):
        ms = self.ms
        vg = ms.value_and_grad(fn, grad_position=tuple(grads))
        if mode == "jit":
            vg = ms.jit(vg)
        sync = self._pe.sync  # ms.runtime.synchronize() is a no-op on CPU ("not supported")

        def run():
            loss, grads_ = vg(*tensors)
            sync()
            return loss

        return run

    @staticmethod
    def value(loss) -> float:
        return float(loss.asnumpy())

    def sync(self):
        self._pe.sync()

    def alloc_peak_mb(self, run):
        return None  # MindSpore 2.10 has no CPU allocator statistics (ms.runtime.memory_*: "CPU device is not supported")

    @staticmethod
    def compared(case, contenders) -> bool:
        """Only cases with something to compare the generated loss with are benchmarked."""
        return "generated" in contenders and ("builtin" in contenders or "handwritten" in contenders)


class PaddleBackend:
    name = "paddle"
    modes = ("eager", "to_static")

    def __init__(self):
        import paddle

        from . import pd_impl

        self.paddle, self.impl = paddle, pd_impl

    contenders = MindSporeBackend.contenders
    compared = staticmethod(MindSporeBackend.compared)

    def tensors(self, arrays, grads):
        return [self.impl.to_tensor(a, i in grads) for i, a in enumerate(arrays)]

    def step(self, fn, tensors, grads, mode):
        paddle = self.paddle
        f = paddle.jit.to_static(fn) if mode == "to_static" else fn
        diff = [tensors[i] for i in grads]

        def run():
            loss = f(*tensors)
            paddle.grad([loss], diff)  # CPU kernels run synchronously
            return loss

        return run

    @staticmethod
    def value(loss) -> float:
        return float(loss.numpy())

    def sync(self):
        pass

    def alloc_peak_mb(self, run):
        """Peak bytes held by Paddle's host allocator during one call, above what was held before."""
        core = self.paddle.base.core
        gc.collect()
        core.host_memory_stat_reset_peak_value("Allocated", 0)
        before = core.host_memory_stat_current_value("Allocated", 0)
        run()
        return (core.host_memory_stat_peak_value("Allocated", 0) - before) / 2**20


def _usage():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_minflt, r.ru_utime + r.ru_stime, r.ru_stime


def run_group(backend, case, mode, scale, warmup=2, reps=7, min_reps=3, budget_s=8.0, log=print):
    """Time every contender of `case`; returns {kind: result dict}."""
    gc.collect()
    arrays = case.make_inputs(scale)
    tensors = backend.tensors(arrays, case.grads)
    del arrays
    results, steps = {}, {}
    for kind, fn in backend.contenders(case).items():
        res = results[kind] = {"function": f"{fn.__module__.split('.')[-1]}.{fn.__name__}"}
        try:
            run = backend.step(fn, tensors, case.grads, mode)
            t0 = time.perf_counter()
            loss = run()
            res["first_ms"] = 1e3 * (time.perf_counter() - t0)
            res["value"] = backend.value(loss)
            del loss
            steps[kind] = run
        except Exception as e:  # a contender that does not run is reported, not fatal
            res["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
            log(f"    {kind}: ERROR {res['error']}")
            log("".join(traceback.format_exception(e)[-3:]))
    # further warm-up calls; the last one estimates a round's cost
    round_s = 0.0
    for w in range(max(warmup - 1, 0)):
        round_s = 0.0
        for kind, run in steps.items():
            t0 = time.perf_counter()
            run()
            round_s += time.perf_counter() - t0
    n = reps if round_s <= 0 else max(min_reps, min(reps, int(budget_s / round_s)))
    samples = {k: [] for k in steps}
    usage = {k: [] for k in steps}  # (minor faults, CPU ms, system ms) per call
    kinds = list(steps)
    for r in range(n):
        for i in range(len(kinds)):
            kind = kinds[(i + r) % len(kinds)]
            u0, t0 = _usage(), time.perf_counter()
            steps[kind]()
            t1, u1 = time.perf_counter(), _usage()
            samples[kind].append(1e3 * (t1 - t0))
            usage[kind].append((u1[0] - u0[0], 1e3 * (u1[1] - u0[1]), 1e3 * (u1[2] - u0[2])))
    for kind, s in samples.items():
        med = statistics.median
        results[kind].update(median_ms=med(s), min_ms=min(s), max_ms=max(s), reps=len(s),
                             samples_ms=[round(v, 3) for v in s],
                             minflt_per_call=med(u[0] for u in usage[kind]),
                             cpu_ms=round(med(u[1] for u in usage[kind]), 3),
                             sys_ms=round(med(u[2] for u in usage[kind]), 3))
        try:
            peak = backend.alloc_peak_mb(steps[kind])
            if peak is not None:
                results[kind]["alloc_peak_mb"] = round(peak, 1)
        except Exception as e:
            results[kind]["alloc_peak_error"] = str(e)[:200]
    del steps, tensors
    gc.collect()
    return results


def summarize(results: dict) -> dict:
    """Ratios of the generated contender's median to the others', and of every contender to the
    floor of the same run (``<kind>/floor``: how many floors it costs, a machine-neutral unit)."""
    g = results.get("generated", {}).get("median_ms")
    out = {}
    for kind in ("builtin", "handwritten", "floor"):
        other = results.get(kind, {}).get("median_ms")
        if g and other:
            out[f"gen/{kind}"] = g / other
    fl = results.get("floor", {}).get("median_ms")
    for kind in ("builtin", "handwritten"):
        other = results.get(kind, {}).get("median_ms")
        if fl and other:
            out[f"{PREFIX[kind]}/floor"] = other / fl
    gv, bv = results.get("generated", {}).get("value"), results.get("builtin", {}).get("value")
    if gv is not None and bv is not None and np.isfinite(gv) and np.isfinite(bv):
        out["value_rel_diff_vs_builtin"] = abs(gv - bv) / max(abs(bv), 1e-30)
    return out
