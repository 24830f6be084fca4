"""Adjoint rules for nodes that had none (docs/backward.md): an entry of a fixed-size axis
(``box[0]``, ``Component``: the IoU family) and differences along an axis (``diff``,
``Diff``: total_variation, whose adjoint is g[k - 1] - g[k] with diff's last 0 masked).
Before, these specs kept autograd with W310 ("no derivative rule for Component", "... for Diff").  The class's gradient (losscc's symbolic backward)
must equal the function's (the framework's autograd), eagerly and compiled."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from losscc import backward, verify
from losscc.backends import get
from losscc.emit import compile_spec
from losscc.pipeline import prepare
from losscc.spec import load_spec
from tests.backend_util import AVAILABLE

# boxes (x1, y1, x2, y2): overlapping, disjoint, nested, a shared edge (the where's kink)
BOXES1 = np.array([[0.0, 0.0, 2.0, 2.0], [0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 4.0, 4.0], [0.0, 0.0, 1.0, 2.0]])
BOXES2 = np.array([[1.0, 0.5, 3.0, 2.5], [2.0, 2.0, 3.0, 3.5], [1.0, 1.0, 2.0, 3.0], [1.0, 0.0, 2.0, 2.0]])
CASES = {name: ((BOXES1, BOXES2), {}) for name in ("iou_loss", "giou_loss", "diou_loss")}
# images [N, C, H, W] with equal neighbours (abs's kink at 0) and an axis of size 2
IMG = np.random.default_rng(5).normal(size=(2, 2, 3, 4)).round(1)
IMG[0, 0, 1] = IMG[0, 0, 0]
CASES["total_variation"] = ((IMG,), {})
# a quotient of axis sizes (1 / (H * W), 1 / C) in the gradient: MindSpore rounds a Python float,
# and in graph mode Python arithmetic, to float32 (3e-8 off in float64); computed as tensors
CASES["total_variation-average"] = ((IMG[:, :, :2],), {"average": True})
# a bool hyperparameter's select: the side not taken is not differentiated (log_input's log of a
# negative log-rate was 0 * nan in d/dtarget)
RATE, COUNTS = np.array([[-1.5, 0.3, 2.0], [0.0, -0.2, 1.1]]), np.array([[0.0, 1.0, 3.0], [2.0, 0.0, 1.5]])
CASES["poisson_nll"] = ((RATE, COUNTS), {})
CASES["poisson_nll-full"] = ((RATE, COUNTS), {"full": True})
CASES["multilabel_soft_margin"] = ((IMG[0, 0, :, :3], (IMG[1, 0, :, :3] > 0).astype(np.float64)), {})  # C = 3


def _spec(case):
    return dataclasses.replace(load_spec(f"specs/{case.split('-')[0]}.yaml"), backward="custom")


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_plan_covers_the_spec(name):
    plan = backward.plan(prepare(_spec(name)))
    assert isinstance(plan, backward.Plan), (name, plan)


def _module(backend, tmp_path, case):
    spec = _spec(case)
    path = tmp_path / f"{backend}_{spec.name}.py"
    code = compile_spec(spec, get(backend))
    path.write_text(code, encoding="utf-8")
    mod = verify.load_module(path, f"losscc_test_rules_{backend}_{spec.name}_{tmp_path.name}")
    kw = CASES[case][1]
    return code, (getattr(mod, spec.name), kw), (getattr(mod, spec.class_name)(**kw), {})


@pytest.mark.skipif("paddle" not in AVAILABLE, reason="paddle is not installed")
@pytest.mark.parametrize("mode", ["eager", "to_static"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_paddle_custom_backward_equals_autograd(tmp_path, name, mode):
    import paddle

    code, fn, cls = _module("paddle", tmp_path, name)
    assert "PyLayer" in code
    grads = []
    for f, kw in (fn, cls):
        if mode == "to_static":
            f = paddle.jit.to_static(f, full_graph=True)
        xs = [paddle.to_tensor(a, stop_gradient=False) for a in CASES[name][0]]
        grads.append([g.numpy() for g in paddle.grad([f(*xs, **kw)], xs)])
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
        assert np.abs(want).max() > 1e-3


@pytest.mark.skipif("mindspore" not in AVAILABLE, reason="mindspore is not installed")
@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_mindspore_custom_backward_equals_autograd(tmp_path, name, jit):
    import mindspore as ms

    code, fn, cell = _module("mindspore", tmp_path, name)
    assert "def bprop" in code
    xs = [ms.Tensor(a) for a in CASES[name][0]]
    n = len(xs)
    want = ms.grad(lambda *a: fn[0](*a, **fn[1]), grad_position=tuple(range(n)))(*xs)
    step = ms.grad(cell[0], grad_position=tuple(range(n)))
    got = (ms.jit(step) if jit else step)(*xs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-12, atol=1e-15)
        assert np.abs(w.asnumpy()).max() > 1e-3
