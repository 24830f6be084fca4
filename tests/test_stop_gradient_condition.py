"""The value's condition S_i takes each stop_gradient as the identity (fresh-loss trial 13, V1).

`x - stop_gradient(max(x, axis=C))` is 0 at the maximum whatever x is; with the gradient's
frozen derivative the floor read |x * 1| = 1e16 there, and a code that returned 0 for a
true 1 (a lost `- tau`) passed every row with "value rel 1.00e+00".
"""

from __future__ import annotations

import numpy as np

from losscc import verify
from losscc.cases import spec_cases
from losscc.parse import build_program
from losscc.spec import spec_from_text

SPEC = """\
name: shift_max
summary: Shift by the row maximum, then a hinge at a threshold tau.
inputs:
  x: {dtype: float, shape: [N, C]}
  tau: {dtype: float, shape: [N]}
formula: |
  z = x - stop_gradient(max(x, axis=C))
  loss = sum(relu(z - tau), axis=C)
reduction: none
cases:
  - id: large
    inputs: {x: [[1.0e16, 0.0], [3.0, 0.0]], tau: [-1.0, -1.0]}
    expected: {none: [1.0, 1.0]}
"""


def _check(values):
    spec = spec_from_text(SPEC, "shift_max.yaml")
    prog = build_program(spec)
    (case,) = spec_cases(spec)
    case.from_reference = True
    exp_vals, exp_grads, kinks = verify.expectations(prog, case)
    grads = {n: np.asarray(g) for n, g in exp_grads.items()}
    row = verify.Row("shift_max", "test", "float64", "eager")
    return verify._check_case(row, case, {"none": np.asarray(values)}, grads, exp_vals, exp_grads, kinks,
                              "float64", ["none"], prog, None, True)


def test_a_lost_term_beside_a_stop_gradient_shift_fails():
    fails = _check([0.0, 1.0])
    assert fails and "value (none)" in fails[0]


def test_the_right_values_pass():
    assert _check([1.0, 1.0]) == []


def test_the_gradient_keeps_the_stop_gradient():
    spec = spec_from_text(SPEC, "shift_max.yaml")
    prog = build_program(spec)
    (case,) = spec_cases(spec)
    _, exp_grads, _ = verify.expectations(prog, case)
    # frozen: d/dx[0, 0] is 1 (the shift does not move); thawed it is 0 (x - x)
    assert exp_grads["x"][0, 0] == 1.0
    assert exp_grads.of_value["x"][0, 0] == 0.0
