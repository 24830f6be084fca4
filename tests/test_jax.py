"""The JAX module's own conventions (docs/design.md, entry 34): a pure function plus a frozen
dataclass of hyperparameters, learnable tensors as arguments, hyperparameters static under
``jax.jit``, and the dtype JAX computes in when x64 is off."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from losscc import verify

jax = pytest.importorskip("jax")
jnp = jax.numpy

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT / "generated" / "jax"


def _module(name: str):
    jax.config.update("jax_enable_x64", True)  # as verify runs it (float64 cases)
    return verify.load_module(GEN / f"{name}.py", f"losscc_test_jax_{name}")


def _focal_inputs():
    rng = np.random.default_rng(0)
    return jnp.asarray(rng.normal(size=(5, 4))), jnp.asarray(np.array([0, 3, 1, 2, 3]))


def test_class_is_a_frozen_hashable_dataclass_of_the_hyperparameters():
    mod = _module("focal")
    loss = mod.Focal(gamma=3.0, reduction="sum")
    assert [f.name for f in dataclasses.fields(loss)] == ["alpha", "gamma", "reduction"]
    assert loss == mod.Focal(gamma=3.0, reduction="sum") and hash(loss) == hash(mod.Focal(gamma=3.0, reduction="sum"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        loss.gamma = 1.0
    with pytest.raises(ValueError, match="focal: gamma must be a float >= 0"):
        mod.Focal(gamma=-1.0)
    logits, label = _focal_inputs()
    expected = mod.focal(logits, label, gamma=3.0, reduction="sum")
    assert float(loss(logits, label)) == float(expected)
    # the instance is a static argument of jax.jit: a new value compiles anew, never stale
    step = jax.jit(lambda fn, x, y: fn(x, y), static_argnums=0)
    assert float(step(loss, logits, label)) == pytest.approx(float(expected), rel=1e-12)
    other = mod.Focal(gamma=0.0, reduction="sum")
    assert float(step(other, logits, label)) == pytest.approx(float(other(logits, label)), rel=1e-12)
    assert float(step(other, logits, label)) != pytest.approx(float(expected), rel=1e-6)


def test_traced_hyperparameters_are_refused_and_static_ones_work():
    mod = _module("focal")
    logits, label = _focal_inputs()
    with pytest.raises(TypeError, match="focal: gamma must be a float >= 0; received: gamma="):
        jax.jit(mod.focal)(logits, label, gamma=2.0)
    fn = jax.jit(mod.focal, static_argnames=("alpha", "gamma", "reduction"))
    assert float(fn(logits, label, gamma=2.0)) == pytest.approx(float(mod.focal(logits, label, gamma=2.0)), rel=1e-12)


def test_learnable_tensors_are_arguments_with_initial_values_from_init():
    mod = _module("uncertainty_multitask")
    loss = mod.UncertaintyMultitask(reduction="sum")
    params = loss.init()
    assert set(params) == {"log_vars"}
    assert params["log_vars"].shape == (2,) and params["log_vars"].dtype == jnp.float32
    assert loss.init(jnp.float64)["log_vars"].dtype == jnp.float64
    rng = np.random.default_rng(1)
    x1, x2 = (jnp.asarray(rng.normal(size=6)) for _ in range(2))
    y1, y2 = (jnp.asarray(rng.uniform(size=6)) for _ in range(2))
    s = jnp.asarray([0.3, -0.2])
    g = jax.grad(lambda p: loss(x1, y1, x2, y2, **p))({"log_vars": s})["log_vars"]
    # d/ds_i of sum(exp(-s_i) * bce_i + s_i) = N - exp(-s_i) * sum(bce_i)
    bce = [np.asarray(jnp.sum(y * jax.nn.softplus(-x) + (1 - y) * jax.nn.softplus(x))) for x, y in ((x1, y1), (x2, y2))]
    np.testing.assert_allclose(np.asarray(g), [6 - np.exp(-0.3) * bce[0], 6 - np.exp(0.2) * bce[1]], rtol=1e-12)


_NO_X64 = """
import json, sys, warnings
import numpy as np
sys.path.insert(0, {gen!r})
warnings.simplefilter("error")  # the generated code itself warns about nothing
import jax, jax.numpy as jnp
import focal, huber
logits = np.random.default_rng(0).normal(size=(5, 4))
label = np.array([0, 3, 1, 2, 3])
out = {{"x64": bool(jax.config.jax_enable_x64),
       "focal": str(focal.focal(logits, label).dtype),
       "focal_jit": str(jax.jit(focal.Focal())(logits, label).dtype),
       "huber": str(huber.huber(logits, logits[::-1]).dtype),
       "grad": str(jax.grad(focal.Focal())(jnp.asarray(logits, jnp.float32), label).dtype)}}
print(json.dumps(out))
"""


def test_without_x64_float64_inputs_compute_in_float32():
    """JAX's own rule, applied by the generated code without a warning; nothing else changes."""
    env = {k: v for k, v in __import__("os").environ.items() if k != "JAX_ENABLE_X64"}
    r = subprocess.run([sys.executable, "-c", _NO_X64.format(gen=str(GEN))], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"x64": False, "focal": "float32", "focal_jit": "float32", "huber": "float32",
                   "grad": "float32"}
