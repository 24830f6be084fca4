"""What the declared domains prove about an IR value: positive, non-negative, bounded.

:class:`Ranges` answers for one program, memoised per node, so a shared subtree is
analysed once.  It dispatches on the node's type by method, as SymPy's printers do: the
facts of a node of class ``K`` come from ``_range_K`` (the first such method along the
class's MRO), except that a node built by a formula function takes them from that
function's registry record (:mod:`losscc.functions`, its ``range``), through
:func:`function_range`.  The analysis is small on purpose: it proves what the guards need
(``log`` of a positive value, ``exp`` of a bounded one) and answers "not known" otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from . import functions, ir

BOUND = 50  # |value| at most this is "bounded": exp(value) and value**4 stay finite in float32


@dataclass(frozen=True)
class Facts:
    """What is proved about a value for every input the declared domains allow."""

    positive: bool = False   # > 0 (and finite)
    nonneg: bool = False     # >= 0
    bounded: bool = False    # |value| <= BOUND
    tight: bool = False      # > 0 over the reals, by a margin the dtype may round away


def facts(positive: bool = False, nonneg: bool = False, bounded: bool = False, tight: bool = False) -> Facts:
    """Facts with the implication positive -> non-negative applied."""
    return Facts(bool(positive), bool(positive or nonneg), bool(bounded), bool(tight) and not positive)


NOTHING = Facts()

def _holds(mode: str, prop: str, e, of) -> bool:
    """Whether property `prop` of node `e` holds under its record's `mode` (functions.FACTS)."""
    if mode == "yes":
        return True
    if mode == "arg":
        return getattr(of(e.args[0]), prop)
    if mode == "all":
        return all(getattr(of(a), prop) for a in e.args)
    if mode == "any":
        return any(getattr(of(a), prop) for a in e.args)
    if mode == "lo":
        return getattr(of(e.args[1]), prop)
    if mode == "branches":
        return all(getattr(of(p.expr), prop) for p in e.args)
    if mode == "numbers":
        return all(b.is_Number and abs(float(b)) <= BOUND for b in e.args[1:])
    return False  # "no"


def function_range(e, of) -> Facts | None:
    """The facts of node `e` built by a formula function, from its registry record's range
    modes and `of` (the facts of an argument); None when no record gives `e` its facts.
    The one place that knows what a function's value is."""
    record = functions.of_node(e)
    if record is None or record.range is None:
        return None
    modes = record.range
    return facts(*(_holds(getattr(modes, prop), prop, e, of) for prop in ("positive", "nonneg", "bounded")))


def _symbol_facts(spec) -> dict[str, Facts]:
    """Facts of the parameters (from their bounds) and the inputs (from their domains)."""
    out: dict[str, Facts] = {}
    for i in spec.inputs:
        d = i.domain
        if d.is_set:
            out[i.name] = facts(all(v > 0 for v in d.values), all(v >= 0 for v in d.values),
                                all(abs(v) <= BOUND for v in d.values))
        else:
            lo = isinstance(d.lo, float)
            out[i.name] = facts(lo and (d.lo > 0 or (d.lo == 0 and not d.lo_closed)), lo and d.lo >= 0,
                                all(isinstance(v, float) and abs(v) <= BOUND for v in (d.lo, d.hi)))
    for p in spec.params:  # bounded: a bool, or both bounds given and within BOUND
        both = p.min is not None and p.max is not None and max(abs(p.min), abs(p.max)) <= BOUND
        out[p.name] = facts(p.positive, p.nonnegative, p.kind == "bool" or both)
    return out


def _symbol_bounds(spec) -> dict[str, tuple]:
    """(lower, upper) bounds of the float inputs (their domains) and parameters (min/max),
    each a (value, strict) pair or None: `gt: 1` is (1.0, True), a bound never attained."""
    out: dict = {}
    for i in spec.inputs:
        d = i.domain
        if d.is_set:
            out[i.name] = ((min(d.values), False), (max(d.values), False))
        else:
            out[i.name] = tuple((v, not closed) if isinstance(v, float) else None
                                for v, closed in ((d.lo, d.lo_closed), (d.hi, d.hi_closed)))
    for p in spec.params:
        if p.kind != "bool":
            out[p.name] = (None if p.min is None else (p.min, p.min_open),
                           None if p.max is None else (p.max, p.max_open))
    return out


