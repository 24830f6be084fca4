"""Short op-level profiles (eager mode): which framework kernels a contender spends its time in.

MindSpore: ``mindspore.profiler.profile(activities=[CPU])``, read back from the
``FRAMEWORK/cpu_op_type_info_0.csv`` it writes (per op type, summed over the steps).
Paddle: ``paddle.profiler.Profiler(targets=[CPU])``, parsed from its operator summary
(forward ops are "<op> dygraph", backward ones "Global_<Op>GradNode").
Times are per forward+backward step.  Profiling adds overhead of its own, so only the
shares matter.
"""

from __future__ import annotations

import contextlib
import csv
import glob
import io
import re
import tempfile


def profile_mindspore(backend, case, kind, scale, steps=2):
    import mindspore as ms
    from mindspore.profiler import ProfilerActivity

    fn = backend.contenders(case)[kind]
    tensors = backend.tensors(case.make_inputs(scale), case.grads)
    run = backend.step(fn, tensors, case.grads, "eager")
    run()
    with tempfile.TemporaryDirectory(prefix="losscc-msprof-") as tmp:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            with ms.profiler.profile(activities=[ProfilerActivity.CPU],
                                     on_trace_ready=ms.profiler.tensorboard_trace_handler(tmp)) as prof:
                for _ in range(steps):
                    run()
                    prof.step()
        files = glob.glob(f"{tmp}/**/cpu_op_type_info_0.csv", recursive=True)
        if not files:
            return {"error": "no cpu_op_type_info_0.csv written"}
        rows = []
        with open(files[0]) as f:
            for r in csv.DictReader(f):
                rows.append({"op": r["op_type"], "calls_per_step": int(r["type_occurrences"]) / steps,
                             "ms_per_step": float(r["total_compute_time"]) / steps})
    return _finish(rows)


_PD_ROW = re.compile(r"^(\S.*?)\s{2,}(\d+)\s+([\d.]+) / ")


def profile_paddle(backend, case, kind, scale, steps=2):
    import paddle.profiler as profiler

    fn = backend.contenders(case)[kind]
    tensors = backend.tensors(case.make_inputs(scale), case.grads)
    run = backend.step(fn, tensors, case.grads, "eager")
    run()
    p = profiler.Profiler(targets=[profiler.ProfilerTarget.CPU])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        p.start()
        for _ in range(steps):
            run()
            p.step()
        p.stop()
        buf.truncate(0)
        p.summary(sorted_by=profiler.SortedKeys.CPUTotal, op_detail=False, thread_sep=False, time_unit="ms",
                  views=[profiler.SummaryView.OperatorView])
    rows = []
    for line in buf.getvalue().splitlines():
        m = _PD_ROW.match(line)
        if m:
            rows.append({"op": m.group(1).strip(), "calls_per_step": int(m.group(2)) / steps,
                         "ms_per_step": float(m.group(3)) / steps})
    return _finish(rows)


def _finish(rows, top=8):
    rows = [r for r in rows if r["ms_per_step"] > 0]
    total = sum(r["ms_per_step"] for r in rows)
    rows.sort(key=lambda r: -r["ms_per_step"])
    for r in rows:
        r["share"] = r["ms_per_step"] / total if total else 0.0
        r["ms_per_step"] = round(r["ms_per_step"], 2)
        r["share"] = round(r["share"], 3)
    return {"total_ms_per_step": round(total, 1), "top": rows[:top]}


def profile(backend, case, kind, scale):
    if backend.name == "mindspore":
        return profile_mindspore(backend, case, kind, scale)
    return profile_paddle(backend, case, kind, scale)
