"""How numbers of the IR are written in generated code: which ones float32 holds exactly,
which divisors scale exactly, and the common factor of a sum that SymPy distributed.

Stage 5 (lowering) helpers, pure functions of SymPy numbers; :mod:`losscc.lower` decides
with them where a number becomes a tensor of the dtype (a backend that rounds Python
numbers to float32) and where a factor is taken out of a sum again.
"""

from __future__ import annotations

import math
import struct

import sympy as sp


def is_f32_exact(v: float) -> bool:
    """float32 holds v exactly (0.5, 3.0; not 0.1, not 1e40)."""
    try:
        return struct.unpack("f", struct.pack("f", v))[0] == v
    except OverflowError:
        return False


def power_of_two(v: float) -> bool:
    """|v| is 2**k: multiplying or dividing by it is exact (barring range)."""
    return v != 0 and math.isfinite(v) and math.frexp(abs(v))[0] == 0.5


def common_coefficient(e: sp.Add) -> tuple[sp.Number, list] | None:
    """(c, terms): the number c that terms of e of both signs are c or -c times (the most such
    terms; c not 1 nor a power of 2, which scale exactly), with those terms, which read a
    symbol; else None.  SymPy distributes a number over a sum (3 * (x - y) is 3*x - 3*y),
    which at x and y one float32 ulp apart is 33% off."""
    groups: dict = {}
    for t in e.args:
        c = abs(t.as_coeff_Mul()[0])
        if not t.is_number and c not in (0, 1) and (c.is_Rational or c.is_Float) and not power_of_two(float(c)):
            groups.setdefault(c, []).append(t)
    # only where the group cancels (terms of both signs): c*a + c*b loses nothing to rounding
    mixed = {c: ts for c, ts in groups.items() if len({is_negative(t) for t in ts}) == 2}
    best = max(mixed.items(), key=lambda kv: (len(kv[1]), str(kv[0])), default=None)
    return best


def factored(e: sp.Add) -> tuple[sp.Number, sp.Expr, list] | None:
    """(c, inner, rest): e is c * inner + sum(rest), inner the sum of common_coefficient's
    terms divided by c (signs kept, no float 1.0 factors); None where there is no such c."""
    common = common_coefficient(e)
    if common is None:
        return None
    c, group = common
    inner = sp.Add(*((1 if k > 0 else -1) * r for k, r in (t.as_coeff_Mul() for t in group)))
    return c, inner, [t for t in e.args if t not in group]


def is_negative(t) -> bool:
    """A term printed with a minus sign: a negative number, or a product with one."""
    if t.is_Number:
        return bool(t.is_negative)
    if isinstance(t, sp.Mul):
        c, _ = t.as_coeff_Mul()
        return bool(c.is_Number and c.is_negative)
    return False


def cancelling_pair(terms) -> tuple | None:
    """(f(a), -f(b)): a positive and a negative term of one function of one argument (log),
    which a sum adds first: where f(a) and f(b) are close their difference is exact, and
    adding a third term in between rounds it away (r + log(i) - log(t) - 1 at i = t)."""
    pos = [t for t in terms if isinstance(t, sp.Function) and len(t.args) == 1]
    for t in pos:
        for n in terms:
            m = -n
            if is_negative(n) and type(m) is type(t) and m != t:
                return t, n
    # x - max(x, axis=C) (or its stop_gradient, a mean, a logsumexp): the shift a user wrote
    # to bring x near 0 is taken first, else x - tau - max(x) rounds tau away at x = 1e16
    for t in terms:
        for n in terms:
            if is_negative(n) and not is_negative(t) and _shift_of(-n, t):
                return t, n
    return None


def _shift_of(s, t) -> bool:
    """s is a reduction of t along an axis (max, mean, logsumexp), under stop_gradient or not."""
    from . import ir

    if isinstance(s, ir.StopGradient):
        s = s.args[0]
    return isinstance(s, (ir.ReduceMax, ir.ReduceMean, ir.LogSumExp)) and s.args[0] == t
