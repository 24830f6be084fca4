"""Red-team round 13: the reference's trigamma of a large negative number (mpmath steps
up to the positive axis one unit at a time: a constant -1e11 - 0.5 hung the compiler's
constant folding, a case input hung verify's reference)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import mpmath
import pytest

from losscc.backends import all_backends
from losscc.emit import compile_spec
from losscc.gamma import mp_trigamma
from tests.codegen_util import spec_of


def _alarm(*_):
    raise TimeoutError


@pytest.fixture
def within():
    old = signal.signal(signal.SIGALRM, _alarm)
    yield lambda s: signal.alarm(s)
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_trigamma_of_a_large_negative_number_is_immediate_and_accurate(within):
    within(10)
    for dps in (15, 60, 400):
        with mpmath.workdps(dps):
            for x in (-1e6 - 0.5, -1e11 - 0.5, -4503599627370495.5):
                start = time.monotonic()
                v = mp_trigamma(mpmath.mpf(x))
                assert time.monotonic() - start < 1
                assert abs(v - mpmath.pi ** 2 / mpmath.sinpi(mpmath.mpf(x)) ** 2) < 1e-5
            for x in (-0.5, -1.5, -2.25, -1e-10, -0.9999999999, -170.3, -1000.5):
                x = mpmath.mpf(x)
                with mpmath.workdps(dps + 30):
                    want = mpmath.polygamma(1, x)
                assert abs(mp_trigamma(x) - want) <= 1e-14 * want


def test_a_constant_trigamma_of_a_large_negative_number_compiles(within):
    spec = spec_of("""
        name: tg_const
        summary: s.
        inputs:
          x: {dtype: float, shape: [N]}
        formula: |
          loss = x * trigamma(-100000000000.5)
    """)
    within(20)
    for b in all_backends():
        assert "def tg_const" in compile_spec(spec, b)


def _many_cases(n: int) -> str:
    cases = "\n".join(f"          - id: c{k}\n            inputs: {{x: [{k}.5, 1.25, -2.0]}}\n"
                      f"            expected: {{sum: 1.0}}" for k in range(n))
    return f"""
        name: many_cases
        summary: s.
        inputs:
          x: {{dtype: float, shape: [N]}}
        formula: |
          loss = exp(sin(x) * cos(x))
        reduction: sum
        cases:
{cases}
    """


def test_the_reference_work_of_all_a_specs_cases_is_bounded(monkeypatch):
    """Each case was held to 'reference_work' (40 s) on its own, but a spec may hold 200 cases
    (and case files more), each evaluated three or four times: hours of verify.  The work adds
    up over the spec's cases and stops at 'reference_spec_work'."""
    from losscc import limits
    from losscc.cases import spec_cases
    from losscc.errors import SpecError
    from losscc.reference import reference_work
    from losscc.verify import verify_spec

    spec = spec_of(_many_cases(40))
    from losscc.parse import build_program
    cases = spec_cases(spec)
    one = reference_work(build_program(spec), cases[0].inputs, {}, 7)
    monkeypatch.setattr(limits, "MAX_REFERENCE_SPEC_WORK", 10 * one, raising=False)
    with pytest.raises(SpecError) as info:
        verify_spec(spec, {}, {}, ("float64",), ("eager",), cases)
    assert limits.MAX_REFERENCE_SPEC_WORK == 10 * one
    (d,) = info.value.diagnostics
    assert d.code == "E181" and "limit 'reference_spec_work'" in d.message
    # the budget is per spec: a few cases pass, and a second spec starts afresh
    for _ in range(2):
        verify_spec(spec, {}, {}, ("float64",), ("eager",), cases[:3])
    # drawn cases, whose number the command line sets, do not count
    from losscc.draws import random_cases
    verify_spec(spec, {}, {}, ("float64",), ("eager",), random_cases(spec, 30, 0))


def test_the_spec_budget_leaves_room_for_the_catalogue():
    from losscc import limits
    assert limits.MAX_REFERENCE_SPEC_WORK >= 10 * limits.MAX_REFERENCE_WORK  # sigmoid_focal: ~2e9 a dtype


