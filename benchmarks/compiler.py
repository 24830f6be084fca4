"""Wall time of the compiler itself, each run a cold process (interpreter start included),
and its CPU time (user + system of the child), which a loaded machine does not inflate."""

from __future__ import annotations

import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _losscc() -> str:
    exe = ROOT / ".venv" / "bin" / "losscc"
    return str(exe) if exe.exists() else "losscc"


def time_commands(runs: int = 5, log=print) -> dict:
    exe = _losscc()
    out = {"executable": exe, "runs": runs, "specs": len(list((ROOT / "specs").glob("*.yaml")))}
    with tempfile.TemporaryDirectory(prefix="losscc-bench-") as tmp:
        commands = {
            "generate": [exe, "generate", "-o", str(Path(tmp) / "out")],
            "check": [exe, "check"],
        }
        samples = {k: [] for k in commands}
        cpu = {k: [] for k in commands}
        rcs = {k: set() for k in commands}
        for r in range(runs):  # alternate the two commands
            for name, cmd in commands.items():
                c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
                samples[name].append(time.perf_counter() - t0)
                c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[name].append(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime)
                rcs[name].add(p.returncode)
                if p.returncode:
                    out.setdefault("stderr", {})[name] = (p.stderr or p.stdout)[-500:]
        for name, cmd in commands.items():
            s = samples[name]
            out[name] = {"command": " ".join(["losscc"] + cmd[1:2] + (["-o", "<tmpdir>"] if name == "generate" else [])),
                         "median_s": statistics.median(s), "min_s": min(s), "max_s": max(s),
                         "samples_s": [round(v, 3) for v in s], "returncodes": sorted(rcs[name]),
                         "cpu_median_s": statistics.median(cpu[name]), "cpu_samples_s": [round(v, 3) for v in cpu[name]]}
            log(f"  compiler {name}: median {statistics.median(s):.2f} s (CPU {statistics.median(cpu[name]):.2f} s)  "
                f"{out[name]['samples_s']}  rc {sorted(rcs[name])}")
    return out
