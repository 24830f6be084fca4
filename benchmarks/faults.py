"""Page faults per call against time per call, under allocator and thread settings.

``python -m benchmarks.faults [--framework paddle] [--cases huber] [--variants ...]``
runs, for each *variant* (an environment, or a process history), one fresh
subprocess that times forward+backward of every contender of each case (eager and
compiled) and counts its minor page faults per call (``getrusage`` around each call);
it prints a Markdown table and, with ``--out``, writes the JSON.

``python -m benchmarks.faults --child ...`` is that subprocess (one JSON line).

Variants (``--variants all`` lists them): ``default``; glibc's ``MALLOC_MMAP_THRESHOLD_``
and/or ``MALLOC_TRIM_THRESHOLD_`` at 4 GiB (freed tensors stay in glibc's heap);
``MALLOC_TOP_PAD_``; ``MALLOC_ARENA_MAX=1``; ``hugetlb`` (``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``:
glibc asks for transparent huge pages with ``madvise``, which the ``madvise`` THP setting
honours: about 350 faults instead of 4097 per 16 MiB tensor, measured); ``prefree17`` (the process mallocs and
frees one 17 MiB block before the first tensor: glibc's dynamic mmap threshold moves
above 16 MiB, as it does after any earlier workload in the same process freed such a
block); ``after_ms`` (a MindSpore eager huber group runs first in the same process,
as in the full ``python -m benchmarks`` run; ``after_ms_all``: every MindSpore group
of the full run, eager then jit, one round each); ``omp1`` (``OMP_NUM_THREADS=1``);
Paddle's allocator flags.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("GLOG_minloglevel", "2")

ROOT = Path(__file__).resolve().parents[1]
BIG = str(4 << 30)  # 4 GiB: above any tensor here, so glibc never unmaps a freed one

VARIANTS = {
    "default": ({}, None),
    "mmap_big": ({"MALLOC_MMAP_THRESHOLD_": BIG}, None),
    "trim_big": ({"MALLOC_TRIM_THRESHOLD_": BIG}, None),
    "mmap_trim_big": ({"MALLOC_MMAP_THRESHOLD_": BIG, "MALLOC_TRIM_THRESHOLD_": BIG}, None),
    "top_pad_256m": ({"MALLOC_TOP_PAD_": str(256 << 20)}, None),
    "arena1": ({"MALLOC_ARENA_MAX": "1"}, None),
    "hugetlb": ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}, None),
    "hugetlb_mmap_trim_big": ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1", "MALLOC_MMAP_THRESHOLD_": BIG,
                               "MALLOC_TRIM_THRESHOLD_": BIG}, None),
    "prefree17": ({}, "prefree17"),
    "after_ms": ({}, "after_ms"),
    "after_ms_all": ({}, "after_ms_all"),
    "omp1": ({"OMP_NUM_THREADS": "1"}, None),
    "pd_naive_best_fit": ({"FLAGS_allocator_strategy": "naive_best_fit"}, None),
    "pd_system_allocator": ({"FLAGS_use_system_allocator": "true"}, None),
    "pd_initial_cpu_2000": ({"FLAGS_initial_cpu_memory_in_mb": "2000", "FLAGS_fraction_of_cpu_memory_to_use": "0.5"},
                            None),
    "pd_threads2": ({"FLAGS_paddle_num_threads": "2"}, None),
}
DEFAULT_VARIANTS = ("default", "mmap_big", "trim_big", "mmap_trim_big", "hugetlb", "prefree17", "after_ms", "omp1",
                    "pd_naive_best_fit", "pd_system_allocator", "pd_initial_cpu_2000")


def _usage():
    """(minor faults, major faults, user s, system s) of this process so far, all threads."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_minflt, r.ru_majflt, r.ru_utime, r.ru_stime


def _prefree(mib: int):
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free(ctypes.c_void_p(libc.malloc(mib << 20)))


def measure_group(backend, case, mode, scale, reps):
    """{kind: {median_ms, min_ms, max_ms, minflt_per_call, majflt_per_call, user_ms, sys_ms}} per call,
    contenders alternating.  user/sys are CPU time of the whole process (all threads): unlike wall
    time they do not grow when other processes take the cores, and page-fault handling shows as sys."""
    tensors = backend.tensors(case.make_inputs(scale), case.grads)
    steps = {k: backend.step(fn, tensors, case.grads, mode) for k, fn in backend.contenders(case).items()}
    for run in list(steps.values()) * 2:
        run()
    kinds = list(steps)
    ms, mn, mj, us, sy = ({k: [] for k in kinds} for _ in range(5))
    for r in range(reps):
        for i in range(len(kinds)):
            k = kinds[(i + r) % len(kinds)]
            u0, t0 = _usage(), time.perf_counter()
            steps[k]()
            t1, u1 = time.perf_counter(), _usage()
            ms[k].append(1e3 * (t1 - t0))
            mn[k].append(u1[0] - u0[0])
            mj[k].append(u1[1] - u0[1])
            us[k].append(1e3 * (u1[2] - u0[2]))
            sy[k].append(1e3 * (u1[3] - u0[3]))
    med = statistics.median
    return {k: {"median_ms": med(ms[k]), "min_ms": min(ms[k]), "max_ms": max(ms[k]),
                "minflt_per_call": med(mn[k]), "majflt_per_call": med(mj[k]),
                "user_ms": med(us[k]), "sys_ms": med(sy[k])} for k in kinds}


