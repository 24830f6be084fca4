"""``python -m benchmarks [--quick] [--out DIR]``: run everything, write benchmarks.{json,md}.

Order: machine facts and fingerprint (one fresh subprocess per framework: copy
bandwidth, page faults per call of the floor, threads, THP, malloc environment);
compiler wall time (cold subprocesses, before any framework is loaded here); peak
memory (one subprocess per framework, forking a child per contender); timing (this
process: mindspore imported before paddle; per call also minor page faults and CPU
time); short profiles of the worst cases; targets; the two files.

Page faults decide Paddle's elementwise timings on CPU (benchmarks/notes.md): glibc
unmaps every freed 16 MB tensor, so each new one faults 4096 pages in again, and
whether it does depends on the process's history.  ``--malloc-cache`` reruns the
command with MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ at 4 GiB, which keeps
freed blocks in glibc's heap; the fingerprint records which setting a run used.
Targets count as confirmed only against a second run (``--confirm-with``) on another
day or machine whose figure agrees within 15%.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("GLOG_minloglevel", "2")  # Paddle's C++ log lines

from .cases import CASES, SIZES  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTES = Path(__file__).with_name("notes.md")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def machine() -> dict:
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = 0.0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) / 2**20
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    return {"cpu_model": cpu, "nproc": int(nproc or os.cpu_count()), "cpu_count": os.cpu_count(),
            "mem_total_gib": mem, "platform": platform.platform(), "loadavg_start": _loadavg()}


def _loadavg() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def _git():
    def run(*a):
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    return run("rev-parse", "--short", "HEAD"), bool(run("status", "--porcelain", "--untracked-files=no"))


def versions() -> dict:
    import importlib.metadata as md

    def ver(p):
        try:
            return md.version(p)
        except md.PackageNotFoundError:
            return None

    commit, dirty = _git()
    return {"python": platform.python_version(), "numpy": ver("numpy"), "mindspore": ver("mindspore"),
            "paddle": ver("paddlepaddle"), "losscc": ver("losscc"), "git_commit": commit, "git_dirty": dirty}


MALLOC_CACHE = {"MALLOC_MMAP_THRESHOLD_": str(4 << 30), "MALLOC_TRIM_THRESHOLD_": str(4 << 30)}


def _reexec_with_malloc_cache(argv):
    """Restart this command with MALLOC_CACHE in the environment (glibc reads it only at start-up)."""
    if all(os.environ.get(k) == v for k, v in MALLOC_CACHE.items()):
        return
    log("--malloc-cache: restarting with " + " ".join(f"{k}={v}" for k, v in MALLOC_CACHE.items()))
    args = sys.argv[1:] if argv is None else list(argv)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "benchmarks", *args], dict(os.environ, **MALLOC_CACHE))


def run_fingerprint(frameworks, scale: str) -> dict:
    """benchmarks.fingerprint in one fresh subprocess per framework (this process's environment)."""
    out = {}
    for fw in frameworks or ["none"]:
        cmd = [sys.executable, "-m", "benchmarks.fingerprint", "--framework", fw, "--scale", scale]
        try:
            p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
            d = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {
                "error": (p.stderr or "")[-300:]}
        except (subprocess.TimeoutExpired, ValueError, IndexError) as e:
            d = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        if fw in d:
            out[fw] = d.pop(fw)
        elif "error" in d:
            out[fw] = d
        for k, v in d.items():
            out.setdefault(k, v)  # static facts and NumPy copy: from the first subprocess
    return out


def run_memory(framework: str, scale: str, cases) -> dict:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", GLOG_minloglevel="2")
    cmd = [sys.executable, "-m", "benchmarks.memory", "--framework", framework, "--scale", scale]
    if cases:
        cmd += ["--cases", ",".join(cases)]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if p.returncode:
        return {"error": (p.stderr or "")[-500:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, 2 rounds; writes to /tmp unless --out")
    ap.add_argument("--out", type=Path, default=None, help="folder for benchmarks.json/.md (default docs/)")
    ap.add_argument("--cases", default=None, help="comma-separated subset of losses")
    ap.add_argument("--frameworks", default="mindspore,paddle")
    ap.add_argument("--reps", type=int, default=None, help="most rounds per group (default 7; quick 2)")
    ap.add_argument("--budget", type=float, default=None, help="seconds of timed rounds per group (default 4)")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--no-compiler", action="store_true")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--no-fingerprint", action="store_true",
                    help="skip the machine fingerprint subprocesses (copy bandwidth, floor faults, threads)")
    ap.add_argument("--malloc-cache", action="store_true",
                    help="rerun with MALLOC_MMAP_THRESHOLD_=MALLOC_TRIM_THRESHOLD_=4 GiB: glibc keeps freed "
                         "tensors in its heap, so fresh tensors do not fault their pages in again on every call")
    ap.add_argument("--confirm-with", type=Path, default=None, metavar="JSON",
                    help="an earlier run's benchmarks.json: a target is confirmed when it is met in both runs, "
                         "their figures agree within 15%%, and the runs differ in day or machine")
    ap.add_argument("--from-json", type=Path, default=None,
                    help="measure nothing: rewrite benchmarks.md (next to the JSON) from an earlier run's JSON")
    a = ap.parse_args(argv)
    other = json.loads(a.confirm_with.read_text()) if a.confirm_with else None
    if a.from_json:
        from .report import confirm_targets, write_markdown

        data = json.loads(a.from_json.read_text())
        data["confirmation"] = confirm_targets(data, other)
        full = data["meta"]["settings"]["scale"] == "full" and "--cases" not in data["meta"]["command"]
        write_markdown(data, (a.out or a.from_json.parent) / "benchmarks.md", NOTES.read_text() if full and NOTES.exists() else "")
        log(f"rewrote {(a.out or a.from_json.parent) / 'benchmarks.md'} from {a.from_json}")
        return
    if a.malloc_cache:
        _reexec_with_malloc_cache(argv)

    t_start = time.perf_counter()
    scale = "quick" if a.quick else "full"
    out = a.out or (Path("/tmp/losscc-bench-quick") if a.quick else ROOT / "docs")
    reps = a.reps or (2 if a.quick else 7)
    min_reps = min(reps, 2 if a.quick else 3)
    budget = a.budget or (1.0 if a.quick else 4.0)
    warmup = 2
    frameworks = [f for f in ("mindspore", "paddle") if f in a.frameworks.split(",")]
    cases = [c for c in CASES if not a.cases or c.name in a.cases.split(",")]
    command = "python -m benchmarks" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()

    data = {"meta": {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                     "command": command.strip(), "machine": machine(), "versions": versions(),
                     "settings": {"scale": scale, "sizes": {k: list(v) for k, v in SIZES[scale].items()},
                                  "warmup": warmup, "reps": reps, "min_reps": min_reps, "budget_s": budget}},
            "timing": {}, "memory": {}, "compiler": {}, "profiles": [], "targets": [], "not_benchmarked": []}
    data["meta"]["machine"]["host"] = platform.node()

    if not a.no_fingerprint:
        log("fingerprint")
        data["meta"]["fingerprint"] = run_fingerprint(frameworks, "full")  # 16 MiB tensors even for --quick

    if not a.no_compiler:
        log("compiler wall time")
        from .compiler import time_commands

        data["compiler"] = time_commands(runs=2 if a.quick else 5, log=log)

    if not a.no_memory:
        for fw in frameworks:
            log(f"memory: {fw}")
            t0 = time.perf_counter()
            data["memory"][fw] = run_memory(fw, scale, [c.name for c in cases] if a.cases else None)
            log(f"  {time.perf_counter() - t0:.0f} s")

    log("timing")
    from .timing import MindSporeBackend, PaddleBackend, run_group, summarize

    backends = {}
    if "mindspore" in frameworks:
        backends["mindspore"] = MindSporeBackend()  # before paddle: both ship libdnnl
    if "paddle" in frameworks:
        backends["paddle"] = PaddleBackend()
        data["meta"]["versions"]["paddle_cinn"] = bool(backends["paddle"].paddle.is_compiled_with_cinn())
    specs = sorted(p.stem for p in (ROOT / "specs").glob("*.yaml"))
    for fw, b in backends.items():
        for name in specs:
            case = next((c for c in CASES if c.name == name), None)
            if case is None or not b.compared(case, b.contenders(case)):
                data["not_benchmarked"].append(f"{name} ({fw}: no built-in)")
    for fw, b in backends.items():
        data["timing"][fw] = {}
        for mode in b.modes:
            data["timing"][fw][mode] = {}
            for case in cases:
                contenders = b.contenders(case)
                if not b.compared(case, contenders):
                    continue
                t0 = time.perf_counter()
                res = run_group(b, case, mode, scale, warmup=warmup, reps=reps, min_reps=min_reps,
                                budget_s=budget, log=log)
                ratios = summarize(res)
                data["timing"][fw][mode][case.name] = {"grads": list(case.grads), "contenders": res, "ratios": ratios}
                log(f"  {fw:9s} {mode:9s} {case.name:20s} "
                    + "  ".join(f"{k} {v.get('median_ms', float('nan')):.1f} ({v.get('minflt_per_call', 0):.0f} flt)"
                                for k, v in res.items())
                    + "  | " + "  ".join(f"{k} {v:.2f}" for k, v in ratios.items() if "/" in k)
                    + f"  ({time.perf_counter() - t0:.0f} s)")

    if not a.no_profile:
        from .cases import BY_NAME
        from .profile import profile

        todo = []
        for fw, b in backends.items():
            eager = data["timing"][fw].get("eager", {})
            rated = {c: r["ratios"]["gen/builtin"] for c, r in eager.items() if "gen/builtin" in r["ratios"]}
            if rated:
                worst = max(rated, key=rated.get)
                why = f"worst eager generated/built-in, {rated[worst]:.2f}"
                todo += [(b, worst, "generated", why), (b, worst, "builtin", why)]
            if "focal" in eager and "gen/handwritten" in eager["focal"]["ratios"]:
                why = f"focal target, eager generated/hand-written {eager['focal']['ratios']['gen/handwritten']:.2f}"
                todo += [(b, "focal", "generated", why), (b, "focal", "handwritten", why)]
        for b, name, kind, why in todo:
            log(f"profile {b.name} {name} {kind}")
            try:
                res = profile(b, BY_NAME[name], kind, scale)
            except Exception as e:
                res = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
            data["profiles"].append({"framework": b.name, "case": name, "kind": kind, "why": why, "result": res})

    from .report import confirm_targets, evaluate_targets, write_json, write_markdown

    data["targets"] = evaluate_targets(data)
    data["meta"]["machine"]["loadavg_end"] = _loadavg()
    data["confirmation"] = confirm_targets(data, other)
    data["meta"]["wall_s"] = time.perf_counter() - t_start
    analysis = NOTES.read_text() if NOTES.exists() and not a.quick and not a.cases else ""
    write_json(data, out / "benchmarks.json")
    write_markdown(data, out / "benchmarks.md", analysis)
    log(f"wrote {out / 'benchmarks.json'} and {out / 'benchmarks.md'} in {data['meta']['wall_s']:.0f} s")
    for t in data["targets"]:
        log(f"  {'met    ' if t['met'] else 'NOT MET'}  {t['target']}: {t['figure']}")
    c = data["confirmation"]
    log(f"  confirmed: {c['confirmed']} of {c['met']} met targets" + ("" if c["other"] else " (no --confirm-with run)"))


if __name__ == "__main__":
    main()
