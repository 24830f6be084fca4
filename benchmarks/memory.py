"""Peak resident memory of one eager forward+backward, one forked child per contender.

Run as ``python -m benchmarks.memory --framework mindspore|paddle --scale full|quick``;
prints one JSON object.  The process imports only its framework and runs no tensor
operation itself; for each contender it forks a child, which builds the inputs,
touches each once (``.sum()``, so that lazily materialised inputs are not charged to
the loss), resets the kernel's high-water mark (``echo 5 > /proc/self/clear_refs``),
runs one eager forward+backward and reports VmHWM - VmRSS(before).  A fresh child per
contender is needed because both frameworks keep freed CPU memory in their own pools
(MindSpore's second identical call shows 0 MB), so deltas in one long-lived process
mean nothing.  ``MALLOC_MMAP_THRESHOLD_`` is fixed at 64 KiB so that glibc returns
large blocks to the system and does not hide them in its heap either.

Limits: it is the growth of the whole process's resident set, so it includes the
framework's pool granularity, first-call kernel set-up and (for MindSpore) whatever
its pool reserves beyond the live tensors; it is the first (cold) call; compiled
modes are not measured this way (the first ms.jit/to_static call includes the
compiler's own memory and later calls reuse the pool).  For Paddle the timing run
also records the allocator's own peak (``core.host_memory_stat_peak_value``) in both
modes, which counts live tensor bytes exactly.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import time

os.environ.setdefault("GLOG_minloglevel", "2")


def _status():
    d = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmHWM", "VmRSS")):
                k, v = line.split(":")
                d[k] = int(v.split()[0]) / 1024.0  # kB -> MiB
    return d


def _reset_hwm():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _child(backend, case, kind, fn, scale, w):
    import gc

    try:
        arrays = case.make_inputs(scale)
        tensors = backend.tensors(arrays, case.grads)
        del arrays
        for t in tensors:
            t.sum()
        backend.sync()
        run = backend.step(fn, tensors, case.grads, "eager")
        gc.collect()
        _reset_hwm()
        before = _status()["VmRSS"]
        t0 = time.perf_counter()
        loss = run()
        backend.value(loss)
        dt = time.perf_counter() - t0
        s = _status()
        out = {"peak_rss_delta_mb": round(s["VmHWM"] - before, 1), "rss_after_delta_mb": round(s["VmRSS"] - before, 1),
               "cold_call_ms": round(1e3 * dt, 1)}
    except Exception as e:
        out = {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"}
    os.write(w, json.dumps(out).encode())
    os._exit(0)


def measure(framework: str, scale: str, timeout_s: float = 120.0, cases=None, log=None) -> dict:
    from .cases import CASES
    from .timing import MindSporeBackend, PaddleBackend

    backend = MindSporeBackend() if framework == "mindspore" else PaddleBackend()
    results = {}
    for case in CASES:
        if cases and case.name not in cases:
            continue
        contenders = backend.contenders(case)
        if not backend.compared(case, contenders):
            continue
        for kind, fn in contenders.items():
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                _child(backend, case, kind, fn, scale, w)
            os.close(w)
            ready, _, _ = select.select([r], [], [], timeout_s)
            if ready:
                data = b""
                while chunk := os.read(r, 65536):
                    data += chunk
                res = json.loads(data.decode() or '{"error": "child died"}')
            else:
                os.kill(pid, signal.SIGKILL)
                res = {"error": f"timeout after {timeout_s} s"}
            os.close(r)
            os.waitpid(pid, 0)
            results.setdefault(case.name, {})[kind] = res
            if log:
                log(f"  memory {framework} {case.name} {kind}: {res}")
    return results


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--framework", required=True, choices=("mindspore", "paddle"))
    p.add_argument("--scale", default="full", choices=("full", "quick"))
    p.add_argument("--cases", default=None, help="comma-separated case names")
    a = p.parse_args(argv)
    cases = a.cases.split(",") if a.cases else None
    res = measure(a.framework, a.scale, cases=cases, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
