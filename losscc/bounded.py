"""SymPy questions about untrusted expressions, answered at a known cost.

``expand``, ``degree``, ``Poly``, ``simplify``, ``together``, ``limit`` and ``solve`` may
take exponential time or memory on a small formula (``(x + y + z + w + 1)**64``,
sums of ``tanh(y + k)**2 + 1/cosh(y + k)**2``).  The compiler asks them through the
functions here instead, whose cost is linear in the tree or capped:

* :func:`degree` -- the polynomial degree in one variable, from the tree's structure
  (``deg(a + b) = max``, ``deg(a * b) = sum``, ``deg(a**k) = k * deg(a)``), never expanding;
* :func:`is_zero` -- exact expansion only for small low-degree polynomials, otherwise
  numeric evaluation at fixed points at 40 digits (an identity test: a nonzero analytic
  expression is nonzero at generic points); ``None`` when it cannot tell;
* :func:`substitute` -- values put into a tree node by node, stopping at the first number
  beyond 1e300 (where SymPy's evaluation of the next function may not end).
"""

from __future__ import annotations

import sympy as sp

MAX_EXPAND_OPS = 80       # expressions larger than this are never expanded
MAX_EXPAND_DEGREE = 8     # nor polynomials of a higher total degree
MAX_EVAL_OPS = 400        # nor evaluated numerically
EVAL_DIGITS = 40
ZERO = 1e-25              # |value| below this at EVAL_DIGITS is zero
# values for the free symbols, two generic points inside (0, 2) (logs and roots stay real)
POINTS = ((0.7311, 1.2913, 0.4172, 1.6180, 0.9377, 1.4142, 0.5772, 1.1892),
          (1.3697, 0.6389, 1.7725, 0.8814, 1.2599, 0.4913, 1.5396, 0.7071))


def _degree(e: sp.Expr, constant, leaf, cap: int, negative_powers: bool) -> int | None:
    """Polynomial degree from the tree's structure, never expanding: constants 0, `leaf` for
    the other atoms and functions, max over a sum, sum over a product, k times for an integer
    power (negative ones too if `negative_powers`); None where undefined or above cap."""
    seen: dict = {}

    def deg(x) -> int | None:
        if x in seen:
            return seen[x]
        if constant(x):
            d = 0
        elif isinstance(x, (sp.Add, sp.Mul)):
            parts = [deg(a) for a in x.args]
            d = None if None in parts else (max(parts) if isinstance(x, sp.Add) else sum(parts))
        elif isinstance(x, sp.Pow):
            ok = x.exp.is_Integer and (negative_powers or x.exp >= 0)
            b = deg(x.base) if ok else None
            d = None if b is None else b * abs(int(x.exp))
        else:
            d = leaf(x)
        if d is not None and d > cap:
            d = None
        seen[x] = d
        return d

    return deg(e)


def degree(e: sp.Expr, var: sp.Symbol, cap: int = 64) -> int | None:
    """Degree of e as a polynomial in var, or None (not a polynomial, or above cap)."""
    return _degree(e, lambda x: not x.has(var), lambda x: 1 if x == var else None, cap, False)


def total_degree(e: sp.Expr, cap: int = MAX_EXPAND_DEGREE) -> int | None:
    """Total degree of e in all its free symbols (other subtrees count as atoms of degree
    1), or None above cap or for non-integer powers of symbolic bases."""
    return _degree(e, lambda x: not x.free_symbols, lambda x: 1, cap, True)


def has_symbolic_denominator(e: sp.Expr) -> bool:
    """Does e divide by something that depends on a symbol (a negative power of it)?"""
    return any(isinstance(n, sp.Pow) and n.exp.is_negative and n.base.free_symbols
               for n in sp.preorder_traversal(e))


MAX_MAGNITUDE = sp.Float(1e300)  # a number beyond it stops a substitution (its next function may not end)


