"""softplus(v) - v is softplus(-v): the logistic loss written as TensorFlow documents it,
x - x z + log(1 + exp(-x)), cancels x against itself for large negative logits (0 in float32
where the loss is 9.4e-14 at x = -30, and its gradient -z exactly instead of sigmoid(x) - z).
The rule `softplus-linear` keeps it accurate in every backend."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from tests.codegen_util import modules, spec_of

TF_LOGISTIC = """
    name: tf_logistic
    summary: Sigmoid cross-entropy as x - x z + log(1 + exp(-x)).
    inputs:
      x: {dtype: float, shape: [N]}
      z: {dtype: float, shape: [N], domain: "[0, 1]"}
    formula: |
      loss = x - x * z + log(1 + exp(-x))
"""

POINTS = [(-30.0, 0.0), (-20.0, 0.5), (-5.0, 1.0), (0.0, 0.25), (7.0, 1.0), (40.0, 0.0)]


def _exact(x, z):
    with mp.workdps(50):
        v = mp.mpf(x)
        return float(v - v * z + mp.log(1 + mp.exp(-v))), float(1 - z - 1 / (1 + mp.exp(v)))


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_logistic_loss_written_with_its_linear_term_keeps_small_values(backend, tmp_path):
    pytest.importorskip(backend)
    mod = modules(spec_of(TF_LOGISTIC), tmp_path)[backend]
    x = np.array([p[0] for p in POINTS], np.float32)
    z = np.array([p[1] for p in POINTS], np.float32)
    if backend == "paddle":
        import paddle

        xt = paddle.to_tensor(x, stop_gradient=False)
        loss = mod.tf_logistic(xt, paddle.to_tensor(z), reduction="none")
        (grad,) = paddle.grad([loss.sum()], [xt])
        got, dgot = loss.numpy(), grad.numpy()
    else:
        import mindspore as ms

        f = lambda a, b: mod.tf_logistic(a, b, reduction="none").sum()  # noqa: E731
        got = mod.tf_logistic(ms.Tensor(x), ms.Tensor(z), reduction="none").asnumpy()
        dgot = ms.grad(f, grad_position=0)(ms.Tensor(x), ms.Tensor(z)).asnumpy()
    for k, (xv, zv) in enumerate(POINTS):
        want, dwant = _exact(xv, zv)
        assert abs(got[k] - want) <= 1e-6 * abs(want) + 1e-30, (xv, zv, got[k], want)
        assert abs(dgot[k] - dwant) <= 1e-6 * abs(dwant) + 1e-30, (xv, zv, dgot[k], dwant)