def child(framework, cases, history, scale, reps):
    from .cases import BY_NAME
    from .timing import MindSporeBackend, PaddleBackend

    if history == "prefree17":
        _prefree(17)
    if history in ("after_ms", "after_ms_all") or framework == "mindspore":
        ms_backend = MindSporeBackend()
        if history == "after_ms":
            measure_group(ms_backend, BY_NAME["huber"], "eager", scale, 1)
        if history == "after_ms_all":
            from .cases import CASES

            for mode in ms_backend.modes:
                for c in CASES:
                    if ms_backend.compared(c, ms_backend.contenders(c)):
                        measure_group(ms_backend, c, mode, scale, 1)
    b = ms_backend if framework == "mindspore" else PaddleBackend()
    return {mode: {c: measure_group(b, BY_NAME[c], mode, scale, reps) for c in cases} for mode in b.modes}


def run_variant(name, framework, cases, scale, reps, timeout=900):
    env_add, history = VARIANTS[name]
    env = dict(os.environ, **env_add)
    cmd = [sys.executable, "-m", "benchmarks.faults", "--child", "--framework", framework, "--cases", ",".join(cases),
           "--scale", scale, "--reps", str(reps)] + (["--history", history] if history else [])
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode:
        return {"error": (p.stderr or "")[-400:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _cell(r, k):
    return f"{r[k]['median_ms']:.1f} ({r[k]['minflt_per_call']:.0f})" if k in r else "–"


def _ratio(r, a, b):
    return f"{r[a]['median_ms'] / r[b]['median_ms']:.2f}" if a in r and b in r else "–"


def table(results: dict) -> str:
    """Markdown: one row per variant, mode and case; ms and faults/call per contender, ratios."""
    head = ("| variant | mode | case | floor ms (flt) | generated ms (flt) | built-in ms (flt) | hand ms (flt) "
            "| gen/built-in | gen/floor | built-in/floor | CPU ms user+sys: floor, gen, built-in |")
    lines = [head, "|" + "---|" * 11]
    for var, res in results.items():
        if "error" in res:
            lines.append(f"| {var} | error: {res['error'][-120:]!r} |" + " |" * 8)
            continue
        for mode, cases in res.items():
            for case, r in cases.items():
                cell = functools.partial(_cell, r)
                ratio = functools.partial(_ratio, r)
                cpu = ", ".join(f"{r[k]['user_ms']:.0f}+{r[k]['sys_ms']:.0f}" if k in r else "–"
                                for k in ("floor", "generated", "builtin"))
                lines.append(f"| {var} | {mode} | {case} | {cell('floor')} | {cell('generated')} | {cell('builtin')} "
                             f"| {cell('handwritten')} | {ratio('generated', 'builtin')} | "
                             f"{ratio('generated', 'floor')} | {ratio('builtin', 'floor')} | {cpu} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.faults", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", choices=("paddle", "mindspore"), default="paddle")
    ap.add_argument("--cases", default="huber", help="comma-separated losses (default huber)")
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                    help="comma-separated variant names, or 'all': " + ", ".join(VARIANTS))
    ap.add_argument("--scale", choices=("full", "quick"), default="full")
    ap.add_argument("--reps", type=int, default=5, help="alternating rounds per group (default 5)")
    ap.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--history", choices=("prefree17", "after_ms", "after_ms_all"), default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    cases = a.cases.split(",")
    if a.child:
        sys.stdout.write(json.dumps(child(a.framework, cases, a.history, a.scale, a.reps)) + "\n")
        return
    names = list(VARIANTS) if a.variants == "all" else a.variants.split(",")
    if a.framework == "mindspore":
        names = [n for n in names if not n.startswith("pd_")]
    results = {}
    for n in names:
        t0 = time.perf_counter()
        results[n] = run_variant(n, a.framework, cases, a.scale, a.reps)
        print(f"  {n}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    if a.out:
        a.out.write_text(json.dumps({"framework": a.framework, "cases": cases, "reps": a.reps,
                                     "loadavg_end": os.getloadavg(), "variants": {n: VARIANTS[n] for n in names}, "results": results}, indent=1) + "\n")
    print(table(results))


if __name__ == "__main__":
    main()
