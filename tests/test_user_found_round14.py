"""Fresh-loss trial 14 (losses of optax, mmdet, kornia and others written from the docs alone)."""

from __future__ import annotations

import numpy as np
import pytest

from losscc.backends import get
from losscc.emit import compile_spec
from losscc import verify
from tests.backend_util import AVAILABLE
from tests.codegen_util import spec_of

DFL = """
    name: dfl_fixed
    summary: Distribution focal loss (mmdet) over a fixed axis of 8 bins.
    inputs:
      pred: {dtype: float, shape: [N, "R=8"]}
      label: {dtype: float, shape: [N], domain: "[0, 7)"}
    backward: custom
    formula: |
      left = stop_gradient(floor(label))
      ls = log_softmax(pred, axis=R)
      ce_left = -sum(where(index(R) == left, ls, 0), axis=R)
      ce_right = -sum(where(index(R) == left + 1, ls, 0), axis=R)
      loss = ce_left * (left + 1 - label) + ce_right * (label - left)
"""


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_custom_backward_of_a_spec_with_a_fixed_size_axis_compiles(backend):
    """The custom backward assigned the size of every axis it reads, also an axis of a fixed
    size, whose 'variable' is its number: `8 = pred.shape[1]`, a SyntaxError (generate and
    `verify --backward custom` ended in an internal error, exit 3)."""
    code = compile_spec(spec_of(DFL), get(backend))
    assert "8 = " not in code
    compile(code, "dfl_fixed.py", "exec")


@pytest.mark.skipif("paddle" not in AVAILABLE, reason="paddle is not installed")
def test_custom_backward_of_a_fixed_size_axis_equals_autograd(tmp_path):
    import paddle

    path = tmp_path / "dfl_fixed.py"
    path.write_text(compile_spec(spec_of(DFL), get("paddle")), encoding="utf-8")
    mod = verify.load_module(path, f"losscc_test_r14_dfl_{tmp_path.name}")
    rng = np.random.default_rng(14)
    pred, label = rng.normal(size=(3, 8)), np.array([0.25, 3.0, 6.5])
    grads = []
    for f in (mod.dfl_fixed, mod.DflFixed()):
        x = paddle.to_tensor(pred, stop_gradient=False)
        y = paddle.to_tensor(label, stop_gradient=False)
        grads.append([g.numpy() for g in paddle.grad([f(x, y)], [x, y])])
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)

