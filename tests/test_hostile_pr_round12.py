"""Red-team round 12: an int hyperparameter as an exponent of an int in MindSpore's graph
compiler (2 ** -2 was 0 there), black's layout of many hyperparameters and of a
custom backward with one float input."""

from __future__ import annotations

import black
import numpy as np
import pytest

from losscc.backends import all_backends
from losscc.emit import compile_spec
from tests.codegen_util import case, check, modules, spec_of

INT_POWER = """
    name: int_power
    summary: s.
    inputs:
      x: {dtype: float, shape: [N]}
    params:
      k: {default: 1, min: -5, max: 5}
      m: {default: 2, min: 1, max: 3}
    formula: |
      loss = x * 2**k + x * m**k
"""


def test_an_int_to_an_int_power_is_float_arithmetic(tmp_path):
    spec = spec_of(INT_POWER)
    src = {b.name: compile_spec(spec, b) for b in all_backends()}
    assert "2.0**k" in src["jax"] and "float(m) ** k" in src["jax"]
    # a tensor of the dtype: a Python float is float32 in MindSpore's float64 arithmetic
    assert "ops.full((), 2, dtype=dtype) ** k" in src["mindspore"]
    assert "ops.full((), m, dtype=dtype) ** k" in src["mindspore"]


def test_an_int_to_a_negative_int_power_in_mindspore_graph_mode(tmp_path):
    pytest.importorskip("mindspore")
    import mindspore as ms

    spec = spec_of(INT_POWER)
    mod = modules(spec, tmp_path)["mindspore"]
    x = ms.Tensor(np.array([1.0, 2.0]))
    got = ms.jit(mod.int_power)(x, k=-2, m=2, reduction="sum")
    assert float(got.asnumpy()) == pytest.approx(3 * (0.25 + 0.25))  # 0 with int arithmetic
    cases = [case(spec, {"N": (3,)}, seed=1, params={"k": -2, "m": 3}),
             case(spec, {"N": (2,)}, seed=2, params={"k": -5, "m": 2})]
    check(spec, {"mindspore": mod}, cases, modes=("eager", "graph"), backends=("mindspore",))


def _black_clean(src: str) -> bool:
    return black.format_str(src, mode=black.Mode()) == src


def test_many_long_hyperparameters_stay_black_clean():
    names = ["margin_of_the_positive_pairs", "scale_of_the_logits_here", "temperature_of_softmax",
             "weight_of_the_first_term", "weight_of_the_second_term", "another_rather_long_name",
             "smoothing_of_the_labels_x", "exponent_of_the_focal_term", "offset_of_the_hinge_term"]
    params = "\n".join(f"      {n}: {{default: {k + 1}.5, gt: 0}}" for k, n in enumerate(names))
    text = f"""
    name: many_params
    summary: s.
    inputs:
      x: {{dtype: float, shape: [N]}}
    params:
{params}
    formula: |
      loss = x * ({' + '.join(names)})
"""
    spec = spec_of(text)
    for b in all_backends():
        assert _black_clean(compile_spec(spec, b)), b.name


def test_a_custom_backward_of_one_float_input_is_black_clean():
    spec = spec_of("""
    name: one_input
    summary: s.
    backward: custom
    inputs:
      x: {dtype: float, shape: [N]}
    formula: |
      loss = x**2
""")
    for b in all_backends():
        src = compile_spec(spec, b)
        assert _black_clean(src), b.name
        if b.name == "paddle":
            assert "(x,) = " in src and "return (d_x,)" in src
