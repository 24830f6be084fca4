"""Conditions on int and bool hyperparameters alone are Python bools in the generated code.

`where(p == 2, a, b)` on an int parameter `p` (and relations, and/or/not of such
conditions, in where, Piecewise and the ternary) is decided in Python: a tensor
select would be given a bool (Paddle: "'bool' object has no attribute 'shape'",
MindSpore: "Failed calling Select with condition=bool"). A condition that mixes them
with tensors (`p == 2 and x > 0`) is decided on its static part first and keeps a
tensor select for the rest. Every form runs in both backends, eager and compiled,
against the reference, for every value of the parameters."""

from __future__ import annotations

import itertools
import re

import pytest

from losscc.backends import get
from losscc.emit import compile_spec
from tests.codegen_util import BACKENDS, case, check, modules, spec_of

HEAD = """
name: {name}
summary: conditions on hyperparameters
inputs:
  x: {{dtype: float, shape: [N]}}
params:
  p: {{default: 1, min: 1, max: 3}}
  b: {{default: true}}
formula: |
  loss = {formula}
"""

FORMULAS = {
    "relation": "where(p == 2, x**2, x)",
    "relation_scalars": "x * where(p >= 2, 3.0, 0.5)",
    "and_or_not": "where(not b or p > 1, 1.0, 0.0) + (x if p == 2 and b else 0.5 * x)",
    "piecewise": "Piecewise((x, (p == 1) & b), (2 * x, p >= 3), (x**2, p == 2), (3 * x, True))",
    "mixed_and": "where(p == 2 and x > 0, x, -x)",
    "mixed_or": "where(p != 2 or x > 0, x**2, -x)",
    "mixed_piecewise": "Piecewise((x, b & (x > 0)), (2 * x, (p == 2) | (x < -0.5)), (x**3, True))",
    "mixed_not": "where(not (b and x > 0), x, 2 * x)",
    "max_min": "x * max(p, 2) + min(p, 2, 3 * p - 4) * x**2 + x * max(1.5, p / 2)",
    "sign_floor_ceil": "x * sign(p - 2) + floor(p / 2) * x**2 + ceil(p / 2) * x + round(p / 2 + 0.25) * x**3",
}

PARAMS = [dict(p=p, b=b) for p, b in itertools.product((1, 2, 3), (True, False))]


def _loss_statements(code: str) -> str:
    """The statements of the generated function after the input casts, up to the reduction."""
    body = code[code.index("    dtype = ") if "    dtype = " in code else code.index("_check("):]
    body = body[body.index("\n    loss = ") if "\n    loss = " in body else 0:]
    return body[:body.index("if reduction")]


def _spec(key):
    return spec_of(HEAD.format(name=f"static_{key}", formula=FORMULAS[key]))


@pytest.mark.parametrize("key", list(FORMULAS))
def test_static_conditions_match_the_reference(key, tmp_path):
    spec = _spec(key)
    mods = modules(spec, tmp_path)
    cases = [case(spec, {"N": (7,)}, seed=k, params=par) for k, par in enumerate(PARAMS)]
    rows = check(spec, mods, cases, modes=("eager", "graph"))
    assert {r.mode for r in rows} == {"eager", "graph"}
    assert {r.backend for r in rows} == set(BACKENDS)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key", ["relation", "relation_scalars", "and_or_not", "piecewise", "max_min",
                                 "sign_floor_ceil"])
def test_static_condition_is_no_tensor_select(key, backend):
    """A condition on hyperparameters alone never reaches a tensor op (where, cast, logical_*),
    nor does a selection of them (max, min, sign, floor, ceil, round)."""
    body = _loss_statements(compile_spec(_spec(key), get(backend)))
    assert not re.search(r"\b(where|logical_and|logical_or|logical_not|cast|full|full_like|sign|floor|ceil)\(",
                         body), body


@pytest.mark.parametrize("backend", BACKENDS)
def test_mixed_condition_keeps_one_tensor_select(backend):
    body = _loss_statements(compile_spec(_spec("mixed_and"), get(backend)))
    assert body.count("where(") == 1 and "logical_and" not in body, body
    assert re.search(r"if p == 2 else", body), body


FLOAT = """
name: static_float
summary: a condition on a float hyperparameter
inputs:
  x: {dtype: float, shape: [N]}
params:
  delta: {default: 1.0, min: 0.0}
formula: |
  loss = where(delta > 1, x**2, x) + where(delta > 1 and x > 0, 1.0, 0.0)
"""


def test_condition_on_a_float_hyperparameter(tmp_path):
    """A float parameter is decided in Python where the backend keeps it a Python float, and
    is a 0-d tensor condition where the backend wraps it (both backends here): either runs."""
    spec = spec_of(FLOAT)
    mods = modules(spec, tmp_path)
    cases = [case(spec, {"N": (6,)}, seed=k, params={"delta": d}) for k, d in enumerate((0.5, 1.0, 2.0))]
    check(spec, mods, cases, modes=("eager", "graph"))
