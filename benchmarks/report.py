"""Targets, docs/benchmarks.json and docs/benchmarks.md."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from .cases import BY_NAME
from .plot import ratio_lines

MODE_LABEL = {("mindspore", "eager"): "MindSpore eager (PyNative)", ("mindspore", "jit"): "MindSpore ms.jit",
              ("paddle", "eager"): "Paddle eager", ("paddle", "to_static"): "Paddle paddle.jit.to_static"}
COMPILED = {"jit", "to_static"}
ELEMENTWISE = [c.name for c in BY_NAME.values() if c.elementwise]
APPROX = {("mindspore", "focal"), ("mindspore", "softmax_focal")}  # nn.FocalLoss: no alpha, labels (N,1)


def _fmt(v, nd=1):
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def _ratio(v):
    return "–" if v is None else f"{v:.2f}"


# the targets: median generated/built-in, the worst loss, focal against hand-written,
# elementwise losses against the floor, peak memory against the built-in
MEDIAN, WORST, FOCAL, FLOOR, MEMORY = 0.9, 1.5, 0.6, 3.0, 1.5


def evaluate_targets(data: dict) -> list:
    targets = []
    timing = data["timing"]
    for fw, modes in timing.items():
        for mode, cases in modes.items():
            label = MODE_LABEL[(fw, mode)]
            ratios = {c: r["ratios"]["gen/builtin"] for c, r in cases.items() if "gen/builtin" in r["ratios"]}
            if ratios:
                med = statistics.median(ratios.values())
                worst = max(ratios, key=ratios.get)
                over = sorted((c for c, v in ratios.items() if v > WORST), key=lambda c: -ratios[c])
                targets.append(dict(
                    id=f"builtin-median/{fw}/{mode}", target=f"{label}: median generated/built-in <= {MEDIAN}",
                    value=med, threshold=MEDIAN, met=med <= MEDIAN,
                    figure=f"median {med:.2f} over {len(ratios)} losses"))
                targets.append(dict(
                    id=f"builtin-max/{fw}/{mode}", target=f"{label}: no loss above {WORST}x its built-in",
                    value=ratios[worst], threshold=WORST, met=not over,
                    figure=(f"worst {worst} {ratios[worst]:.2f}; above {WORST}: "
                            + (", ".join(f"{c} {ratios[c]:.2f}" for c in over) if over else "none"))))
            focal = cases.get("focal", {}).get("ratios", {}).get("gen/handwritten")
            if focal is not None:
                targets.append(dict(
                    id=f"focal-hand/{fw}/{mode}", target=f"{label}: focal generated/hand-written <= {FOCAL}",
                    value=focal, threshold=FOCAL, met=focal <= FOCAL, figure=f"{focal:.2f}"))
            fl = {c: cases[c]["ratios"]["gen/floor"] for c in ELEMENTWISE
                  if c in cases and "gen/floor" in cases[c]["ratios"]}
            if fl:
                worst = max(fl, key=fl.get)
                targets.append(dict(
                    id=f"floor/{fw}/{mode}",
                    target=f"{label}: elementwise losses within {FLOOR:g}x of the (x - y).sum() floor",
                    value=fl[worst], threshold=FLOOR, met=fl[worst] <= FLOOR,
                    figure=", ".join(f"{c} {v:.1f}x" for c, v in fl.items())))
    for fw, cases in data.get("memory", {}).items():
        mem = {c: m["generated"]["peak_rss_delta_mb"] / max(m["builtin"]["peak_rss_delta_mb"], 1.0)
               for c, m in cases.items() if "generated" in m and "builtin" in m
               and m["generated"].get("peak_rss_delta_mb") is not None
               and m["builtin"].get("peak_rss_delta_mb") is not None}
        if mem:
            worst = max(mem, key=mem.get)
            over = sorted((c for c, v in mem.items() if v > MEMORY), key=lambda c: -mem[c])
            targets.append(dict(
                id=f"memory/{fw}", target=f"{fw}: peak memory of forward+backward <= {MEMORY}x the built-in's, every loss",
                value=mem[worst], threshold=MEMORY, met=not over,
                figure=(f"worst {worst} {mem[worst]:.2f}; above {MEMORY}: "
                        + (", ".join(f"{c} {mem[c]:.2f}" for c in over) if over else "none"))))
    comp = data.get("compiler", {})
    if "check" in comp:
        v = comp["check"]["median_s"]
        targets.append(dict(id="compiler/check", target="`losscc check` over specs/ < 3 s (cold process)",
                            value=v, threshold=3.0, met=v < 3.0 and comp["check"]["returncodes"] == [0],
                            figure=f"median {v:.2f} s" + (f", CPU {comp['check']['cpu_median_s']:.2f} s"
                                                           if "cpu_median_s" in comp["check"] else "")
                            + f" (rc {comp['check']['returncodes']})"))
    return targets


TOLERANCE = 0.15


def _day(meta: dict) -> str:
    return meta.get("date", "")[:10]


def _machine_id(meta: dict) -> tuple:
    m = meta.get("machine", {})
    return m.get("host"), m.get("cpu_model"), m.get("platform")


def confirm_targets(data: dict, other: dict | None, tol: float = TOLERANCE) -> dict:
    """Which met targets a second run confirms: met there too, figures within `tol` of each other,
    the same input sizes, and the two runs on different days or machines (host, CPU model or kernel)."""
    rows, met, confirmed = {}, 0, 0
    distinct = other is not None and (_day(data["meta"]) != _day(other["meta"])
                                      or _machine_id(data["meta"]) != _machine_id(other["meta"]))
    same_sizes = other is not None and (_g(data["meta"], "settings", "sizes")
                                        == _g(other["meta"], "settings", "sizes"))
    theirs = {t["id"]: t for t in (other or {}).get("targets", [])}
    for t in data["targets"]:
        o = theirs.get(t["id"])
        agree = (o is not None and bool(t["value"]) and bool(o["value"])
                 and abs(t["value"] / o["value"] - 1) <= tol)
        if not t["met"]:
            status = "not met"
        elif o is not None and o["met"] and agree and distinct and same_sizes:
            status = "confirmed"
        else:
            status = "unconfirmed"
        met += t["met"]
        confirmed += status == "confirmed"
        rows[t["id"]] = {"status": status, "other_value": None if o is None else o["value"],
                         "other_met": None if o is None else o["met"], "agree": agree}
    desc = None
    if other is not None:
        om = other["meta"]
        desc = {"date": om.get("date"), "cpu_model": om.get("machine", {}).get("cpu_model"),
                "host": om.get("machine", {}).get("host"), "command": om.get("command"),
                "distinct_day_or_machine": distinct, "same_sizes": same_sizes}
    return {"tolerance": tol, "other": desc, "met": met, "confirmed": confirmed, "rows": rows}


def _agreement(data: dict) -> str:
    diffs, off = [], []
    for fw, modes in data["timing"].items():
        for mode, cases in modes.items():
            for name, r in cases.items():
                d = r["ratios"].get("value_rel_diff_vs_builtin")
                if d is None or (fw, name) in APPROX:
                    continue
                diffs.append(d)
                if d > 1e-4:
                    off.append(f"{fw} {mode} {name} {d:.1e}")
    worst = f"{max(diffs):.1e}" if diffs else "–"
    return ("- Loss values of generated and built-in (first call, same inputs) differ by at most "
            f"{worst} relative" + (f"; above 1e-4: {', '.join(off)}" if off else "")
            + " (`value_rel_diff_vs_builtin` in the JSON), except MindSpore's `nn.FocalLoss` (marked ≈), which "
            "has no alpha (its value is 4x the generated one with alpha = 0.25) — same work otherwise, so it "
            "is counted.")


def write_json(data: dict, path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")


def _timing_table(fw, mode, cases, memory):
    lines = [f"### {MODE_LABEL[(fw, mode)]}", ""]
    mem_col = mode == "eager"
    head = ["loss", "generated", "built-in", "hand-written", "floor", "gen/built-in", "gen/hand", "gen/floor",
            "built-in/floor", "reps", "1st call gen / bi", "faults/call gen / bi / floor"]
    if mem_col:
        head.append("peak RSS MB gen / bi")
    if fw == "paddle":
        head.append("alloc peak MB gen / bi")
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in cases.items():
        c = r["contenders"]

        def ms(kind, key="median_ms"):
            v = c.get(kind, {}).get(key)
            if v is None and "error" in c.get(kind, {}):
                return "error"
            return _fmt(v)

        ratios = r["ratios"]
        bi_floor = None
        if c.get("builtin", {}).get("median_ms") and c.get("floor", {}).get("median_ms"):
            bi_floor = c["builtin"]["median_ms"] / c["floor"]["median_ms"]
        loss = name + (" ≈" if (fw, name) in APPROX else "")
        row = [loss, ms("generated"), ms("builtin"), ms("handwritten"), ms("floor"),
               _ratio(ratios.get("gen/builtin")), _ratio(ratios.get("gen/handwritten")),
               _ratio(ratios.get("gen/floor")), _ratio(bi_floor),
               str(c.get("generated", {}).get("reps", "–")),
               f"{ms('generated', 'first_ms')} / {ms('builtin', 'first_ms')}",
               " / ".join(_fmt(c.get(k, {}).get("minflt_per_call"), 0) for k in ("generated", "builtin", "floor"))]
        if mem_col:
            m = memory.get(fw, {}).get(name, {})
            row.append(f"{_fmt(m.get('generated', {}).get('peak_rss_delta_mb'), 0)} / "
                       f"{_fmt(m.get('builtin', {}).get('peak_rss_delta_mb'), 0)}")
        if fw == "paddle":
            row.append(f"{_fmt(c.get('generated', {}).get('alloc_peak_mb'), 0)} / "
                       f"{_fmt(c.get('builtin', {}).get('alloc_peak_mb'), 0)}")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    return lines


def _g(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _fingerprint_lines(data: dict) -> list:
    fp = data["meta"].get("fingerprint")
    L = ["## Machine fingerprint", ""]
    if not fp:
        return L + ["Not recorded: this run predates the fingerprint (or ran with `--no-fingerprint`). Its "
                    "figures are **one run on one machine**; page faults per call, copy bandwidth and the malloc "
                    "settings it ran under are unknown, and those decide Paddle's elementwise ratios "
                    "(benchmarks/notes.md).", ""]
    cpu = fp.get("cpu", {})
    np_copy = fp.get("numpy_copy", {})
    L += ["Measured in a fresh subprocess per framework, before the timing (`python -m benchmarks.fingerprint`); "
          "copy figures are bytes copied per second, best of 7, 16 MiB float32.", "",
          "| fact | value |", "|---|---|",
          f"| CPU | {cpu.get('model')}, {fp.get('nproc')} usable of {cpu.get('logical_cpus')} logical; flags: "
          f"{' '.join(cpu.get('flags', [])) or '–'} |",
          f"| transparent huge pages | enabled {fp.get('thp_enabled')}, defrag {fp.get('thp_defrag')}; page "
          f"{fp.get('page_size')} B; {fp.get('glibc')} |",
          f"| malloc environment | {_kv(fp.get('malloc_env'))} |",
          f"| thread environment | {_kv(fp.get('thread_env'))} |",
          f"| Paddle flags from environment | {_kv(fp.get('paddle_flags_env'))} |",
          f"| NumPy copy | preallocated {_fmt(np_copy.get('prealloc_gbs'))} GB/s, fresh array "
          f"{_fmt(np_copy.get('fresh_gbs'))} GB/s ({_fmt(np_copy.get('fresh_minflt_per_copy'), 0)} faults/copy) |"]
    for fw in ("mindspore", "paddle"):
        f = fp.get(fw)
        if f is None:
            continue
        if "error" in f:
            L.append(f"| {fw} | error: {f['error'][-150:]} |")
            continue
        L += [f"| {fw} copy (fresh tensor) | {_fmt(_g(f, 'copy', 'fresh_gbs'))} GB/s, "
              f"{_fmt(_g(f, 'copy', 'minflt_per_copy'), 0)} faults/copy |",
              f"| {fw} floor `(x - y).sum()` fwd+bwd | {_fmt(_g(f, 'floor', 'median_ms'))} ms, "
              f"{_fmt(_g(f, 'floor', 'minflt_per_call'), 0)} minor faults/call "
              f"({_g(f, 'floor', 'pages_per_16mb_tensor')} pages per 16 MiB tensor) |",
              f"| {fw} threads | {_kv(f.get('threads'))} |"]
    m = data["meta"]["machine"]
    L += [f"| load average | {m.get('loadavg_start')} at the start, {m.get('loadavg_end')} at the end |", ""]
    return L


def _kv(d) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in d.items()) if d else "none set"


def _confirmation_lines(data: dict) -> list:
    c = data.get("confirmation") or {}
    o = c.get("other")
    L = ["## Reproducibility", "",
         f"A target counts as **met** only when two runs on different days or machines both meet it and their "
         f"figures agree within {100 * c.get('tolerance', TOLERANCE):.0f}% (`python -m benchmarks --confirm-with "
         "OTHER.json`); met in a single run is **unconfirmed**. Wall-clock ratios on these 2-core machines moved "
         "by 2.5x between two machines of the same kind (benchmarks/notes.md), so one run is not evidence. "
         "Every ratio is given together with the floor ratios of the same run (gen/floor, built-in/floor): a "
         "built-in/floor that differs between runs means the machines differ, not the code.", ""]
    if o is None:
        L += [f"This run was not compared with another: its {c.get('met', 0)} met targets are one run on one "
              "machine, unconfirmed.", ""]
    else:
        L += [f"Compared with the run of {o['date']} on {o['cpu_model']} (`{o['command']}`; different day or "
              f"machine: {'yes' if o['distinct_day_or_machine'] else '**no**'}; same sizes: "
              f"{'yes' if o.get('same_sizes') else '**no**'}): {c['confirmed']} of "
              f"{c['met']} met targets confirmed.", ""]
    return L


def write_markdown(data: dict, path: Path, analysis: str = ""):
    meta = data["meta"]
    m = meta["machine"]
    v = meta["versions"]
    s = meta["settings"]
    L = ["# Benchmarks: generated losses vs the frameworks' built-ins", "",
         f"Generated by `{meta['command']}` on {meta['date']} (wall time {meta['wall_s']:.0f} s); "
         "every figure below comes from that one run. Raw data, with every sample: "
         "[benchmarks.json](benchmarks.json). Rerun: `.venv/bin/python -m benchmarks` from the repository root "
         "(`--quick` for a smoke run that writes to /tmp).", "",
         "## Machine and versions", "",
         f"- CPU: {m['cpu_model']}, {m['nproc']} cores usable (`nproc`), {m['mem_total_gib']:.1f} GiB RAM; "
         f"load average {m['loadavg_start']} at the start, {m['loadavg_end']} at the end — **the machine was shared "
         "with other work during the run, so absolute times are noisy; compare ratios within one table "
         "(contenders alternate within each round), not across runs.**",
         f"- Python {v['python']}, NumPy {v['numpy']}, MindSpore {v['mindspore']}, PaddlePaddle {v['paddle']} "
         f"(CINN compiled in: {v.get('paddle_cinn')}), losscc {v['losscc']} at commit {v['git_commit']}"
         f"{' (working tree dirty)' if v.get('git_dirty') else ''}.",
         f"- Sizes: regression {s['sizes']['reg']} float32, classification logits {s['sizes']['cls']} float32. "
         f"Each group: {s['warmup']} warm-up calls per contender (the first includes compilation; shown as "
         f"\"1st call\"), then {s['min_reps']}–{s['reps']} alternating rounds (fewer for slow groups, "
         f"~{s['budget_s']:.0f} s per group); medians in ms of one forward+backward.", ""]
    L += ["## What is measured", "",
          "- **forward+backward**: MindSpore `ms.value_and_grad(f, grad_position=…)` (eager) and "
          "`ms.jit(ms.value_and_grad(…))` (jit), followed by `_pynative_executor.sync()` "
          "(`ms.runtime.synchronize()` is a no-op on CPU); Paddle `loss = f(*x); paddle.grad([loss], inputs)` with "
          "`f` either plain or `paddle.jit.to_static(f)` (default SOT/AST, backward outside the static function).",
          "- Gradients: w.r.t. every float prediction, and the regression targets of huber, smooth_l1, mse, l1, "
          "gaussian_nll, poisson_nll; labels are never differentiated (Paddle's built-in BCE, BCE-with-logits and "
          "KL-div have no gradient for their label/target, MindSpore's `ops.kl_div` returns zeros), nor is "
          "gaussian_nll's variance (Paddle's `F.gaussian_nll_loss` clamps it under `paddle.no_grad()`, so it gets "
          "no gradient — unlike PyTorch, MindSpore and the generated code).",
          "- Contenders: **generated** = `generated/<backend>/<loss>.py` function with its defaults "
          "(reduction 'mean'; sigmoid_focal 'sum'); **built-in** as listed below; **hand-written** = what people "
          "write (Huber: `abs`, `<`, `where`; focal: `softmax`, `gather_elements`/`take_along_axis`, "
          "`log(p + 1e-8)`); **floor** = `(x - y).sum()` forward+backward over the same two inputs, a "
          "memory-bandwidth yardstick for the elementwise losses.",
          _agreement(data),
          "- **Faults and CPU time**: each timed call is bracketed by `getrusage`; the JSON holds the median minor "
          "page faults (`minflt_per_call`), CPU ms (`cpu_ms`, user + system, all threads) and system ms (`sys_ms`) "
          "per call of every contender, the tables the faults. A Paddle 16 MiB tensor that glibc has unmapped "
          "faults 4097 pages when it is next allocated; whether it is depends on the process's history and the "
          "malloc environment (see the fingerprint and benchmarks/notes.md), so compare runs with equal fault "
          "counts only.",
          "- **Peak memory**: *peak RSS* = growth of the resident set (VmHWM − VmRSS before, after resetting "
          "the high-water mark through `/proc/self/clear_refs`) during one cold eager forward+backward, in a "
          "child forked per contender from a process that has imported only that framework (both frameworks "
          "pool freed CPU memory, so a long-lived process shows 0 MB for repeated calls; glibc's mmap threshold "
          "is fixed at 64 KiB). It includes pool granularity and first-call set-up, excludes the inputs. "
          "*alloc peak* (Paddle only) = `core.host_memory_stat_peak_value('Allocated')` above the bytes held "
          "before one warm call, exact for tensors Paddle's allocator hands out, in both modes. MindSpore 2.10 "
          "has no CPU allocator statistics (`ms.runtime.max_memory_allocated` says \"CPU device is not "
          "supported\"); tracemalloc would not see C++ allocations at all.", ""]
    L += _fingerprint_lines(data)
    rows = (data.get("confirmation") or {}).get("rows", {})
    L += ["## Targets", "", "| target | figure | other run | verdict |", "|---|---|---|---|"]
    for t in data["targets"]:
        r = rows.get(t["id"], {})
        ov = r.get("other_value")
        verdict = {"confirmed": "met (confirmed)", "unconfirmed": "met in this run only (unconfirmed)",
                   "not met": "**not met**"}.get(r.get("status"), "met" if t["met"] else "**not met**")
        L.append(f"| {t['target']} | {t['figure']} | {'–' if ov is None else f'{ov:.2f}'} | {verdict} |")
    L.append("")
    L += ratio_lines(data, path.parent, MEDIAN, WORST)
    L += _confirmation_lines(data)
    if analysis:
        L += [analysis, ""]
    L += ["## Forward+backward times (ms, medians)", "",
          "Ratios are generated / other (below 1 = generated faster).", ""]
    for fw, modes in data["timing"].items():
        for mode, cases in modes.items():
            L += _timing_table(fw, mode, cases, data.get("memory", {}))
    L += ["Built-ins and notes:", ""]
    for name, c in BY_NAME.items():
        bits = [f"{fw}: `{d}`" for fw, d in c.builtin.items()]
        if c.note:
            bits.append(c.note)
        if bits:
            L.append(f"- {name}: " + "; ".join(bits))
    skipped = data.get("not_benchmarked", [])
    if skipped:
        L.append("Not benchmarked (nothing to compare with): " + "; ".join(skipped) + ".")
    L.append("")
    mem = data.get("memory", {})
    if mem:
        L += ["## Peak memory of one eager forward+backward (peak RSS growth, MB)", "",
              "| framework | loss | generated | built-in | hand-written | floor |", "|---|---|---|---|---|---|"]
        for fw, cases in mem.items():
            if "error" in cases:
                L.append(f"| {fw} | error: {cases['error']} | | | | |")
                continue
            for name, kinds in cases.items():
                cells = []
                for k in ("generated", "builtin", "handwritten", "floor"):
                    r = kinds.get(k)
                    cells.append("–" if r is None else ("error" if "error" in r else _fmt(r["peak_rss_delta_mb"], 0)))
                L.append(f"| {fw} | {name} | " + " | ".join(cells) + " |")
        L.append("")
    if data.get("profiles"):
        L += ["## Profiles (eager, one forward+backward; framework profilers)", ""]
        for p in data["profiles"]:
            res = p["result"]
            if "error" in res:
                L += [f"- {p['framework']} {p['case']} {p['kind']}: {res['error']}", ""]
                continue
            ops = ", ".join(f"{r['op']} ×{r['calls_per_step']:g} {r['ms_per_step']:.1f} ms ({100 * r['share']:.0f}%)"
                            for r in res["top"])
            L += [f"- **{p['framework']} {p['case']} {p['kind']}** ({p['why']}): {res['total_ms_per_step']:.0f} ms "
                  f"of kernels per step — {ops}"]
        L.append("")
    comp = data.get("compiler", {})
    if comp:
        L += ["## Compiler wall time (cold process, interpreter start included)", "",
              f"{comp['runs']} alternating runs each over the {comp['specs']} specs in specs/.", "",
              "| command | median s | min | max | CPU s (median, user + system) | exit codes |",
              "|---|---|---|---|---|---|"]
        for k in ("generate", "check"):
            if k in comp:
                c = comp[k]
                cpu = f"{c['cpu_median_s']:.2f}" if "cpu_median_s" in c else "–"
                L.append(f"| `{c['command']}` | {c['median_s']:.2f} | {c['min_s']:.2f} | {c['max_s']:.2f} | {cpu} | "
                         f"{c['returncodes']} |")
        L.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(L) + "\n")
