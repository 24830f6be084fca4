"""Integer labels of either width: an int32 label gives what the int64 one gives.

Paddle does not promote int32 against int64 in a comparison, so `one_hot(label, C)` is
spelled with the positions in the label's own dtype (the `arange` operator's `like`).
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from tests.backend_util import BACKENDS

SCORES = np.array([[0.3, -1.2, 2.0], [1.5, 0.1, -0.4], [0.0, 0.2, 0.1]])
LABELS = np.array([2, 0, 1])


def _tensor(backend: str, a: np.ndarray):
    if backend == "mindspore":
        import mindspore as ms

        return ms.Tensor(a)
    if backend == "paddle":
        import paddle

        return paddle.to_tensor(a)
    if backend == "jax":
        import jax.numpy as jnp

        return jnp.asarray(a)
    raise AssertionError(f"no tensor constructor for {backend} in this test")


@pytest.mark.parametrize("spec", ["multi_margin", "multiclass_hinge", "nll", "cross_entropy"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_int32_label_gives_the_int64_result(backend, spec):
    fn = getattr(importlib.import_module(f"generated.{backend}.{spec}"), spec)
    scores = _tensor(backend, SCORES.astype(np.float32))
    wide = np.asarray(fn(scores, _tensor(backend, LABELS.astype(np.int64)), reduction="none"))
    narrow = np.asarray(fn(scores, _tensor(backend, LABELS.astype(np.int32)), reduction="none"))
    assert wide.shape == (3,) and np.all(np.isfinite(wide))
    np.testing.assert_array_equal(narrow, wide)
