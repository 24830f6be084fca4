"""A float hyperparameter with ``min: 0`` that selects structure splits the loss in Python.

`specialise.specialise_values`: the program at p = 0 (p substituted) and the program with p
known positive (prepared again; a division by p needs no guard) each serve their side of
``p == 0`` where they are smaller than the general one, and only where the side of p's
default is. The test is a Python bool computed from the hyperparameter before the backend
wraps it in a tensor, so the common call runs the short program and the other is not
computed. Both sides give the reference's values and gradients."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sympy as sp

from losscc import ir
from losscc.backends import get
from losscc.emit import compile_spec
from losscc.pipeline import prepare
from losscc.spec import load_spec
from tests.codegen_util import BACKENDS, case, check, modules, spec_of

ROOT = Path(__file__).resolve().parent.parent


def _spec(name):
    return load_spec(ROOT / "specs" / f"{name}.yaml", f"specs/{name}.yaml")


def _sides(prep):
    """(the branch taken where the condition holds, the other) of the split."""
    loss = prep.loss.args[0].expr if prep.masks else prep.loss
    assert isinstance(loss, sp.Piecewise) and loss.args[0].cond == prep.values.cond
    return loss.args[0].expr, loss.args[1].expr


def test_smooth_l1_splits_on_beta_and_drops_the_guard():
    prep = prepare(_spec("smooth_l1"))
    beta = prep.prog.symbols["beta"]
    assert prep.values.cond == sp.Eq(beta, 0)
    at_zero, rest = _sides(prep)
    assert beta not in at_zero.free_symbols and not at_zero.has(sp.Piecewise)  # L1: abs(input - target)
    # beta > 0 on the other side: the divisor is left alone, no where(t, beta, 1)
    assert not any(isinstance(n, (ir.Where, sp.Piecewise)) and beta in n.args[1:]
                   for n in sp.preorder_traversal(rest))


def test_cross_entropy_without_smoothing_has_no_class_sum():
    prep = prepare(_spec("cross_entropy"))
    s = prep.prog.symbols["label_smoothing"]
    assert prep.values.cond == sp.Eq(s, 0)
    at_zero, rest = _sides(prep)
    assert not at_zero.has(ir.ReduceSum) and rest.has(ir.ReduceSum)
    assert prep.none is not None  # the all-None path is split the same way


def test_no_split_where_the_default_runs_the_general_program():
    # focal's alpha = 0 would be short, but its default 0.25 runs the general program
    assert prepare(_spec("focal")).values is None


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_the_test_reads_the_python_value(backend):
    code = compile_spec(_spec("smooth_l1"), get(backend))
    lines = [ln.strip() for ln in code.splitlines()]
    flag = lines.index("beta_zero = beta == 0")
    # the first line that makes beta a tensor (not the alias, not the Python-number conversion)
    wrap = next(k for k, ln in enumerate(lines) if ln.startswith("beta = ")
                and ln not in ("beta = delta", "beta = float(beta)"))
    assert flag < wrap and "if beta_zero:" in lines


SPEC = """
name: value_split
summary: a float hyperparameter that selects structure
inputs:
  x: {dtype: float, shape: [N, C]}
  y: {dtype: float, shape: [N, C]}
params:
  s: {default: 0.0, min: 0, max: 1}
  b: {default: 1.0, min: 0}
formula: |
  d = abs(x - y)
  hub = where(d < b, 0.5 * d**2 / b, d - 0.5 * b)
  loss = (1 - s) * hub + s * sum(d, axis=C) / C
"""


def test_both_sides_match_the_reference(tmp_path):
    spec = spec_of(SPEC)
    prep = prepare(spec)
    assert prep.values is not None and prep.values.param == "s"
    code = compile_spec(spec, get(BACKENDS[0]))
    assert re.search(r"^    s_zero = s == 0$", code, flags=re.MULTILINE)
    mods = modules(spec, tmp_path)
    params = [{"s": 0.0, "b": 1.0}, {"s": 0.3, "b": 1.0}, {"s": 0.0, "b": 0.0}, {"s": 1.0, "b": 0.5}]
    cases = [case(spec, {"N": (3,), "C": (4,)}, seed=k, params=p) for k, p in enumerate(params)]
    check(spec, mods, cases)
