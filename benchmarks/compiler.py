"""Wall time of the compiler itself, each run a cold process (interpreter start included)."""

from __future__ import annotations

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
        rcs = {k: set() for k in commands}
        for r in range(runs):  # alternate the two commands
            for name, cmd in commands.items():
                t0 = time.perf_counter()
                p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
                samples[name].append(time.perf_counter() - t0)
                rcs[name].add(p.returncode)
                if p.returncode:
                    out.setdefault("stderr", {})[name] = (p.stderr or p.stdout)[-500:]
        for name, cmd in commands.items():
            s = samples[name]
            out[name] = {"command": " ".join(["losscc"] + cmd[1:2] + (["-o", "<tmpdir>"] if name == "generate" else [])),
                         "median_s": statistics.median(s), "min_s": min(s), "max_s": max(s),
                         "samples_s": [round(v, 3) for v in s], "returncodes": sorted(rcs[name])}
            log(f"  compiler {name}: median {statistics.median(s):.2f} s  {out[name]['samples_s']}  rc {sorted(rcs[name])}")
    return out
