"""Instruction selection (docs/operator_choices.md): the kernels each operator table picks,
checked in the emitted text, and the gradient conventions they must keep, checked in both
frameworks at the points where the choices differ (ties of a clip, float64 accuracy)."""

import re
from pathlib import Path

import numpy as np
import pytest

from losscc.backends import get
from losscc.emit import compile_spec
from losscc.spec import load_spec

ms = pytest.importorskip("mindspore")  # the choices are the two tables' own kernels
paddle = pytest.importorskip("paddle")
ops = ms.ops

ROOT = Path(__file__).resolve().parent.parent


def source(name: str, backend: str) -> str:
    """The generated module with one line per statement, whatever its line layout."""
    import ast

    return ast.unparse(ast.parse(compile_spec(load_spec(ROOT / "specs" / f"{name}.yaml"), get(backend))))


def test_paddle_squares_with_square_and_mindspore_with_pow():
    assert "paddle.square(input - target)" in source("mse", "paddle")
    assert "**" not in source("mse", "paddle").split('"""')[-1]
    assert "(input - target) ** 2" in source("mse", "mindspore")


@pytest.mark.parametrize("backend,clip", [("paddle", "paddle.clip("), ("mindspore", "ops.clamp(")])
def test_max_against_a_constant_is_a_one_sided_clip(backend, clip):
    code = source("margin_ranking", backend)
    assert f"{clip}margin - target * (input1 - input2), min=0)" in code
    assert "where(t >= 0" not in code


def test_clip_kernels_pass_the_gradient_at_a_tie_as_where_does():
    """max(t, 0) at t = 0: the where form gives gradient 1 (torch.clamp's convention); the clip
    kernels both frameworks are lowered to must too (maximum and relu give 0.5 and 0)."""
    t = paddle.to_tensor([-1.0, 0.0, 1.0], stop_gradient=False)
    paddle.clip(t, min=0).sum().backward()
    assert t.grad.numpy().tolist() == [0.0, 1.0, 1.0]
    t = paddle.to_tensor([-1.0, 0.0, 1.0], stop_gradient=False)
    paddle.clip(t, max=0).sum().backward()
    assert t.grad.numpy().tolist() == [1.0, 1.0, 0.0]
    grad = ms.grad(lambda v: ops.clamp(v, min=0).sum())(ms.Tensor([-1.0, 0.0, 1.0]))
    assert grad.asnumpy().tolist() == [0.0, 1.0, 1.0]
    grad = ms.grad(lambda v: ops.clamp(v, max=0).sum())(ms.Tensor([-1.0, 0.0, 1.0]))
    assert grad.asnumpy().tolist() == [1.0, 1.0, 0.0]


def test_paddle_gathers_without_broadcast_and_the_log_softmax_row_is_not_built():
    code = source("focal", "paddle")
    assert "picked = _gather_log_softmax(logits, -1, label)" in code
    assert "picked = paddle.take_along_axis(x, index, axis=axis, broadcast=False)" in code
    assert "terms = paddle.put_along_axis(terms, index, hole, axis=axis, broadcast=False)" in code
    assert " _log_softmax(logits" not in code  # no full-size log_softmax
    # cross_entropy's label smoothing reads the whole row, so there it is built once
    assert "logp = _log_softmax(input" in source("cross_entropy", "paddle")


def test_mindspore_log_softmax_is_the_exact_composition():
    code = source("focal", "mindspore")
    assert "ops.log_softmax" not in code
    assert "picked = _gather_log_softmax(logits, -1, label)" in code
    # a reason: the CPU kernel computes float64 in float32 (float32: tests/test_float32_order.py)
    z = np.array([[0.0, 1.0, 2.0, -70.0], [3.0, -1.0, 0.5, 2.0]])
    exact = z - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True)) - z.max(1, keepdims=True)
    native = ops.log_softmax(ms.Tensor(z), -1).asnumpy()
    assert np.max(np.abs(native - exact)) > 1e-9


@pytest.mark.parametrize("backend", ["mindspore", "paddle"])
def test_no_native_softplus(backend):
    """Both native kernels lose the value below 0 (tests/test_accurate_ops.py); the argument
    -|input| is <= 0, so the table's form for it (tests/test_softplus_nonpos.py)."""
    code = re.sub(r"\s+", "", source("bce_with_logits", backend))
    form = r"paddle\.log1p\(paddle\.exp" if backend == "paddle" else r"_softplus_nonpos"
    assert re.search(form + r"\(\w+\.where\(t,-input,input\)\)", code), code
    assert "ops.softplus(" not in code and "F.softplus(" not in code


def test_boolean_hyperparameter_branches_skip_the_untaken_side():
    code = source("poisson_nll", "paddle")
    assert "    if full:\n        t = target > 1" in code
    assert "    else:\n        stirling = 0\n    loss = nll + stirling" in code
    code = source("kl_div", "mindspore")
    assert "    if log_target:\n        loss = (target - input) * _exp(target)\n    else:" in code


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_a_negated_difference_is_written_as_the_reversed_difference(backend):
    # one-minus-ratio's far branch is -(t - 1) in the IR (so the rule does not match it
    # again); y - x is -(x - y) to the bit, and reads as the formula was written
    code = source("tversky", backend)
    assert "- 1)" not in code
    assert re.search(r"where\(t_\d+ > 0\.5, .*, 1 - t_\d+\)", code), code