def test_a_hyperparameter_exponent_adds_reference_digits():
    """exponential() leaves b ** p for a hyperparameter p out (the digits grow with the
    inputs only), and the inputs of (1 + x) ** p are tiny: at x = 1e-45, p = 1e45 the
    reference gave 1 where the value is e, so verify passed the float's rounding to 1."""
    import numpy as np

    from losscc.parse import build_program
    from losscc.reference import digits_for, reference

    spec = spec_of("""
        name: big_power
        summary: s.
        inputs:
          x: {dtype: float, shape: [N]}
        params:
          p: {default: 2.0}
        formula: |
          loss = (1 + x) ** p
    """)
    prog = build_program(spec)
    x = {"x": np.array([1e-45])}
    got = reference(prog, x, {"p": 1e45}, {}, []).values["none"]
    assert abs(got[0] - np.e) < 1e-12
    assert digits_for(x, {}, spec, {"p": 2.0}) == digits_for(x, {}, spec)  # small exponents: as before


def test_the_gradient_conditions_of_all_a_specs_cases_are_bounded(monkeypatch):
    """Each case's gradient condition was held to 20 times 'reference_work' on its own (60 s
    each, twice a case: float64 and float32); over a spec's given cases they add up to
    'condition_spec_work', past which a condition gives no allowance (the stricter check)."""
    import numpy as np

    from losscc import limits
    from losscc.parse import build_program
    from losscc.reference import gradient_condition, spec_budget

    spec = spec_of(_many_cases(2))
    prog = build_program(spec)
    x = {"x": np.array([0.5, 1.25, -2.0])}
    free = gradient_condition(prog, x, {}, {}, ["x"], charge=True)["x"]
    assert np.all(free > 0)
    monkeypatch.setattr(limits, "MAX_CONDITION_SPEC_WORK", 1, raising=False)
    with spec_budget():
        assert np.all(gradient_condition(prog, x, {}, {}, ["x"])["x"] == free)  # not charged: a drawn case
        assert np.all(gradient_condition(prog, x, {}, {}, ["x"], charge=True)["x"] == 0)
    assert np.all(gradient_condition(prog, x, {}, {}, ["x"], charge=True)["x"] == free)  # outside verify


def _ref_spec(tmp_path, entries: int) -> str:
    refs = "\n".join("  - file: a.json" for _ in range(entries))
    text = ("name: r\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\nformula: |\n  loss = x * x\n"
            "reduction: sum\nreferences:\n" + refs + "\n")
    (tmp_path / "r.yaml").write_text(text)
    return str(tmp_path / "r.yaml")


def test_the_reference_files_of_a_spec_give_a_bounded_number_of_cases(tmp_path):
    """`references:` had no bound on its entries nor on the cases of a file: a 55 KB spec that
    names one 1 MiB case file 2500 times made verify load 57500 cases (past 300 s and 2 GB
    before any was run)."""
    import json

    from losscc import limits
    from losscc.casefile import reference_cases
    from losscc.errors import SpecError
    from losscc.spec import load_spec

    case = {"inputs": {"x": {"dtype": "float64", "shape": [1], "data": [1.0]}}, "expected": {"sum": 1.0},
            "grad_of_sum": {"x": [2.0]}}
    (tmp_path / "a.json").write_text(json.dumps({"cases": [dict(case, id=f"c{k}") for k in range(25)]}))
    with pytest.raises(SpecError) as info:
        load_spec(Path(_ref_spec(tmp_path, 2500)), "r.yaml")
    assert any(d.code == "E104" and "limit 'references'" in d.message for d in info.value.diagnostics)
    spec = load_spec(Path(_ref_spec(tmp_path, limits.MAX_REFERENCES)), "r.yaml")
    assert len(reference_cases(spec, tmp_path)) == 25 * limits.MAX_REFERENCES
    (tmp_path / "a.json").write_text(json.dumps({"cases": [dict(case, id=f"c{k}") for k in range(120)]}))
    with pytest.raises(SpecError) as info:
        reference_cases(load_spec(Path(_ref_spec(tmp_path, 2)), "r.yaml"), tmp_path)
    assert "limit 'cases'" in info.value.diagnostics[0].message
    (tmp_path / "a.json").write_text(json.dumps({"cases": [dict(case, id=f"c{k}") for k in range(300)]}))
    with pytest.raises(SpecError) as info:
        reference_cases(load_spec(Path(_ref_spec(tmp_path, 1)), "r.yaml"), tmp_path)
    assert "limit 'cases'" in info.value.diagnostics[0].message
