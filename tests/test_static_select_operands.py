"""A select on a boolean hyperparameter whose branch is the number 0 stays the Python number
only as a term of a sum with a tensor term (losscc.selects); as an operand of a `where`, a
function's argument or inside a product of selects it is a tensor of its shape.  Before,
`where(x > t, where(flag, 0, x * t), 1)` generated `paddle.full_like(branch, 1)` on the
number 0 when flag was true: AttributeError in every backend (found while extending the
custom backward, whose arcface gradient had the same pattern)."""

from __future__ import annotations

import pytest

from tests.codegen_util import case, check, modules, spec_of

FORMULAS = [
    "where(x > t, where(flag, 0, x * t), 1) + x",
    "exp(where(flag, 0, x)) * t",
    "where(flag, 0, x) * where(flag, 0, t) + log1p(where(flag, 0, x**2))",
    "where(flag, 0, x * t)",  # the loss itself
    "x + where(flag, 0, t) + where(flag, x, 0)",  # terms of a sum: the numbers stay
]


@pytest.mark.parametrize("formula", FORMULAS)
def test_a_zero_branch_is_a_tensor_where_an_operator_needs_one(formula, tmp_path):
    spec = spec_of(f"""
        name: sel
        summary: A select on a flag inside other operators.
        inputs:
          x: {{dtype: float, shape: [N]}}
          t: {{dtype: float, shape: [N]}}
        params:
          flag: {{default: true}}
        formula: |
          loss = {formula}
        """)
    mods = modules(spec, tmp_path)
    cases = [case(spec, {"N": (5,)}, seed=k, params={"flag": f}) for k, f in enumerate((True, False))]
    check(spec, mods, cases, modes=("eager", "graph"))


def test_terms_of_a_sum_keep_the_number(tmp_path):
    spec = spec_of("""
        name: sel
        summary: A select as a term of a sum.
        inputs:
          x: {dtype: float, shape: [N]}
        params:
          flag: {default: true}
        formula: |
          loss = x**2 + where(flag, 0, x)
        """)
    from losscc.backends import get
    from losscc.emit import compile_spec

    code = compile_spec(spec, get("paddle"))
    assert "= 0\n" in code or " else 0" in code or "0 if flag" in code, code