class Ranges:
    """Range facts of the IR values of one program (memoised; the program is not changed)."""

    _methods: dict[type, str] = {}

    def __init__(self, prog):
        self.prog = prog
        self._symbols = _symbol_facts(prog.spec) if prog is not None else {}
        self._bounds = _symbol_bounds(prog.spec) if prog is not None else {}
        self._memo: dict = {}

    def of(self, e: sp.Basic) -> Facts:
        got = self._memo.get(e)
        if got is None:
            got = function_range(e, self.of)
            if got is None:
                got = getattr(self, self._method(type(e)))(e)
            self._memo[e] = got
        return got

    def positive(self, e) -> bool:
        return self.of(e).positive

    def nonneg(self, e) -> bool:
        return self.of(e).nonneg

    def bounded(self, e) -> bool:
        return self.of(e).bounded

    @classmethod
    def _method(cls, kind: type) -> str:
        name = cls._methods.get(kind)
        if name is None:
            name = next(m for k in kind.__mro__ if hasattr(cls, m := f"_range_{k.__name__}"))
            cls._methods[kind] = name
        return name

    # ---------------------------------------------------------------- leaves

    def _range_Basic(self, e):
        return NOTHING

    def _range_Number(self, e):
        return facts(e.is_positive, e.is_nonnegative, e.is_finite and abs(float(e)) <= BOUND)

    def _range_Pi(self, e):
        return facts(positive=True)

    _range_Exp1 = _range_Pi

    def _range_Size(self, e):
        return facts(positive=True)

    def _range_Symbol(self, e):
        return self._symbols.get(e.name, NOTHING)

    # ---------------------------------------------------------------- arithmetic

    def _range_Add(self, e):
        parts = [self.of(a) for a in e.args]
        nonneg = all(p.nonneg for p in parts)
        if not nonneg:  # a number less the inputs it bounds: 1 - p with p in [0, 1], p - 1 with p > 1
            lo = self._linear_bound(e, -1)
            if lo is not None and lo[0] >= 0:
                # p - 1 with p > 1 is > 0, but p = 1 + 1e-8 rounds to 1 in float32: a margin
                # below 2**-20 of the terms' size (or none, by a strict bound) is "tight"
                clear = lo[0] > 2.0**-20 * lo[2]
                return facts(clear, True, all(p.bounded for p in parts), lo[0] > 0 or lo[1])
        return facts(nonneg and any(p.positive for p in parts), nonneg, all(p.bounded for p in parts))

    def _linear_bound(self, e, side: int) -> tuple[float, bool, float] | None:
        """A lower (`side` -1) or upper (+1) bound of `e` where it is a sum of numbers and
        numbers times inputs or parameters with declared bounds, as (value, strict, size):
        strict where some term's bound is never attained (`gt:`, an open interval), size the
        sum of the terms' bounds' magnitudes; None otherwise."""
        if e.is_Number:
            return (float(e), False, abs(float(e))) if e.is_finite else None
        if isinstance(e, sp.Symbol):
            b = self._bounds.get(e.name, (None, None))[side > 0]
            return None if b is None else (b[0], b[1], abs(b[0]))
        if isinstance(e, sp.Mul) and len(e.args) == 2 and e.args[0].is_Number and e.args[0].is_finite:
            c = float(e.args[0])
            b = self._linear_bound(e.args[1], side if c > 0 else -side)
            return None if b is None else (c * b[0], b[1] and c != 0, abs(c) * b[2])
        if isinstance(e, sp.Add):
            bs = [self._linear_bound(a, side) for a in e.args]
            return None if None in bs else (sum(b[0] for b in bs), any(b[1] for b in bs), sum(b[2] for b in bs))
        return None

    def _range_Mul(self, e):
        parts = [self.of(a) for a in e.args]
        return facts(all(p.positive for p in parts), all(p.nonneg for p in parts), all(p.bounded for p in parts))

    def _range_Pow(self, e):
        base, ex = self.of(e.args[0]), e.args[1]
        even = ex.is_Integer and ex.is_even
        return facts(base.positive, even or base.nonneg, ex.is_Integer and 0 <= ex <= 4 and base.bounded)

    # ---------------------------------------------------------------- tensor operators

    def _range_Function(self, e):  # a function without a registry record
        return NOTHING

    def _range_Gather(self, e):  # a gathered entry is one of the source's
        return self.of(e.args[0])

    _range_Component = _range_Gather

    # ---------------------------------------------------------------- selections

    def _range_Where(self, e):
        c, a, b = e.args
        fa, fb = self.of(a), self.of(b)
        positive = (fa.positive or self.implies_positive(c, a)) and fb.positive
        return facts(positive, fa.nonneg and fb.nonneg, fa.bounded and fb.bounded)

    def implies_positive(self, c, a) -> bool:
        """Whether condition c (a branch guard's) makes a > 0: a > x or x < a with x >= 0,
        a >= x with x > 0, or a conjunction with such a term."""
        if isinstance(c, sp.And):
            return any(self.implies_positive(t, a) for t in c.args)
        if isinstance(c, (sp.StrictGreaterThan, sp.GreaterThan)):
            big, small = c.args
        elif isinstance(c, (sp.StrictLessThan, sp.LessThan)):
            small, big = c.args
        else:
            return False
        factors = a.args if isinstance(a, sp.Mul) else (a,)
        if big not in factors or not all(self.positive(f) for f in factors if f != big):
            return False
        strict = isinstance(c, (sp.StrictGreaterThan, sp.StrictLessThan))
        return self.nonneg(small) if strict else self.positive(small)


