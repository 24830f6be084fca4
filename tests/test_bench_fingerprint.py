"""The benchmark harness's pure helpers: fingerprint parsers, floor ratios, target confirmation."""

from benchmarks.fingerprint import (
    gbs,
    malloc_env,
    parse_cpuinfo,
    parse_stat_faults,
    parse_thp,
    thread_env,
)
from benchmarks.report import confirm_targets
from benchmarks.timing import summarize

CPUINFO = """processor\t: 0
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse4_2 avx avx2 fma hypervisor
processor\t: 1
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse4_2 avx avx2 fma hypervisor
"""


def test_parse_cpuinfo_model_count_and_known_flags_only():
    info = parse_cpuinfo(CPUINFO)
    assert info["model"] == "AMD EPYC 7B13"
    assert info["logical_cpus"] == 2
    assert info["flags"] == ["sse4_2", "avx", "avx2", "fma", "hypervisor"]  # fpu is not in CPU_FLAGS
    assert "avx512f" not in info["flags"]


def test_parse_cpuinfo_empty():
    assert parse_cpuinfo("") == {"model": "unknown", "logical_cpus": 0, "flags": []}


def test_parse_thp_selected_value():
    assert parse_thp("always [madvise] never\n") == "madvise"
    assert parse_thp("[always] defer defer+madvise madvise never") == "always"
    assert parse_thp("") == "unknown"


def test_parse_stat_faults_with_parentheses_in_the_command_name():
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt ...
    text = "4242 (a) (b c) S 1 4242 4242 0 -1 4194560 12291 7 3 0 55 11 0 0 20 0 1 0"
    assert parse_stat_faults(text) == (12291, 3)


def test_parse_stat_faults_of_this_process():
    with open("/proc/self/stat") as f:
        minflt, majflt = parse_stat_faults(f.read())
    assert minflt > 0 and majflt >= 0


def test_env_pickers_keep_only_their_variables():
    env = {"MALLOC_MMAP_THRESHOLD_": "4294967296", "OMP_NUM_THREADS": "1", "HOME": "/root", "PATH": "/bin"}
    assert malloc_env(env) == {"MALLOC_MMAP_THRESHOLD_": "4294967296"}
    assert thread_env(env) == {"OMP_NUM_THREADS": "1"}


def test_gbs():
    assert gbs(16 * 10**9, 2.0) == 8.0
    assert gbs(1, 0.0) != gbs(1, 0.0)  # nan for a zero duration


def test_summarize_gives_floor_ratios_of_every_contender():
    res = {"generated": {"median_ms": 30.0}, "builtin": {"median_ms": 20.0}, "handwritten": {"median_ms": 60.0},
           "floor": {"median_ms": 10.0}}
    r = summarize(res)
    assert r["gen/builtin"] == 1.5
    assert r["gen/floor"] == 3.0
    assert r["builtin/floor"] == 2.0
    assert r["hand/floor"] == 6.0


def test_summarize_without_floor_has_no_floor_ratios():
    r = summarize({"generated": {"median_ms": 3.0}, "builtin": {"median_ms": 2.0}})
    assert set(r) == {"gen/builtin"}


def _run(date, host, targets):
    return {"meta": {"date": date, "command": "python -m benchmarks", "settings": {"sizes": {"reg": [4096, 1024]}},
                     "machine": {"host": host, "cpu_model": "AMD EPYC", "platform": "Linux"}},
            "targets": [{"id": i, "value": v, "met": m} for i, v, m in targets]}


def test_confirm_needs_both_met_within_tolerance_on_another_day_or_machine():
    this = _run("2026-12-04 10:00 UTC", "a", [("x", 0.90, True), ("y", 0.95, True), ("z", 1.3, False),
                                             ("w", 0.7, True)])
    other = _run("2026-12-03 11:43 UTC", "a", [("x", 0.96, True), ("y", 0.70, True), ("z", 1.3, False),
                                              ("w", 1.1, False)])
    c = confirm_targets(this, other)
    st = {k: v["status"] for k, v in c["rows"].items()}
    assert st == {"x": "confirmed", "y": "unconfirmed", "z": "not met", "w": "unconfirmed"}
    assert (c["met"], c["confirmed"]) == (3, 1)
    assert c["rows"]["y"]["agree"] is False  # 0.95 / 0.70 is 36% apart
    assert c["other"]["distinct_day_or_machine"] is True


def test_confirm_same_day_same_machine_confirms_nothing():
    a = _run("2026-12-04 10:00 UTC", "a", [("x", 0.9, True)])
    b = _run("2026-12-04 12:00 UTC", "a", [("x", 0.9, True)])
    assert confirm_targets(a, b)["rows"]["x"]["status"] == "unconfirmed"
    c = _run("2026-12-04 12:00 UTC", "b", [("x", 0.9, True)])  # same day, another host
    assert confirm_targets(a, c)["rows"]["x"]["status"] == "confirmed"


def test_confirm_without_other_run():
    c = confirm_targets(_run("2026-12-04 10:00 UTC", "a", [("x", 0.9, True)]), None)
    assert c["rows"]["x"]["status"] == "unconfirmed" and c["other"] is None and c["confirmed"] == 0


def test_confirm_needs_the_same_input_sizes():
    a = _run("2026-12-04 10:00 UTC", "a", [("x", 0.9, True)])
    b = _run("2026-12-05 10:00 UTC", "a", [("x", 0.9, True)])
    b["meta"]["settings"]["sizes"] = {"reg": [256, 128]}  # a --quick run
    c = confirm_targets(a, b)
    assert c["rows"]["x"]["status"] == "unconfirmed" and c["other"]["same_sizes"] is False


def test_faults_table_rows_and_ratios():
    from benchmarks.faults import table

    r = {k: {"median_ms": ms, "minflt_per_call": f, "user_ms": ms / 2, "sys_ms": ms / 2}
         for k, ms, f in (("floor", 10.0, 12291), ("generated", 60.0, 61455), ("builtin", 30.0, 20485))}
    out = table({"default": {"eager": {"huber": r}}, "broken": {"error": "boom"}}).splitlines()
    assert len(out) == 4
    row = out[2]
    assert "| default | eager | huber | 10.0 (12291) | 60.0 (61455) | 30.0 (20485) | – | 2.00 | 6.00 | 3.00 |" in row
    assert "5+5, 30+30, 15+15" in row
    assert out[3].startswith("| broken | error:")
