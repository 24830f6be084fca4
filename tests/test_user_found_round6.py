"""Defects a sixth trial of new users' losses found (2026-12-06): NaN gradients of a power
with a symbolic exponent in a branch not taken, log(c / u) left as written where u can be
0, and the quotient rule's cancellation in u / (u + c)."""

from __future__ import annotations

from pathlib import Path

import pytest

from losscc import verify
from losscc.pipeline import prepare
from tests.backend_util import BACKENDS
from tests.codegen_util import spec_of

POW_UNTAKEN = """
name: pow_untaken
summary: s.
inputs:
  x: {dtype: float, shape: [N]}
  t: {dtype: float, shape: [N], domain: "[0, 1]"}
formula: |
  d = abs(x)
  loss = where(d < 1, d**(3 - t), d) + where(x < 2, (x**2 + 1)**2.5, x)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_power_in_a_branch_not_taken_has_a_finite_gradient(backend):
    """d**(3 - t) at d = 1e18 is inf in float32, so its gradient in t (d**e log d) is inf,
    and the select's 0 times it NaN (adaptive wing's shape); likewise (x**2 + 1)**2.5 of a
    positive base. The branch guard covered numeric exponents below 1 only."""
    spec = spec_of(POW_UNTAKEN, "pow_untaken")
    loss = str(prepare(spec).loss)
    assert "Where(d < 1, StopGradient(d), 1)**(3 - t)" in loss.replace("Abs(x)", "d"), loss
    assert "Where(x < 2, x**2 + 1, 1)**2.5" in loss, loss
    rows = verify.run([spec], (backend,), dtypes=("float32",), modes=("eager",), root=Path("."), extreme=True)
    assert rows and all(r.ok for r in rows), [r.failures[:3] for r in rows]


LOG_C_OVER_U = """
name: log_c_over_u
summary: s.
inputs:
  x: {dtype: float, shape: [N]}
  y: {dtype: float, shape: [N]}
params:
  c: {default: 2.0, gt: 0}
formula: |
  loss = log(c / mean((x - y)**2, axis=N))