def is_positive(e, prog) -> bool:
    """True when e > 0 for every input allowed by the declared domains (and finite)."""
    return Ranges(prog).positive(e)


def is_nonneg(e, prog) -> bool:
    """True when e >= 0 for every input allowed by the declared domains."""
    return Ranges(prog).nonneg(e)


def nonpositive(e, ranges: Ranges) -> bool:
    """True when e <= 0 wherever it is evaluated, exactly in floating point too: a number
    <= 0, -u with u >= 0, a sum of such terms, and a where whose branches are <= 0 under
    their conditions (`where(x > 0, -x, x)`, the -|x| the softplus rewrites make)."""
    if e.is_Number:
        return bool(e <= 0)
    if isinstance(e, sp.Mul) and e.args[0].is_Number and e.args[0] < 0:
        return ranges.nonneg(sp.Mul(*e.args[1:]))
    if isinstance(e, sp.Add):
        return all(nonpositive(a, ranges) for a in e.args)
    if isinstance(e, ir.Where):
        c, a, b = e.args
        return _nonpos_given(a, c, True, ranges) and _nonpos_given(b, c, False, ranges)
    return False


def _nonpos_given(e, c, holds: bool, ranges: Ranges) -> bool:
    """e <= 0 where condition `c` holds (`holds`) or fails: -u where u > k or u >= k, k >= 0;
    u where u > k or u >= k fails, k <= 0."""
    if isinstance(c, (sp.StrictLessThan, sp.LessThan)):  # k < u is u > k
        c = (sp.StrictGreaterThan if isinstance(c, sp.StrictLessThan) else sp.GreaterThan)(c.args[1], c.args[0],
                                                                                          evaluate=False)
    if isinstance(c, (sp.StrictGreaterThan, sp.GreaterThan)) and c.args[1].is_Number:
        u, k = c.args
        if holds and k >= 0 and e == -u:
            return True
        if not holds and k <= 0 and e == u:
            return True
    return nonpositive(e, ranges)


def unary_operator(e, ops, prog) -> str | None:
    """The backend operator of a function of one argument (functions.unary_op), or the
    record's form for an argument <= 0 where the backend `ops` has one and the argument is
    proved <= 0 (log1p(exp(x)) for softplus: no select of the sign)."""
    key = functions.unary_op(e)
    f = functions.of_node(e) if key is not None else None
    if f is not None and f.nonpos_op in ops and nonpositive(e.args[0], Ranges(prog)):
        return f.nonpos_op
    return key
