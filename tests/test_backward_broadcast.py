"""The symbolic backward through a value broadcast inside the loss: a row sum used in the
row's elements (alpha / sum(alpha, axis=C), the evidential loss of Sensoy et al. written with
one_hot) gets its adjoint summed over the axis it was broadcast along.  Before, such specs
fell back to autograd with W310 ("no derivative rule for a value broadcast inside the loss",
found by fresh-loss trial 12)."""

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
from tests.codegen_util import spec_of

EDL = """
    name: edl_mse
    summary: Evidential classification, squared-error form, with one_hot.
    inputs:
      evidence: {dtype: float, shape: [N, C], domain: "[0, inf)"}
      label: {dtype: int, shape: [N], domain: "[0, C)"}
    backward: custom
    formula: |
      alpha = evidence + 1
      s = sum(alpha, axis=C)
      p = alpha / s
      y = one_hot(label, C)
      loss = sum((y - p)**2 + p * (1 - p) / (s + 1), axis=C)
"""

ROWNORM = """
    name: rownorm
    summary: A row-normalised vector against a target, and the log of the row sum.
    inputs:
      x: {dtype: float, shape: [N, D], domain: "(0, inf)"}
      t: {dtype: float, shape: [N, D]}
    backward: custom
    formula: |
      s = sum(x, axis=D)
      loss = (x / s - t)**2 + log(s) * t
"""

PAIR = """
    name: pair
    summary: An input used at its own axes and broadcast against another (arcface's pattern).
    inputs:
      x: {dtype: float, shape: [N, D]}
      w: {dtype: float, shape: [C, D]}
    backward: custom
    formula: |
      loss = sum(x * w, axis=D)**2 + sum(x, axis=D) * sum(w**2, axis=D)
"""

EVIDENCE = np.array([[0.0, 3.5, 1e-3, 20.0], [7.0, 0.25, 2.0, 0.0], [1.5, 1.5, 1.5, 1.5]])
LABEL = np.array([1, 0, 3])


@pytest.mark.parametrize("text", [EDL, ROWNORM])
def test_the_plan_covers_a_row_sum_used_in_its_row(text):
    plan = backward.plan(prepare(spec_of(text)))
    assert isinstance(plan, backward.Plan), plan


@pytest.mark.parametrize("name", ["arcface", "cosine_embedding", "multi_margin", "sigmoid_focal",
                                  "info_nce", "nt_xent", "triplet_batch_hard"])
def test_catalogue_specs_with_broadcast_values_and_renamed_axes_are_covered(name):
    """Pairwise losses rename an axis (rename(k, N=M)): its adjoint is renamed back."""
    spec = dataclasses.replace(load_spec(f"specs/{name}.yaml"), backward="custom")
    plan = backward.plan(prepare(spec))
    assert isinstance(plan, backward.Plan), (name, plan)


def _module(backend, tmp_path, text=EDL):
    spec = spec_of(text)
    path = tmp_path / f"{backend}_{spec.name}.py"
    code = compile_spec(spec, get(backend))
    path.write_text(code, encoding="utf-8")
    return code, verify.load_module(path, f"losscc_test_bcast_{backend}_{spec.name}_{tmp_path.name}")


@pytest.mark.skipif("paddle" not in AVAILABLE, reason="paddle is not installed")
def test_an_input_used_at_its_axes_and_broadcast_gets_each_use_once(tmp_path):
    """x's adjoint mixes a [N, C, D] use (x * w) and a [N, D] one (sum(x, axis=D)): each
    is summed to x's own axes before they add (else the second counts C times)."""
    import paddle

    code, mod = _module("paddle", tmp_path, PAIR)
    rng = np.random.default_rng(3)
    grads = []
    for f in (mod.pair, mod.Pair()):
        x = paddle.to_tensor(rng.normal(size=(2, 3)), stop_gradient=False)
        w = paddle.to_tensor(rng.normal(size=(4, 3)), stop_gradient=False)
        grads.append([g.numpy() for g in paddle.grad([f(x, w)], [x, w])])
        rng = np.random.default_rng(3)
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


@pytest.mark.skipif("paddle" not in AVAILABLE, reason="paddle is not installed")
@pytest.mark.parametrize("mode", ["eager", "to_static"])
def test_paddle_custom_backward_equals_autograd(tmp_path, mode):
    import paddle

    code, mod = _module("paddle", tmp_path)
    assert "PyLayer" in code
    grads = []
    for f in (mod.edl_mse, mod.EdlMse()):
        if mode == "to_static":
            f = paddle.jit.to_static(f, full_graph=True)
        e = paddle.to_tensor(EVIDENCE, stop_gradient=False)
        (g,) = paddle.grad([f(e, paddle.to_tensor(LABEL))], [e])
        grads.append(g.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12, atol=1e-15)
    assert np.abs(grads[0]).max() > 1e-3


@pytest.mark.skipif("mindspore" not in AVAILABLE, reason="mindspore is not installed")
@pytest.mark.parametrize("jit", [False, True])
def test_mindspore_custom_backward_equals_autograd(tmp_path, jit):
    import mindspore as ms

    code, mod = _module("mindspore", tmp_path)
    assert "def bprop" in code
    cell = mod.EdlMse()
    label = ms.Tensor(LABEL)

    def by_function(e):
        return mod.edl_mse(e, label)

    def by_class(e):
        return cell(e, label)

    want = ms.grad(by_function)(ms.Tensor(EVIDENCE)).asnumpy()
    step = ms.jit(ms.grad(by_class)) if jit else ms.grad(by_class)
    got = step(ms.Tensor(EVIDENCE)).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
