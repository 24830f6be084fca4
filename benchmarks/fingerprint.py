"""Machine fingerprint written beside every benchmark run.

Two runs' ratios can only be compared when the machines behave alike, and on these
CPU builds the behaviour that matters most is not the CPU's speed but how cheaply a
freshly allocated large tensor gets its pages: both frameworks hand a 16 MB tensor
back to glibc on release, glibc's ``free`` unmaps it (a block above its mmap
threshold), and the next tensor faults all 4096 of its pages in again.  So the
fingerprint holds, beside CPU model and flags: NumPy's copy bandwidth (into a
preallocated array and into a fresh one), each framework's own copy bandwidth,
minor page faults per call of the ``(x - y).sum()`` floor, the transparent huge page
setting, thread counts, the glibc malloc environment and the load average.

The parsers (``parse_*``, ``malloc_env``, ``thread_env``) are pure functions of text
or a mapping.  The measurements run in a fresh subprocess per framework
(``python -m benchmarks.fingerprint --framework paddle``, one JSON line), never in
the timing process: glibc raises its mmap threshold after the first large block is
freed, so a 16 MB NumPy copy made there would change the very page-fault behaviour
that the timing run is to be judged by.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time

import numpy as np

# CPU flags that decide which kernels the frameworks' CPU builds pick.
CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "hypervisor")
MALLOC_VARS = ("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
               "MALLOC_MMAP_MAX_", "GLIBC_TUNABLES", "LD_PRELOAD")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "KMP_AFFINITY", "OMP_PROC_BIND")
PADDLE_FLAGS = ("FLAGS_allocator_strategy", "FLAGS_use_system_allocator", "FLAGS_fraction_of_cpu_memory_to_use",
                "FLAGS_initial_cpu_memory_in_mb", "FLAGS_paddle_num_threads")
COPY_BYTES = 16 * 2**20


def parse_cpuinfo(text: str) -> dict:
    """CPU model, logical CPU count and the flags in CPU_FLAGS present, from /proc/cpuinfo text."""
    model, flags, n = "unknown", set(), 0
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key = key.strip()
        if key == "processor":
            n += 1
        elif key == "model name" and model == "unknown":
            model = val.strip()
        elif key == "flags" and not flags:
            flags = set(val.split())
    return {"model": model, "logical_cpus": n, "flags": [f for f in CPU_FLAGS if f in flags]}


def parse_thp(text: str) -> str:
    """The selected value of a /sys/kernel/mm/transparent_hugepage/* file ("always [madvise] never")."""
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return text.strip() or "unknown"


def parse_stat_faults(text: str) -> tuple:
    """(minflt, majflt) from /proc/<pid>/stat text; the command name may hold spaces and parentheses."""
    fields = text[text.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); minflt is field 10, majflt field 12
    return int(fields[7]), int(fields[9])


def _pick(environ, names) -> dict:
    return {k: environ[k] for k in names if k in environ}


def malloc_env(environ) -> dict:
    """The glibc malloc settings (and preloaded allocators) in an environment mapping."""
    return _pick(environ, MALLOC_VARS)


def thread_env(environ) -> dict:
    """Thread-count variables for OpenMP/MKL/OpenBLAS in an environment mapping."""
    return _pick(environ, THREAD_VARS)


def gbs(nbytes: int, seconds: float) -> float:
    """Bytes per second in GB/s (10**9)."""
    return nbytes / seconds / 1e9 if seconds > 0 else float("nan")


def _read(path: str, limit: int = 1 << 20) -> str:
    try:
        with open(path) as f:
            return f.read(limit)
    except OSError:
        return ""


def minflt() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def per_call(fn, reps: int = 5) -> dict:
    """Median wall ms and minor faults of `fn()` over `reps` calls, after one warm-up call."""
    fn()
    ms, faults = [], []
    for _ in range(reps):
        f0, t0 = minflt(), time.perf_counter()
        fn()
        ms.append(1e3 * (time.perf_counter() - t0))
        faults.append(minflt() - f0)
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "minflt_per_call": statistics.median(faults)}


def numpy_copy(nbytes: int = COPY_BYTES, reps: int = 7) -> dict:
    """NumPy copy of `nbytes` float32: into a preallocated array, and into a fresh one (``a.copy()``)."""
    a = np.ones(nbytes // 4, np.float32)
    b = np.empty_like(a)
    pre = per_call(lambda: np.copyto(b, a), reps)
    fresh = per_call(lambda: a.copy(), reps)
    return {"prealloc_gbs": gbs(nbytes, pre["min_ms"] / 1e3), "fresh_gbs": gbs(nbytes, fresh["min_ms"] / 1e3),
            "fresh_minflt_per_copy": fresh["minflt_per_call"], "bytes": nbytes}


def framework_copy(backend, nbytes: int = COPY_BYTES, reps: int = 7) -> dict:
    """The framework's own copy of a fresh `nbytes` float32 tensor: Paddle ``clone``, MindSpore
    ``ops.deepcopy`` (``Tensor.copy`` takes ~25x longer in MindSpore 2.10 PyNative)."""
    t = backend.tensors([np.ones(nbytes // 4, np.float32)], ())[0]
    if backend.name == "paddle":
        def run():
            t.clone()
    else:
        deepcopy = backend.ms.ops.deepcopy

        def run():
            deepcopy(t)
            backend.sync()
    r = per_call(run, reps)
    return {"fresh_gbs": gbs(nbytes, r["min_ms"] / 1e3), "minflt_per_copy": r["minflt_per_call"],
            "median_ms": r["median_ms"], "bytes": nbytes}


def floor_faults(backend, scale: str, reps: int = 5) -> dict:
    """Forward+backward of the huber ``(x - y).sum()`` floor, eager: ms and minor faults per call."""
    from .cases import BY_NAME

    case = BY_NAME["huber"]
    fn = backend.contenders(case)["floor"]
    tensors = backend.tensors(case.make_inputs(scale), case.grads)
    r = per_call(backend.step(fn, tensors, case.grads, "eager"), reps)
    return {**r, "pages_per_16mb_tensor": COPY_BYTES // os.sysconf("SC_PAGE_SIZE")}


def framework_threads(backend) -> dict:
    if backend.name == "paddle":
        flags = backend.paddle.get_flags(list(PADDLE_FLAGS))
        return {k: v for k, v in flags.items()}
    ms = backend.ms
    return {"runtime_num_threads": ms.get_context("runtime_num_threads")}


def static_facts(environ=None) -> dict:
    """Everything that needs no measurement: CPU, THP, environment, glibc."""
    environ = os.environ if environ is None else environ
    thp = "/sys/kernel/mm/transparent_hugepage/"
    return {"cpu": parse_cpuinfo(_read("/proc/cpuinfo")), "nproc": len(os.sched_getaffinity(0)),
            "thp_enabled": parse_thp(_read(thp + "enabled")), "thp_defrag": parse_thp(_read(thp + "defrag")),
            "page_size": os.sysconf("SC_PAGE_SIZE"), "glibc": " ".join(platform.libc_ver()),
            "malloc_env": malloc_env(environ), "thread_env": thread_env(environ),
            "paddle_flags_env": _pick(environ, PADDLE_FLAGS)}


def measure(backends: dict, scale: str) -> dict:
    """Per framework: own copy bandwidth, floor faults per call, thread settings."""
    out = {}
    for name, b in backends.items():
        try:
            out[name] = {"copy": framework_copy(b), "floor": floor_faults(b, scale), "threads": framework_threads(b)}
        except Exception as e:  # a fingerprint that fails is reported, not fatal
            out[name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fingerprint", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", choices=("none", "mindspore", "paddle"), default="none",
                    help="also measure this framework's copy, floor faults and threads")
    ap.add_argument("--scale", choices=("full", "quick"), default="full")
    a = ap.parse_args(argv)
    out = static_facts()
    if a.framework != "none":
        from .timing import MindSporeBackend, PaddleBackend

        b = MindSporeBackend() if a.framework == "mindspore" else PaddleBackend()
        out[a.framework] = measure({a.framework: b}, a.scale)[a.framework]
    out["numpy_copy"] = numpy_copy()  # after the framework: its frees move glibc's mmap threshold
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
