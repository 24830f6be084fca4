"""Stage 3: the `log-cosh` rewrite (registered in :data:`losscc.rewrites.STABILITY`, proved in
``tests/test_rewrites.py``): cosh overflows float32 beyond |x| = 89, and log(cosh(x)) written
plainly loses its relative accuracy near 0."""

from __future__ import annotations

import sympy as sp

from . import ir

LOG_COSH_CAP = 40


def log_cosh(e, ctx):
    """log(cosh(x)) -> log1p(g**2 exp(-m) / 2) + where(a > 40, a - 40, 0), with a = |x|,
    m = min(a, 40), g = expm1(m): cosh(m) - 1 = (e**m - 1)(1 - e**-m) / 2 = g**2 e**-m / 2
    exactly, every factor positive, so value and gradient (tanh m) keep their relative
    accuracy from a = 0 to 40; one form where a select between it (a < 2) and
    a + softplus(-2a) - log 2 computed both. Not g**2 / (2 g + 2): one backend's float32 gradient
    of that quotient is 2 at a = 30. The tail is a select, not a - m: below 40 the gradient
    of a - m is 1 - 1, which would add 1 to tanh(a) and take it away again, losing a tiny
    tanh(a) (0 at a = 1e-30)."""
    if isinstance(e, sp.log) and isinstance(e.args[0], sp.cosh):
        x = e.args[0].args[0]
        a = ir.real_abs(x)
        m = sp.Min(a, LOG_COSH_CAP)
        return ir.log1p(ir.expm1(m) ** 2 * sp.exp(-m) / 2) + ir.Where(sp.StrictGreaterThan(a, LOG_COSH_CAP), a - LOG_COSH_CAP, 0)
    return None
