"""Fresh-loss trial 13 (losses of optax, Keras and PyTorch written from the docs alone)."""

from __future__ import annotations

import numpy as np

from losscc.cases import extreme_cases
from losscc.pipeline import prepare
from losscc.reference import reference
from tests.codegen_util import spec_of

SPARSEMAX = """
    name: mc_sparsemax
    summary: Multiclass sparsemax loss, as optax.losses.multiclass_sparsemax_loss.
    inputs:
      scores: {dtype: float, shape: [N, C]}
      labels: {dtype: int, shape: [N], domain: "[0, C)"}
    formula: |
      zk = rename(scores, C=K)
      ge = zk >= scores
      cnt = sum(where(ge, 1.0, 0.0), axis=K)
      top = sum(where(ge, zk, 0.0), axis=K)
      tau = max((top - 1) / cnt, axis=C)
      p = relu(scores - tau)
      loss = sum(p * (scores - 0.5 * p), axis=C) - scores[labels] + 0.5
"""


def test_a_near_tie_under_a_reduction_in_a_condition_is_watched_at_the_selections_shape():
    """relu(scores - tau), tau a maximum over C of sums over K of a comparison on [N, C, K]:
    the comparison's near ties were watched with its own shape, and nudging the relu there
    broadcast the loss to [N, C, K] (`verify --extreme` ended in an internal error, exit 3)."""
    spec = spec_of(SPARSEMAX)
    prog = prepare(spec).prog
    case = next(c for c in extreme_cases(spec) if c.id == "extreme_scores_near_tie")
    ref = reference(prog, case.inputs, case.params, case.learnable, ["scores"], near_tol=16 * 2.0**-23)
    assert np.shape(ref.values["none"]) == (np.shape(case.inputs["scores"])[0],)
    assert ref.grads["scores"].shape == np.shape(case.inputs["scores"])
