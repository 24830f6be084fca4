"""The generated packages' registry: ``LOSSES`` (spec name -> class) and ``get_loss``.

A training script selects and configures its loss from its configuration file; the
package ``__init__`` of each backend offers that without the script importing modules.
"""

from __future__ import annotations

import importlib
import math
import re
from pathlib import Path

import numpy as np
import pytest

from tests.backend_util import BACKENDS

ROOT = Path(__file__).resolve().parent.parent
SPEC_NAMES = sorted(p.stem for p in (ROOT / "specs").glob("*.yaml"))
LOGITS = np.array([[2.0, 0.5, -1.0], [0.1, 0.2, 3.0]])
LABEL = np.array([0, 1])


def _focal_reference(gamma: float, alpha: float = 0.25) -> float:
    """Softmax focal loss, mean over the rows, in float64 NumPy."""
    z = LOGITS - LOGITS.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    lpt = logp[np.arange(len(LABEL)), LABEL]
    return float(np.mean(-alpha * (1 - np.exp(lpt)) ** gamma * lpt))


def _call(backend: str, loss) -> float:
    if backend == "mindspore":
        import mindspore as ms

        return float(loss(ms.Tensor(LOGITS), ms.Tensor(LABEL)).asnumpy())
    if backend == "paddle":
        import paddle

        return float(loss(paddle.to_tensor(LOGITS), paddle.to_tensor(LABEL)).numpy())
    if backend == "jax":
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)  # float64, as verify's runner sets it
        return float(loss(jnp.asarray(LOGITS), jnp.asarray(LABEL)))
    raise AssertionError(f"no call convention for {backend} in this test")


def _base(backend: str):
    if backend == "mindspore":
        import mindspore as ms

        return ms.nn.Cell
    if backend == "paddle":
        import paddle

        return paddle.nn.Layer
    if backend == "jax":
        return object  # a frozen dataclass of the hyperparameters (no framework base class)
    raise AssertionError(f"no framework base class for {backend} in this test")


@pytest.mark.parametrize("backend", BACKENDS)
def test_get_loss_builds_a_configured_framework_loss(backend):
    package = importlib.import_module(f"generated.{backend}")
    loss = package.get_loss("focal", gamma=3.0)
    assert isinstance(loss, _base(backend))
    assert isinstance(loss, package.LOSSES["focal"])
    assert math.isclose(_call(backend, loss), _focal_reference(3.0), rel_tol=1e-12)
    default = package.get_loss("focal")
    assert math.isclose(_call(backend, default), _focal_reference(2.0), rel_tol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_registry_lists_every_spec(backend):
    package = importlib.import_module(f"generated.{backend}")
    assert sorted(package.LOSSES) == SPEC_NAMES
    for name, cls in package.LOSSES.items():
        assert cls is getattr(importlib.import_module(f"generated.{backend}.{name}"), cls.__name__)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unknown_name_lists_close_matches(backend):
    package = importlib.import_module(f"generated.{backend}")
    with pytest.raises(ValueError, match=r"unknown loss 'focall'; did you mean 'focal'"):
        package.get_loss("focall")
    with pytest.raises(ValueError, match=re.escape("unknown loss 3 (known: " + ", ".join(SPEC_NAMES[:3]) + ", ")):
        package.get_loss(3)
    with pytest.raises(TypeError):  # a wrong hyperparameter is the class's own error
        package.get_loss("focal", gama=2.0)
