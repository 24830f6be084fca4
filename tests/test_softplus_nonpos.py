"""softplus of an argument proved <= 0 lowers to the backend's `softplus_nonpos` form
(log1p(exp(x)): no select of the sign), where the backend spells one (losscc.ranges.nonpositive).

The softplus rewrites leave softplus(where(x > 0, -x, x)), -|x|; the general helper then
selected the sign again (Paddle bce_with_logits 5.4x its built-in, 2.3x without, benchmarks/notes.md).
"""

from __future__ import annotations

import re

import pytest
import sympy as sp

from losscc import ir
from losscc.backends import get
from losscc.emit import compile_spec
from losscc.ranges import Ranges, nonpositive
from losscc.spec import spec_from_text

x, k = sp.symbols("x k", real=True)
gt = sp.StrictGreaterThan


@pytest.mark.parametrize("e, expected", [
    (ir.Where(gt(x, 0), -x, x), True),
    (ir.Where(sp.GreaterThan(x, 0), -x, x), True),
    (ir.Where(sp.StrictLessThan(0, x), -x, x), True),
    (-sp.Abs(x), True),
    (-x**2, True),
    (sp.Integer(-3), True),
    (-sp.Abs(x) - 2, True),
    (ir.Where(gt(x, 0), x, -x), False),
    (ir.Where(gt(x, 1), -x, x), False),   # x in (0, 1] is not <= 0
    (ir.Where(gt(x, -1), -x, x), False),  # -x for x in (-1, 0) is > 0
    (ir.Where(gt(x, k), -x, x), False),   # a bound that is not a number
    (x, False),
    (-x, False),
    (sp.Abs(x) - 1, False),
])
def test_nonpositive(e, expected):
    assert nonpositive(e, Ranges(None)) is expected


SPEC = """\
name: logistic
summary: The logistic loss of a margin.
inputs:
  x: {dtype: float, shape: [N]}
  y: {dtype: float, shape: [N], domain: "[0, 1]"}
formula: |
  loss = -y * log_sigmoid(x) - (1 - y) * log_sigmoid(-x)
"""


@pytest.mark.parametrize("backend, form", [("paddle", "paddle.log1p(paddle.exp("), ("mindspore", "_softplus_nonpos(")])
def test_the_rewritten_softplus_takes_the_nonpositive_form(backend, form):
    code = re.sub(r"\s+", "", compile_spec(spec_from_text(SPEC, "logistic.yaml"), get(backend)))
    assert form in code and "_softplus(" not in code


def test_a_softplus_of_any_sign_keeps_the_general_form():
    text = SPEC.replace("-y * log_sigmoid(x) - (1 - y) * log_sigmoid(-x)", "softplus(x) * y")
    code = re.sub(r"\s+", "", compile_spec(spec_from_text(text, "logistic.yaml"), get("paddle")))
    assert "_softplus(" in code and "log1p(paddle.exp(" in code  # only inside the helper
