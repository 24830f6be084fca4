"""Kernels a backend must not differentiate through, and the helpers that replace them.

Paddle 3.3's CPU gradient of ``paddle.amax`` / ``paddle.max`` along an axis re-reduces the
tie count for every element (Eigen's lazy broadcast of a reduction): quadratic in the
axis length, 6 s forward+backward for logits [8192, 1000] (docs/operator_choices.md).
The generated code takes the maximum without gradient and routes the gradient through
cheap elementwise terms; these tests pin both the rule and the gradients it must keep."""

from __future__ import annotations

import re

import numpy as np
import pytest

from losscc import verify
from losscc.backends import get
from tests.backend_util import BACKENDS
from tests.test_accurate_ops import _probe


def _paddle_sources() -> list[str]:
    b = get("paddle")
    return list(b.ops.values()) + [src for key in b.ops for src in b.helper_sources(key)]


def test_paddle_takes_no_gradient_through_amax():
    calls = [m for src in _paddle_sources() for m in re.finditer(r"paddle\.(amax|max|amin|min)\((.*)", src)]
    assert calls, "the table has no maximum over an axis"
    for m in calls:
        assert m.group(2).endswith(".detach()"), m.group(0)


def _helpers(*keys) -> dict:
    b = get("paddle")
    src = "\n".join(b.imports) + "\n\n" + "".join(h + "\n\n" for k in keys for h in b.helper_sources(k))
    ns: dict = {}
    exec(compile(src, "helpers", "exec"), ns)
    return ns


def test_paddle_amax_value_and_gradient_at_ties_infinities_and_nan():
    paddle = pytest.importorskip("paddle")
    amax = _helpers("amax")["_amax"]
    rows = np.array([[np.inf, 1.0, 0.0], [-np.inf, -np.inf, -np.inf], [1.0, 1.0, 0.0], [2.0, -np.inf, 1.0],
                     [3.0, 3.0, 3.0]])
    x = paddle.to_tensor(rows)
    x.stop_gradient = False
    y = amax(x, -1)
    (g,) = paddle.grad([y.sum()], [x])
    np.testing.assert_array_equal(y.numpy().ravel(), [np.inf, -np.inf, 1.0, 2.0, 3.0])
    np.testing.assert_allclose(g.numpy(), [[1, 0, 0], [1 / 3] * 3, [0.5, 0.5, 0], [1, 0, 0], [1 / 3] * 3], rtol=1e-15)
    nan = paddle.to_tensor(np.array([[np.nan, 1.0]]))
    assert np.isnan(amax(nan, -1).numpy()).all()


ROWS = np.array([[2.0, 2.0, -1.0], [0.0, 0.0, 0.0], [5.0, -np.inf, 5.0], [46.0, 0.0, -80.0]])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_log_softmax_gradients_at_tied_maxima(backend, dtype, mode, tmp_path):
    """With the row maximum taken without gradient, the tied maxima get their softmax
    gradient through `rest` (every backend, both modes)."""
    soft = np.exp(ROWS - ROWS.max(-1, keepdims=True))
    soft /= soft.sum(-1, keepdims=True)
    run = verify.runner(backend).gradient
    tol = dict(rtol=8 * np.finfo(dtype).eps, atol=np.finfo(dtype).tiny)
    _, (g,) = run(_probe(backend, "log_softmax", ["x"], tmp_path, axis="-1"), [ROWS], dtype, mode)
    np.testing.assert_allclose(g, 1 - ROWS.shape[1] * soft, **tol)  # d sum_i log_softmax_i / dx
    index = np.array([[0], [2], [2], [0]])
    _, (g, _) = run(_probe(backend, "gather_log_softmax", ["x", "index"], tmp_path, axis="-1"), [ROWS, index],
                    dtype, mode)
    want = np.eye(3)[index[:, 0]] - soft
    want[3, 0] = soft[3, 1] + soft[3, 2]  # the confident row: 1 - softmax, one term (1.05e-20)
    np.testing.assert_allclose(g, want, **tol)
