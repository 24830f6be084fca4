"""Defects a fourth trial of new users' losses found (2026-12-05): the eps guard skipped
log(1 - p) once it became log1p, an open unit interval had no draws near its ends and a
spec with no extreme case passed, and messages that hid the docs' advice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from losscc import verify
from losscc.draws import extreme_cases
from losscc.errors import SpecError
from losscc.parse import build_program
from losscc.pipeline import prepare
from losscc.ranges import Ranges
from tests.backend_util import BACKENDS
from tests.cli_util import run
from tests.codegen_util import spec_of
from tests.test_hostile_pr import _proj

BCE = """
name: t
summary: s.
inputs:
  p: {dtype: float, shape: [N], domain: "[0, 1]"}
  y: {dtype: float, shape: [N], domain: "[0, 1]"}
guards: {eps: 1.0e-7}
formula: |
  loss = -(y * log(p) + (1 - y) * log(1 - p))
"""


def test_the_eps_guard_reaches_log_of_one_minus_p():
    """log(1 - p) became log1p(-p) before the eps guard ran, and the guard knew log only:
    the loss was inf at p = 1 (and verify passed it: its reference is unguarded)."""
    prep = prepare(spec_of(BCE))
    guarded = [f for f in prep.fired if f.rule == "eps-guard"]
    assert len(guarded) == 2 and any("log1p" in str(f.before) for f in guarded)
    assert "log1p(Max(-0.9999999" in str(prep.loss)


def test_a_number_less_a_bounded_input_is_nonnegative():
    prog = build_program(spec_of(BCE))
    r = Ranges(prog)
    p, y = prog.symbols["p"], prog.symbols["y"]
    assert r.nonneg(1 - p) and not r.positive(1 - p)
    assert r.positive(2 - p) and r.nonneg(1 - p / 2) and r.nonneg(3 - p - y - p)
    assert not r.nonneg(1 - 2 * p) and not r.nonneg(p - 1)


def test_an_open_interval_gets_draws_near_its_ends():
    spec = spec_of("name: t\nsummary: s.\ninputs:\n  p: {dtype: float, shape: [N], domain: \"(0, 1)\"}\n"
                   "formula: |\n  loss = -log(1 - p)\n")
    cases = extreme_cases(spec)
    assert [c.id for c in cases] == ["extreme_p_near_ends"]
    v = cases[0].inputs["p"]
    assert set(v.tolist()) <= {1e-30, 1 - 1e-7} and np.all(np.float32(v) < 1)


def test_a_spec_with_no_case_fails_verify_instead_of_passing():
    spec = spec_of("name: t\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\nformula: |\n  loss = x\n")
    rows = verify.verify_spec(spec, {"jax": None}, {"jax": None}, ("float32",), ("eager",), [])
    assert len(rows) == 1 and not rows[0].ok and "nothing was checked" in rows[0].failures[0]


@pytest.mark.parametrize("call,words", [
    ("acos(x)", "write the angle's cosine and sine instead"),
    ("asin(stop_gradient(x))", "its derivative is infinite at -1 and 1"),
    ("cumsum(x, axis=N)", "sum(where(index(J) <= index(K), rename(x, K=J), 0), axis=J)"),
])
def test_functions_the_docs_explain_are_refused_with_the_advice(call, words):
    """acos and cumsum were unknown functions with did-you-mean hints (cos, sum)."""
    with pytest.raises(SpecError) as info:
        build_program(spec_of(f"name: t\nsummary: s.\ninputs:\n  x: {{dtype: float, shape: [N]}}\n"
                              f"formula: |\n  loss = {call}\n"))
    d = info.value.diagnostics[0]
    assert d.code in ("E230", "E231") and words in d.message + d.hint and "did you mean" not in d.hint


def test_a_called_spec_parameter_out_of_bounds_names_the_bounds(tmp_path, monkeypatch, capsys):
    root = _proj(tmp_path, names=("huber",))
    (root / "specs" / "t.yaml").write_text(
        "name: t\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\n  y: {dtype: float, shape: [N]}\n"
        "formula: |\n  loss = huber(x, y, delta=-1, reduction=none)\n")
    rc, out, err = run(monkeypatch, capsys, root, "explain", "specs/t.yaml")
    assert rc == 2 and "E262" in err and "= -1 is outside its bounds (>= 0)" in err, err


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cross_entropy_from_logits_or_probabilities_passes_the_extreme_suite(backend):
    """Keras's `from_logits` as a bool parameter: the rewrites did not reach into the select,
    and the logits branch gave inf and NaN gradients at logits of 1e4."""
    spec = spec_of("""
        name: flag_ce
        summary: s.
        inputs:
          x: {dtype: float, shape: [N, C]}
          y: {dtype: int, shape: [N], domain: "[0, C)"}
        params:
          from_logits: {default: true}
        formula: |
          p = where(from_logits, softmax(x, axis=C), clip(x, 1e-7, 1))
          loss = -log(p[y])
    """, "flag_ce")
    assert "Gather(LogSoftmax(x, C), y, C)" in str(prepare(spec).loss)
    rows = verify.run([spec], (backend,), dtypes=("float32",), modes=("eager",), root=Path("."), extreme=True)
    assert rows and all(r.ok for r in rows), [r.failures[:3] for r in rows]


def test_the_gradient_of_a_loss_element_beyond_the_dtype_is_not_demanded():
    """A Gaussian KL's element 0.5 * (exp(89.04) + w) is 5.4e38, inf in float32, and its
    gradient in w (0.5) is finite, but no float32 computation of the written loss has it:
    verify demanded it (the KL failed or passed by the draw).  An entry that moves such an
    element is a kink in that dtype only."""
    prog = build_program(spec_of("name: t\nsummary: s.\ninputs:\n  v: {dtype: float, shape: [N]}\n"
                                 "  w: {dtype: float, shape: [N]}\nformula: |\n  loss = 0.5 * (exp(v) + w)\n"))
    case = verify.CaseData("c", "test", {"v": np.array([89.7, 1.0]), "w": np.array([1.0, 1.0])}, {},
                           from_reference=True)
    for dtype, want in (("float32", [True, False]), ("float64", [False, False])):
        kinks = verify.expectations(prog, case, dtype)[2]
        assert list(kinks["v"]) == want and list(kinks["w"]) == want, (dtype, kinks)


def test_a_ratio_of_exps_is_one_exp():
    """(exp(a) + d) / exp(b) was (d + exp(a)) * exp(-b): inf in float32 at a = -20, b = -100,
    where the KL of two Gaussians is 2.8e34."""
    spec = spec_of("name: t\nsummary: s.\ninputs:\n  a: {dtype: float, shape: [N]}\n  b: {dtype: float, shape: [N]}\n"
                   "  d: {dtype: float, shape: [N]}\nformula: |\n  loss = (exp(a) + d**2) / exp(b)\n")
    loss = str(prepare(spec).loss)
    assert "exp(a - b)" in loss and "exp(a)" not in loss, loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_gather_of_a_number_typed_with_the_axis(backend):
    """softmax(x - x, axis=C)[label] folds to (1 / C)[label], typed with the softmax's axes:
    the reference evaluator could not gather from a number (IndexError), the code gathered
    from a scalar (`take_along_axis` of a 0-d tensor), and MindSpore's graph mode rounded the
    Python float 1 / 3 to float32 (found by the property test)."""
    spec = spec_of("""
        name: sm
        summary: s.
        inputs:
          x: {dtype: float, shape: [N, C]}
          label: {dtype: int, shape: [N], domain: "[0, C)"}
        formula: |
          loss = softmax(x - x, axis=C)[label]
    """, "sm")
    rows = verify.run([spec], (backend,), dtypes=("float64",), modes=("eager", "graph"), root=Path("."))
    assert rows and all(r.ok for r in rows), [r.failures[:3] for r in rows]
