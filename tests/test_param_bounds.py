"""Strict hyperparameter bounds (`gt:`, `lt:`), beside the inclusive `min:` and `max:`: read,
checked in the generated code, kept by verify's draws and float32 rounding, used by the
range facts that rewrites need, and refused in case files and calls on the bound."""

from __future__ import annotations

import pytest

from losscc.errors import SpecError
from losscc.parse import build_program
from losscc.spec import load_spec
from tests.codegen_util import case, check, modules, spec_of

STRICT = """
    name: strict_t
    summary: s.
    inputs:
      x: {dtype: float, shape: [N, C]}
      y: {dtype: float, shape: [N, C]}
    params:
      c: {default: 0.5, gt: 0, lt: 1, doc: A scale.}
    formula: |
      loss = sqrt((x - y)**2 + c**2) - c
"""


def _errors(text: str) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        spec_of(text)
    return [(d.code, d.message) for d in info.value.diagnostics]


def test_strict_bounds_are_read():
    (p,) = spec_of(STRICT).params
    assert (p.min, p.max, p.min_open, p.max_open) == (0, 1, True, True)
    assert p.bound_words() == ["> 0", "< 1"]
    assert p.positive and p.nonnegative
    assert not p.admits(0) and not p.admits(1) and p.admits(5e-324) and p.admits(0.999)


@pytest.mark.parametrize("fields,code,words", [
    ("default: 0.5, min: 0, gt: 0", "E133", "'min' and 'gt' both bound one side"),
    ("default: 0.5, max: 1, lt: 1", "E133", "'max' and 'lt' both bound one side"),
    ("default: 0.0, gt: 0", "E134", "0.0 is outside the bounds (> 0)"),
    ("default: 1.0, min: 0, lt: 1", "E134", "1.0 is outside the bounds (>= 0 and < 1)"),
    ("default: 1.0, gt: 1, max: 1", "E133", "the bounds admit no value (> 1 and <= 1)"),
    ("default: 1.0, gt: 2, lt: 3", "E134", "1.0 is outside the bounds (> 2 and < 3)"),
    ("default: true, gt: 0", "E133", "a boolean parameter has no bounds"),
    ("default: 0.5, gt: '0'", "E112", "params.c.gt: expected a number"),
])
def test_bad_bounds_name_the_field(fields, code, words):
    text = STRICT.replace("{default: 0.5, gt: 0, lt: 1, doc: A scale.}", "{" + fields + "}")
    got = _errors(text)
    assert any(c == code and words in m for c, m in got), got


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_generated_code_refuses_a_value_on_a_strict_bound_and_verifies(backend, tmp_path):
    pytest.importorskip(backend)
    spec = spec_of(STRICT)
    mod = modules(spec, tmp_path)[backend]
    src = (tmp_path / backend / "strict_t.py").read_text()
    assert "if not (c > 0 and c < 1):" in src and "c: float, default 0.5, > 0, < 1." in src
    for bad in (0.0, 1.0, -1.0):
        with pytest.raises(ValueError, match=r"strict_t: c must be a float > 0 and < 1; received: c="):
            mod.StrictT(c=bad)
    mod.StrictT(c=1e-30)
    cases = [case(spec, {"N": (3,), "C": (4,)}, seed=1),
             case(spec, {"N": (2,), "C": (3,)}, seed=2, params={"c": 0.999})]
    check(spec, {backend: mod}, cases, dtypes=("float64", "float32"), backends=(backend,))


def test_a_strict_lower_bound_at_zero_proves_positivity():
    """`gt: 0` makes c > 0 known: `sqrt(d**2 + c**2) - c` gets the conjugate form and no
    branch; `min: 0` splits on c == 0 first (value specialisation)."""
    from losscc.backends import get
    from losscc.emit import compile_spec

    def body(text):
        src = compile_spec(spec_of(text), get("paddle"))
        return src[src.index("    c = paddle.full"):src.index("    if reduction")]

    strict = body(STRICT)
    assert "loss = t / (c + paddle.sqrt(paddle.square(c) + t))" in strict and "c_zero" not in strict
    assert "if c_zero:" in body(STRICT.replace("gt: 0, lt: 1", "min: 0, lt: 1"))


def test_verify_draws_stay_inside_strict_bounds():
    from losscc.draws import _varied_params
    spec = spec_of(STRICT)
    for k in range(4):
        v = _varied_params(spec, k)["c"]
        assert spec.params[0].admits(v), (k, v)


def test_case_files_and_calls_on_a_strict_bound_are_refused(tmp_path):
    from losscc.casecheck import CaseProblem, check_param
    (p,) = spec_of(STRICT).params
    with pytest.raises(CaseProblem, match=r"0\.0 is outside the bounds of 'c' \(> 0 and < 1\)"):
        check_param(p, 0.0, "case 'a': params.c")
    check_param(p, 0.25, "case 'a': params.c")
    (tmp_path / "strict_t.yaml").write_text(
        "name: strict_t\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\n  y: {dtype: float, shape: [N]}\n"
        "params:\n  c: {default: 0.5, gt: 0}\nformula: |\n  loss = sqrt((x - y)**2 + c**2) - c\n")
    (tmp_path / "caller.yaml").write_text(
        "name: caller\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\n  y: {dtype: float, shape: [N]}\n"
        "formula: |\n  loss = strict_t(x, y, c=0.0, reduction=none)\n")
    with pytest.raises(SpecError) as info:
        build_program(load_spec(tmp_path / "caller.yaml"))
    assert [d.code for d in info.value.diagnostics] == ["E262"]


def test_range_facts_of_bounded_parameters():
    from losscc.ranges import Ranges
    prog = build_program(spec_of(STRICT.replace("c: {default: 0.5, gt: 0, lt: 1, doc: A scale.}",
                                                "c: {default: 0.5, gt: 0, lt: 1}\n      k: {default: 2.0, gt: 0}")))
    r = Ranges(prog)
    c, k = prog.symbols["c"], prog.symbols["k"]
    assert r.positive(c) and r.bounded(c) and r.bounded(2 * c - 1)
    assert r.positive(k) and not r.bounded(k)