def substitute(e: sp.Expr, values: dict) -> sp.Expr | None:
    """e with `values` put in, node by node, children first; each node that becomes a number
    is evaluated at EVAL_DIGITS at once, and None is returned as soon as one is beyond
    MAX_MAGNITUDE or cannot be evaluated.  SymPy's own substitution evaluates the whole
    tree at once: expm1 of expm1 of ... of 1.3, five deep, asks mpmath for log(2) to
    10**117000 digits and does not end; tanh of exp(exp(23)) allocates gigabytes."""
    memo: dict = {}

    def walk(n):
        got = memo.get(n)
        if got is not None:
            return got
        if n.is_Atom:
            out = values.get(n, n)
        else:
            args = tuple(walk(a) for a in n.args)
            if args == n.args:
                out = n
            elif all(isinstance(a, sp.Expr) and a.is_number for a in args) and isinstance(n, sp.Expr):
                with sp.evaluate(False):  # 9**(9**9) is not built as an exact integer
                    out = n.func(*args)
            else:
                out = n.func(*args)
            if isinstance(out, sp.Expr) and out.is_number and not out.is_Atom:
                out = sp.N(out, EVAL_DIGITS)
            if isinstance(out, sp.Expr) and out.is_number and out.is_finite:  # not zoo, NaN
                re, im = out.as_real_imag()
                if not (abs(re) <= MAX_MAGNITUDE and abs(im) <= MAX_MAGNITUDE):
                    raise OverflowError("beyond the substitution's magnitude")
        memo[n] = out
        return out

    try:
        return walk(e)
    except (TypeError, ValueError, OverflowError, ArithmeticError, RecursionError, AttributeError):
        return None


def _numeric(e: sp.Expr, point: tuple[float, ...]) -> complex | None:
    syms = sorted(e.free_symbols, key=lambda s: s.name)
    values = {s: sp.Float(point[k % len(point)] + 0.01 * (k // len(point)), EVAL_DIGITS)
              for k, s in enumerate(syms)}
    put = substitute(e, values)
    if put is None:
        return None
    try:
        v = complex(sp.N(put, EVAL_DIGITS))
    except (TypeError, ValueError, OverflowError, ArithmeticError, RecursionError):
        return None
    if v != v or abs(v) == float("inf"):
        return None
    return v


def is_zero(e: sp.Expr, numeric: bool = True) -> bool | None:
    """Is e identically zero (for every value of its symbols)?  None: cannot tell cheaply.

    With numeric=False only an exact proof counts (rewrites must be exact; a lint may
    accept the numeric identity test)."""
    if e == 0:
        return True
    if e.has(sp.nan, sp.zoo, sp.oo, -sp.oo):
        return None
    ops = sp.count_ops(e)
    if ops <= MAX_EXPAND_OPS and total_degree(e) is not None and not has_symbolic_denominator(e):
        if sp.expand(e) == 0:
            return True
    if ops > MAX_EVAL_OPS or not numeric:
        return None
    vals = [_numeric(e, p) for p in POINTS]
    if any(v is not None and abs(v) > 1e-10 for v in vals):
        return False
    if all(v is not None and abs(v) < ZERO for v in vals):
        return True
    return None


def one_sided_zero(e: sp.Expr, t: sp.Symbol, value: sp.Expr) -> bool | None:
    """Does e tend to 0 as t -> value from above?  Decided numerically (as :func:`is_zero`)
    at t = value + 1e-12 and value + 1e-24: zero when both are small and shrinking,
    nonzero when a value is large or does not shrink (it converges elsewhere or diverges)."""
    if sp.count_ops(e) > MAX_EVAL_OPS:
        return None
    verdicts = []
    for p in POINTS:
        moved = [substitute(e, {t: value + sp.Float(h, EVAL_DIGITS)}) for h in ("1e-12", "1e-24")]
        vals = [None if m is None else _numeric(m, p) for m in moved]
        if None in vals:
            return None
        a, b = (abs(v) for v in vals)
        verdicts.append(a < 1e-6 and b < 1e-6 and b <= a)
    return all(verdicts) if all(verdicts) or not any(verdicts) else None


_NOT_REAL = (sp.zoo, sp.nan, sp.oo, -sp.oo, sp.I)


def non_real(expr: sp.Expr):
    """The first constant in `expr` that is not a real number (complex infinity, NaN, an
    infinity, the imaginary unit) or not a float (beyond 1e300: `where(c, 1e30, x)**64`),
    or None; a walk of the DAG, each node once."""
    seen: set = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        if e.is_Atom:
            if any(e is c or e == c for c in _NOT_REAL) or e.is_Float and not abs(e) < MAX_MAGNITUDE:
                return e
            continue
        stack.extend(e.args)
    return None
