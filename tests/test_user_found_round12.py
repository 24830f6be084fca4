"""Fresh-loss trial 12 (count likelihoods with lgamma): log(theta / (theta + mu)) was split
into two logs that round to the same float32 for theta >> mu (a zero-inflated negative
binomial was 0 for 0.4697 at theta = 1e6, mu = 0.5); log-of-quotient now takes
-log1p(mu / theta) where mu < theta."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from tests.codegen_util import modules, spec_of

NB = """
    name: nb_theta
    summary: The negative binomial terms in mu (a count y, mean mu, dispersion theta).
    inputs:
      mu: {dtype: float, shape: [N], domain: "(0, inf)"}
      y: {dtype: float, shape: [N], domain: "[0, inf)"}
    params:
      theta: {default: 2.0, gt: 0}
    formula: |
      loss = - theta * log(theta / (theta + mu)) - y * log(mu / (theta + mu))
"""


def _exact(mu, y, theta):
    with mp.workdps(40):
        m, t = mp.mpf(mu), mp.mpf(theta)
        return float(-t * mp.log(t / (t + m)) - y * mp.log(m / (t + m)))


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_a_log_of_a_ratio_near_one_keeps_float32(backend, tmp_path):
    pytest.importorskip(backend)
    mod = modules(spec_of(NB), tmp_path)[backend]
    points = [(0.5, 0.0, 1e6), (3.0, 2.0, 1e5), (1e6, 1.0, 0.5), (2.0, 2.0, 2.0)]
    mu = np.array([p[0] for p in points], np.float32)
    y = np.array([p[1] for p in points], np.float32)
    for theta in sorted({p[2] for p in points}):
        if backend == "paddle":
            import paddle

            got = mod.nb_theta(paddle.to_tensor(mu), paddle.to_tensor(y), theta=theta, reduction="none").numpy()
        else:
            import mindspore as ms

            got = mod.nb_theta(ms.Tensor(mu), ms.Tensor(y), theta=theta, reduction="none").asnumpy()
        for k, (m, yy, t) in enumerate(points):
            if t == theta:
                want = _exact(float(np.float32(m)), float(yy), float(np.float32(t)))
                assert abs(got[k] - want) <= 1e-5 * abs(want), (m, yy, t, got[k], want)
