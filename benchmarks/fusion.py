"""The frameworks' own fusion on CPU: generated code against built-ins under each setting.

``python -m benchmarks.fusion [--cases huber,smooth_l1,...] [--reps 5] [--json OUT]``
(``LOSSCC_FUSION_SCALE=quick`` for a smoke run on small inputs)

Each (framework, setting) runs in a fresh subprocess (Paddle reads ``FLAGS_*`` at
import), on the full-size inputs of :mod:`benchmarks.cases`; per contender: 2 warm-up
calls (the first compiles), then ``reps`` alternating rounds of one forward+backward,
median ms and CPU ms per call.  Settings:

* MindSpore ``ms.jit(value_and_grad(f), jit_level=L)`` for L in O0 (the default) and O1
  (graph-kernel fusion); 2.10 refuses O2.
* Paddle ``paddle.jit.to_static(f)`` by default; with a ``BuildStrategy`` asking for every
  fusion it has (``enable_auto_fusion``, ``fuse_elewise_add_act_ops``,
  ``fuse_broadcast_ops``, ``enable_inplace``); with ``FLAGS_use_mkldnn=1`` (oneDNN
  kernels); and with ``backend="CINN"`` (the wheel's CINN, where compiled in).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

CASES = ("huber", "smooth_l1", "mse", "cross_entropy", "focal", "bce_with_logits")

SCALE = os.environ.get("LOSSCC_FUSION_SCALE", "full")  # "quick": a smoke run

SETTINGS = {
    "mindspore": {"O0": {}, "O1": {}},  # 2.10's ms.jit refuses O2 ("must be in ['O0', 'O1']")
    "paddle": {"default": {}, "build_strategy": {}, "onednn": {"FLAGS_use_mkldnn": "1"}, "cinn": {}},
}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _time(run, reps: int) -> dict:
    first = time.perf_counter()
    run()
    first = time.perf_counter() - first
    run()
    wall, cpu = [], []
    for _ in range(reps):
        c, t = _cpu(), time.perf_counter()
        run()
        wall.append(time.perf_counter() - t)
        cpu.append(_cpu() - c)
    return {"first_ms": first * 1e3, "ms": statistics.median(wall) * 1e3, "cpu_ms": statistics.median(cpu) * 1e3}


def _steps_mindspore(case, fns, setting):
    import mindspore as ms
    from mindspore.common.api import _pynative_executor

    from . import ms_impl

    tensors = [ms_impl.to_tensor(a) for a in case.make_inputs(SCALE)]
    out = {}
    for kind, fn in fns.items():
        vg = ms.jit(ms.value_and_grad(fn, grad_position=tuple(case.grads)), jit_level=setting)

        def run(vg=vg):
            loss, _ = vg(*tensors)
            _pynative_executor.sync()
            return loss

        out[kind] = run
    return out


def _steps_paddle(case, fns, setting):
    import paddle

    from . import pd_impl

    tensors = [pd_impl.to_tensor(a, i in case.grads) for i, a in enumerate(case.make_inputs(SCALE))]
    diff = [tensors[i] for i in case.grads]
    out = {}
    for kind, fn in fns.items():
        if setting == "build_strategy":
            bs = paddle.static.BuildStrategy()
            bs.enable_auto_fusion = bs.fuse_elewise_add_act_ops = bs.fuse_broadcast_ops = True
            bs.enable_inplace = True
            f = paddle.jit.to_static(fn, build_strategy=bs)
        elif setting == "cinn":
            f = paddle.jit.to_static(fn, backend="CINN")
        else:
            f = paddle.jit.to_static(fn)

        def run(f=f):
            loss = f(*tensors)
            paddle.grad([loss], diff)
            return loss

        out[kind] = run
    return out


def child(framework: str, setting: str, cases: list[str], reps: int) -> list[dict]:
    from .cases import CASES as ALL
    from .timing import PREFIX

    impl = __import__(f"benchmarks.{'ms' if framework == 'mindspore' else 'pd'}_impl", fromlist=["x"])
    rows = []
    for name in cases:
        case = next(c for c in ALL if c.name == name)
        fns = {k: getattr(impl, f"{PREFIX[k]}_{name}") for k in ("generated", "builtin")
               if hasattr(impl, f"{PREFIX[k]}_{name}")}
        if "builtin" not in fns:
            continue
        make = _steps_mindspore if framework == "mindspore" else _steps_paddle
        try:
            steps = make(case, fns, setting)
            for kind, run in steps.items():
                rows.append({"framework": framework, "setting": setting, "case": name, "kind": kind,
                             **_time(run, reps)})
        except Exception as exc:  # noqa: BLE001 - a setting the wheel does not support is a finding
            rows.append({"framework": framework, "setting": setting, "case": name, "kind": "error",
                         "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fusion")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", nargs=2, metavar=("FRAMEWORK", "SETTING"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    cases = args.cases.split(",")
    if args.child:
        print("ROWS " + json.dumps(child(*args.child, cases, args.reps)))
        return 0
    rows = []
    for fw, settings in SETTINGS.items():
        for setting, env in settings.items():
            proc = subprocess.run([sys.executable, "-m", "benchmarks.fusion", "--child", fw, setting,
                                   "--cases", args.cases, "--reps", str(args.reps)],
                                  env={**os.environ, "GLOG_minloglevel": "2", **env},
                                  capture_output=True, text=True, timeout=1800)
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("ROWS ")), None)
            if line is None:
                rows.append({"framework": fw, "setting": setting, "kind": "error",
                             "error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]})
                continue
            rows += json.loads(line[5:])
            print(f"{fw} {setting}: done", file=sys.stderr)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"load_start_end": os.getloadavg(), "rows": rows}, f, indent=1)
    print("| framework | setting | loss | generated ms (CPU ms) | built-in ms (CPU ms) | gen/built-in |")
    print("|---|---|---|---|---|---|")
    by = {}
    for r in rows:
        by.setdefault((r["framework"], r["setting"], r.get("case")), {})[r["kind"]] = r
    for (fw, setting, case), kinds in by.items():
        if "error" in kinds:
            print(f"| {fw} | {setting} | {case or '–'} | {kinds['error']['error']} | | |")
            continue
        g, b = kinds.get("generated"), kinds.get("builtin")
        if g and b:
            print(f"| {fw} | {setting} | {case} | {g['ms']:.0f} ({g['cpu_ms']:.0f}) | {b['ms']:.0f} ({b['cpu_ms']:.0f}) "
                  f"| {g['ms'] / b['ms']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
