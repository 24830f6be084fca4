"""The log-gamma family as IR nodes: ``lgamma``, ``digamma`` and ``trigamma``.

Negative binomial and zero-inflated count likelihoods, the exact Poisson term ``log(y!)``,
and Dirichlet and Beta losses (evidential classification) are written with them.  Each is
the derivative of the one before: ``lgamma' = digamma``, ``digamma' = trigamma``, so the
symbolic backward differentiates the first two with operators every backend has; the
derivative of ``trigamma`` (a tetragamma) is not in the language, and a spec that needs it
keeps autograd (``backward: custom`` falls back with W310).

On the real line they are what the frameworks compute: ``lgamma(x) = log |Gamma(x)|``
(finite between the poles at 0, -1, -2, ..., +inf on them), ``digamma`` and ``trigamma``
of the same x.  They are SymPy Functions of their own, not SymPy's ``loggamma`` and
``polygamma``: those evaluate and expand their arguments symbolically and ask costly
assumptions of them, and ``loggamma`` is complex below 0.
"""

from __future__ import annotations

import mpmath
import sympy as sp

HUGE = mpmath.mpf(2) ** 1100  # beyond every float (functions.HUGE)


def _pole(x) -> bool:
    return x <= 0 and x == mpmath.floor(x)


def mp_lgamma(x):
    """log |Gamma(x)|, +inf at the poles and at +-infinity."""
    if mpmath.isnan(x):
        return x
    if abs(x) > HUGE or _pole(x):
        return mpmath.inf
    return mpmath.re(mpmath.loggamma(x)) if x > 0 else mpmath.log(abs(mpmath.gamma(x)))


def mp_digamma(x):
    """psi(x); -inf at 0 and NaN at the negative integers, as the frameworks' kernels."""
    if x == 0:
        return -mpmath.inf
    if mpmath.isnan(x) or _pole(x):
        return mpmath.mpf("nan")
    if abs(x) > HUGE:
        return mpmath.inf if x > 0 else mpmath.mpf("nan")
    return mpmath.digamma(x)


def mp_trigamma(x):
    """psi'(x), +inf at the poles."""
    if mpmath.isnan(x):
        return x
    if _pole(x):
        return mpmath.inf
    if abs(x) > HUGE:
        return mpmath.mpf(0) if x > 0 else mpmath.mpf("nan")
    if x < 0:  # mpmath recurs up from x one step at a time: reflect instead (no cancellation,
        # pi**2 / sin(pi x)**2 >= pi**2 > pi**2 / 6 >= psi'(1 - x); sinpi reduces x exactly)
        return mpmath.pi ** 2 / mpmath.sinpi(x) ** 2 - mpmath.polygamma(1, 1 - x)
    return mpmath.polygamma(1, x)


class _Gamma(sp.Function):
    nargs = 1
    _mp = None

    def _eval_evalf(self, prec):  # a constant argument gives a number
        x = self.args[0]
        if not x.is_number:
            return None
        with mpmath.workprec(prec + 20):
            v = type(self)._mp(x._to_mpmath(prec + 20))
        return sp.Float(v, precision=prec) if mpmath.isfinite(v) else None

    def _eval_is_extended_real(self):
        return True if self.args[0].is_extended_real else None


class lgamma(_Gamma):  # noqa: N801 - the formula language's names
    """log |Gamma(x)|."""

    _mp = staticmethod(mp_lgamma)

    def fdiff(self, argindex=1):
        return digamma(self.args[0])


class digamma(_Gamma):  # noqa: N801
    """psi(x) = d/dx log Gamma(x)."""

    _mp = staticmethod(mp_digamma)

    def fdiff(self, argindex=1):
        return trigamma(self.args[0])


class trigamma(_Gamma):  # noqa: N801
    """psi'(x), positive everywhere on the real line."""

    _mp = staticmethod(mp_trigamma)


__all__ = ["digamma", "lgamma", "mp_digamma", "mp_lgamma", "mp_trigamma", "trigamma"]
