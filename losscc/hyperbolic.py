"""tanh and cosh as IR nodes: SymPy's own, with cheap assumptions.

SymPy's ``cosh._eval_is_real``, ``_eval_is_positive`` and ``_eval_is_nonnegative`` and
``tanh._eval_is_real`` and ``_eval_is_finite`` take the argument's imaginary part modulo pi
where they cannot tell the argument is real: ``as_real_imag``, ``Mod`` and a polynomial
gcd over the whole argument, whose cost grows exponentially with nested roots
(``a_i = sqrt(cosh(a_{i-1}))`` eight deep did not parse in 120 s). Every assumption query
that reaches such a node (a power asking whether its base is positive) paid it.  These
subclasses answer from the argument's realness alone, and "unknown" otherwise; everything
else (evaluation, printing, the registry's record, ``isinstance`` checks) is SymPy's.
"""

from __future__ import annotations

import sympy as sp


def _real(f):
    return True if f.args[0].is_extended_real else None


class cosh(sp.cosh):  # noqa: N801 - SymPy's name, so that printers and the registry see cosh
    def _eval_is_real(self):
        return _real(self)

    _eval_is_positive = _eval_is_nonnegative = _eval_is_real


class tanh(sp.tanh):  # noqa: N801
    def _eval_is_real(self):
        return _real(self)

    def fdiff(self, argindex=1):  # SymPy's builds its own tanh: the forward's node is shared
        return 1 - self**2

    _eval_is_finite = _eval_is_real


__all__ = ["cosh", "tanh"]
