"""The symbolic backward for inputs the plan refused before (docs/backward.md): an input that
broadcasts from the left (gaussian_nll's var of one axis less than input: trailing 1s added,
its gradient summed back and reshaped to its own shape) and an input that may be a number
(softmax_focal's alpha: a tensor without a gradient, made before the custom backward's
call).  Before, these specs kept autograd with W310 ("input var broadcasts from the left or
may be a number"), and specs with several optional inputs (bce_with_logits: "more than one
optional input"; a None one is filled with its default on the general path, and its gradient
is None).  The class's gradient must equal the function's autograd, eagerly and
compiled."""

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

RNG = np.random.default_rng(11)
X, T = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
LABEL, ALPHA = np.array([1, 0, 3]), np.array([0.25, 0.5, 0.75, 1.0])
# case: (spec, arguments, the positions differentiated)
CASES = {
    "gaussian_nll-left": ("gaussian_nll", [X, T, np.array([0.5, 2.0, 1e-8])], (0, 1, 2)),  # var [N]: eps clamps one
    "gaussian_nll-one": ("gaussian_nll", [X, T, np.array([[0.5], [2.0], [1.5]])], (0, 1, 2)),
    "gaussian_nll-same": ("gaussian_nll", [X, T, np.abs(T) + 0.1], (0, 1, 2)),
    "softmax_focal-number": ("softmax_focal", [X, LABEL, 0.5], (0,)),
    "softmax_focal-tensor": ("softmax_focal", [X, LABEL, ALPHA], (0, 2)),
    "softmax_focal-none": ("softmax_focal", [X, LABEL, None], (0,)),
}
# several optional inputs: each None, given or broadcast (weight [C] against [N, C])
P = 1 / (1 + np.exp(-T))
for w_name, w in (("none", None), ("full", np.abs(X) + 0.5), ("row", ALPHA)):
    for pw_name, pw in (("none", None), ("given", ALPHA[::-1] + 0.5)):
        args = [X, P, w, pw]
        CASES[f"bce_with_logits-{w_name}-{pw_name}"] = ("bce_with_logits", args,
                                                        tuple(k for k, a in enumerate(args) if a is not None))


def _spec(name):
    return dataclasses.replace(load_spec(f"specs/{name}.yaml"), backward="custom")


@pytest.mark.parametrize("name", ["gaussian_nll", "softmax_focal", "bce_with_logits"])
def test_the_plan_covers_the_spec(name):
    plan = backward.plan(prepare(_spec(name)))
    assert isinstance(plan, backward.Plan), (name, plan)


def _module(backend, tmp_path, name):
    spec = _spec(name)
    path = tmp_path / f"{backend}_{name}.py"
    code = compile_spec(spec, get(backend))
    path.write_text(code, encoding="utf-8")
    mod = verify.load_module(path, f"losscc_test_inputs_{backend}_{name}_{tmp_path.name}")
    # called by keyword: a built-in's order may put reduction among the inputs
    return code, getattr(mod, name), getattr(mod, spec.class_name)(), [i.name for i in spec.inputs]


@pytest.mark.skipif("paddle" not in AVAILABLE, reason="paddle is not installed")
@pytest.mark.parametrize("mode", ["eager", "to_static"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_paddle_custom_backward_equals_autograd(tmp_path, case, mode):
    import paddle

    name, args, diff = CASES[case]
    code, fn, cls, names = _module("paddle", tmp_path, name)
    assert "PyLayer" in code
    grads = []
    for f in (fn, cls):
        if mode == "to_static":
            f = paddle.jit.to_static(f, full_graph=True)
        xs = [paddle.to_tensor(a, stop_gradient=k not in diff) if isinstance(a, np.ndarray) else a
              for k, a in enumerate(args)]
        loss = f(**dict(zip(names, xs)))
        grads.append([g.numpy() for g in paddle.grad([loss], [xs[k] for k in diff])])
    for got, want in zip(grads[1], grads[0]):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
        assert np.abs(want).max() > 1e-3


@pytest.mark.skipif("mindspore" not in AVAILABLE, reason="mindspore is not installed")
@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_mindspore_custom_backward_equals_autograd(tmp_path, case, jit):
    import mindspore as ms

    name, args, diff = CASES[case]
    code, fn, cell, _ = _module("mindspore", tmp_path, name)
    assert "def bprop" in code
    fixed = [ms.Tensor(a) if isinstance(a, np.ndarray) else a for a in args]

    def call(f):
        def with_diff(*d):
            xs = list(fixed)
            for k, v in zip(diff, d):
                xs[k] = v
            return f(*xs)  # MindSpore's order is the spec's (a dict of keywords is lost under ms.jit)
        return with_diff

    pos = tuple(range(len(diff)))
    want = ms.grad(call(fn), grad_position=pos)(*(fixed[k] for k in diff))
    step = ms.grad(call(cell), grad_position=pos)
    got = (ms.jit(step) if jit else step)(*(fixed[k] for k in diff))
    if len(diff) == 1:
        got, want = (got,), (want,)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-12, atol=1e-15)
        assert np.abs(w.asnumpy()).max() > 1e-3
