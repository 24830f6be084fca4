"""Pairs of one batch and neighbours along an axis: the merged axis order, rename(x, N=M),
index(C) and diff(x, axis=C), compiled in every backend and compared with the reference
(values and gradients of every reduction) and with NumPy; a batch whose two views differ in
size is refused by the framework, not broadcast."""

import importlib

import numpy as np
import pytest
from tests.backend_util import BACKENDS
from tests.codegen_util import case, check, modules, spec_of

from losscc.errors import SpecError
from losscc.parse import build_program

PAIRS = """
    name: pairs
    summary: s.
    inputs:
      z: {dtype: float, shape: [N, D]}
      label: {dtype: int, shape: [N], domain: "[0, 2)"}
      img: {dtype: float, shape: ["*B", H, W]}
      seq: {dtype: float, shape: [T, "*S"]}
    formula: |
      sim = sum(z * rename(z, N=M), axis=D)
      same = label == rename(label, N=M)
      rows = logsumexp(where(index(N) != index(M), sim, -1.0e9), axis=M) + sum(where(same, sim, 0), axis=M)
      tv = sum(sum(diff(img, axis=H)**2, axis=H), axis=W) + sum(sum(abs(diff(img, axis=W)), axis=W), axis=H)
      steps = sum(sum(where(index(T) < T - 1, exp(diff(seq, axis=T)), 0), axis=T), axis=S)
      loss = rows + sum(tv, axis=B) + steps
"""
SIZES = {"N": (3,), "D": (2,), "B": (1,), "H": (3,), "W": (2,), "T": (3,), "S": (1,)}


def _numpy(inputs) -> np.ndarray:
    z, label, img, seq = (inputs[k] for k in ("z", "label", "img", "seq"))
    sim = z @ z.T
    off = np.where(np.eye(len(z), dtype=bool), -np.inf, sim)
    top = off.max(axis=1, keepdims=True)
    rows = np.log(np.exp(off - top).sum(axis=1)) + top[:, 0] + np.where(label[:, None] == label[None], sim, 0).sum(1)
    tv = (np.diff(img, axis=-2) ** 2).sum() + np.abs(np.diff(img, axis=-1)).sum()
    steps = np.exp(np.diff(seq, axis=0)).sum()
    return rows + tv + steps


def test_the_inputs_orders_merge_and_a_renamed_axis_follows_its_source():
    two = spec_of("""
        name: two
        summary: s.
        inputs:
          query: {dtype: float, shape: [N, D]}
          key: {dtype: float, shape: [M, D]}
        formula: |
          loss = logsumexp(sum(query * key, axis=D), axis=M)
    """)
    assert build_program(two).axes == ("N", "M", "D")
    prog = build_program(spec_of(PAIRS))
    assert prog.axes == ("N", "M", "D", "B", "H", "W", "T", "S")
    assert prog.aliases == {"M": "N"}
    assert prog.typeof(prog.loss).axes == ("N",)


def test_a_renamed_axis_cannot_reduce_a_called_spec():
    with pytest.raises(SpecError) as err:
        build_program(spec_of("""
            name: calls_pairs
            summary: s.
            inputs:
              z_i: {dtype: float, shape: [N, D]}
              z_j: {dtype: float, shape: [N, D]}
            formula: |
              loss = nt_xent(z_i, z_j, reduction=none)
        """))
    assert [d.code for d in err.value.diagnostics] == ["E265"]
    assert "renames axes" in err.value.diagnostics[0].message


def test_pairs_and_neighbours_match_the_reference_and_numpy(tmp_path):
    spec = spec_of(PAIRS)
    mods = modules(spec, tmp_path)
    c = case(spec, SIZES, seed=3)
    check(spec, mods, [c])
    for backend, mod in mods.items():
        tensors = {k: np.asarray(v) for k, v in c.inputs.items()}
        got = np.asarray(mod.pairs(*[_framework(backend, tensors[k]) for k in ("z", "label", "img", "seq")],
                                   reduction="none"))
        np.testing.assert_allclose(got, _numpy(tensors), rtol=1e-12, err_msg=backend)


def _framework(backend: str, a: np.ndarray):
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_of_different_batch_sizes_are_refused(backend):
    fn = importlib.import_module(f"generated.{backend}.nt_xent").nt_xent
    rng = np.random.default_rng(0)
    z_i, z_j = (_framework(backend, rng.normal(size=(n, 4))) for n in (3, 4))
    with pytest.raises(Exception):  # the framework's reshape of z_j to N = 3 rows fails
        np.asarray(fn(z_i, z_j))