"""


def test_log_of_a_quotient_whose_denominator_can_be_zero_is_split():
    """log(c / u), u >= 0 (PSNR's core): the quotient overflows at u = 1e-40 and rounds the
    gradient away at u = 1e36, where log(c) - log(u) does not; at u = 0 both are +inf, as
    for log(1 / u), which was already split."""
    loss = str(prepare(spec_of(LOG_C_OVER_U, "log_c_over_u")).loss)
    assert loss.startswith("log(c) - log(") or "-log(" in loss and "log(c)" in loss, loss
    assert "c/" not in loss.replace(" ", ""), loss


# Paddle only: XLA on CPU flushes float32 subnormals to 0, so (1e-20)**2 is 0 and the loss
# inf; MindSpore does the same in a process that has run the backward of a power with a
# tensor exponent (docs/verify.md, "What still fails")
@pytest.mark.parametrize("backend", [b for b in BACKENDS if b.values[0] == "paddle"])
def test_log_of_a_quotient_passes_the_extreme_inputs(backend):
    """Also the code's reduced value `avg` must reach log as the tensor it is: a Python-number
    test that ignored the inputs wrapped it in a new tensor, which cut its gradient (0)."""
    rows = verify.run([spec_of(LOG_C_OVER_U, "log_c_over_u")], (backend,), dtypes=("float32",), modes=("eager",),
                      root=Path("."), extreme=True)
    assert rows and all(r.ok for r in rows), [r.failures[:3] for r in rows]


CIRCLE = """
name: circle_loss
summary: s.
inputs:
  labels: {dtype: int, shape: [N], domain: "[0, 3)"}
  emb: {dtype: float, shape: [N, D]}
params:
  gamma: {default: 80.0, gt: 0}
  margin: {default: 0.4, min: 0, max: 1}
formula: |
  z = normalize(emb, axis=D)
  s = sum(z * rename(z, N=M), axis=D)
  pos = (labels == rename(labels, N=M)) & (index(N) != index(M))
  neg = labels != rename(labels, N=M)
  ap = stop_gradient(relu(1 + margin - s))
  an = stop_gradient(relu(s + margin))
  lp = where(pos, -gamma * ap * (s - (1 - margin)), -1.0e9)
  ln = where(neg, gamma * an * (s - margin), -1.0e9)
  l = softplus(logsumexp(lp, axis=M) + logsumexp(ln, axis=M))
  loss = where(sum(where(pos, 1.0, 0.0), axis=M) > 0, l, 0.0)
"""


def test_an_ill_conditioned_gradient_passes_the_norm_wise_check_by_its_condition():
    """Circle loss at nearly parallel embeddings (the extreme suite's near tie), gamma = 80:
    the gradient's condition allows more than the norm-wise bound, which had no allowance."""
    rows = verify.run([spec_of(CIRCLE, "circle_loss")], ("paddle",), dtypes=("float32",), modes=("eager",),
                      root=Path("."), extreme=True)
    assert rows and all(r.ok for r in rows), [r.failures[:3] for r in rows]


# ---------------------------------------------------------------- trial 7 (2026-12-06)

def test_log_of_one_minus_p_plus_eps_keeps_its_eps():
    """-log(1 - p + eps) (mmdet's Gaussian focal loss) became -log1p(eps - p): in float32 eps - p
    is -1 at p = 1 and the loss inf (truth 27.63). It is log1p only where the argument is
    above -1/2, and the written sum elsewhere, numbers and the tensor first ((1 - p) + eps)."""
    spec = spec_of("""
        name: t
        summary: s.
        inputs:
          p: {dtype: float, shape: [N], domain: "[0, 1]"}
        params:
          eps: {default: 1.0e-12, gt: 0}
        formula: |
          loss = -log(1 - p + eps)
    """, "t")
    rows = verify.run([spec], ("paddle", "jax"), dtypes=("float32",), modes=("eager",), root=Path("."), extreme=True)
    assert rows and all(r.ok for r in rows), [r.failures[:3] for r in rows]


def test_one_minus_sigmoid_inside_a_longer_sum():
    """log(1 - sigmoid(x) + eps) (hand-written BCE): 1 - sigmoid(x) became sigmoid(-x) only
    in a sum of exactly two terms; at x = 20 the float32 loss was 18.42 for 18.24."""
    spec = spec_of("""
        name: t
        summary: s.
        inputs:
          x: {dtype: float, shape: [N]}
        params:
          eps: {default: 1.0e-8, gt: 0}
        formula: |
          loss = -log(1 - sigmoid(x) + eps)
    """, "t")
    assert "sigmoid(-x)" in str(prepare(spec).loss)


def test_yaml_spellings_in_a_formula_say_what_python_wants():
    """`log_target=true` in a formula was 'unknown symbol true' with no hint."""
    from losscc.errors import SpecError
    from losscc.parse import build_program
    with pytest.raises(SpecError) as info:
        build_program(spec_of("name: t\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\n"
                              "formula: |\n  loss = where(true, x, 2 * x)\n"))
    d = info.value.diagnostics[0]
    assert d.code == "E206" and "write True" in d.hint


def test_a_condition_on_hyperparameters_alone_is_no_continuity_warning():
    """where(alpha >= 0, ...) (optax's alpha=None) was W301 'discontinuous at alpha = 0': no
    gradient crosses a hyperparameter's value."""
    from losscc.lint import continuity
    from losscc.parse import build_program
    prog = build_program(spec_of("name: t\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\n"
                                 "params:\n  alpha: {default: 0.25}\nformula: |\n"
                                 "  loss = where(alpha >= 0, alpha * x**2, x)\n"))
    assert continuity(prog) == []
