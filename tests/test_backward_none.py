"""Reduction `none` with an upstream gradient that differs per element, where the loss couples
its elements: a value summed over a batch axis inside the loss (a class weight [C] used in
[N, C], arcface's normalised weight [C, D] against [N, D] features) or an operator along one
(info_nce's pairwise similarities).  The gradient of such an input is sum_n dout_n * dl_n/dx,
not (sum_n dl_n/dx) * dout: the backward seeds the adjoints with dout there.  Before, arcface's
weight gradient was off by 32 with reduction none (verify takes gradients through `sum` only,
and the other tests use a uniform upstream gradient)."""

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

RNG = np.random.default_rng(7)
X, W = RNG.normal(size=(3, 4)), RNG.normal(size=(5, 4))
LABEL = np.array([0, 2, 4])
# case: (spec, arguments, the positions differentiated)
CASES = {
    "arcface": ("arcface", [X, LABEL, W], (0, 2)),
    "bce_with_logits": ("bce_with_logits", [X, 1 / (1 + np.exp(-W[:3])), None, np.abs(W[0]) + 0.5], (0, 1, 3)),
    "cross_entropy": ("cross_entropy", [RNG.normal(size=(3, 5)), LABEL, np.arange(5) + 0.5], (0, 2)),
    "info_nce": ("info_nce", [X, W[:3]], (0, 1)),
}


def _shape(name):  # of the loss with reduction none
    return (3, 4) if name == "bce_with_logits" else (3,)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_plan_seeds_none_where_the_loss_couples_its_elements(case):
    plan = backward.plan(prepare(load_spec(f"specs/{CASES[case][0]}.yaml")))
    assert plan.general.seeded is not None


def _module(backend, tmp_path, name):
    spec = dataclasses.replace(load_spec(f"specs/{name}.yaml"), backward="custom")
    path = tmp_path / f"{backend}_{name}.py"
    code = compile_spec(spec, get(backend))
    path.write_text(code, encoding="utf-8")
    mod = verify.load_module(path, f"losscc_test_none_{backend}_{name}_{tmp_path.name}")
    names = [i.name for i in spec.inputs]
    return getattr(mod, name), getattr(mod, spec.class_name)(reduction="none"), names


@pytest.mark.skipif("paddle" not in AVAILABLE, reason="paddle is not installed")
@pytest.mark.parametrize("mode", ["eager", "to_static"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_paddle_none_with_an_upstream_gradient(tmp_path, case, mode):
    import paddle

    name, args, diff = CASES[case]
    fn, cls, names = _module("paddle", tmp_path, name)
    up = paddle.to_tensor(np.random.default_rng(1).normal(size=_shape(name)))
    grads = []
    for f, kw in ((fn, {"reduction": "none"}), (cls, {})):
        if mode == "to_static":
            f = paddle.jit.to_static(f, full_graph=True)
        xs = [paddle.to_tensor(a, stop_gradient=k not in diff) if isinstance(a, np.ndarray) else a
              for k, a in enumerate(args)]
        loss = (f(**dict(zip(names, xs)), **kw) * up).sum()
        grads.append([g.numpy() for g in paddle.grad([loss], [xs[k] for k in diff])])
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
        assert np.abs(want).max() > 1e-3


@pytest.mark.skipif("mindspore" not in AVAILABLE, reason="mindspore is not installed")
@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_mindspore_none_with_an_upstream_gradient(tmp_path, case, jit):
    import mindspore as ms

    name, args, diff = CASES[case]
    fn, cell, _ = _module("mindspore", tmp_path, name)
    up = ms.Tensor(np.random.default_rng(1).normal(size=_shape(name)))
    fixed = [ms.Tensor(a) if isinstance(a, np.ndarray) else a for a in args]

    def call(f):
        def with_diff(*d):
            xs = list(fixed)
            for k, v in zip(diff, d):
                xs[k] = v
            return (f(*xs) * up).sum()
        return with_diff

    pos = tuple(range(len(diff)))
    want = ms.grad(call(lambda *xs: fn(*xs, reduction="none")), grad_position=pos)(*(fixed[k] for k in diff))
    step = ms.grad(call(cell), grad_position=pos)
    got = (ms.jit(step) if jit else step)(*(fixed[k] for k in diff))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-12, atol=1e-14)
        assert np.abs(w.asnumpy()).max() > 1e-3
