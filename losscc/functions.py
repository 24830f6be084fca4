"""The registry of formula-language functions: one record per function.

Each :class:`Function` holds everything the stages need to know about one function of
the formula language: its name and arity, its typing rule (a method of the parser's
call rules, ``losscc.calls``), the IR node it builds, its reference (mpmath)
evaluation, its backend operator key(s), its range facts (used by the rewrites' range
analysis) and its doc line (``docs/spec.md``'s function list is generated from these).

A few functions are *sugar*: they build other IR (``square(x)`` is ``x**2``) and say
which in ``expands``; the stages then never see them. ``max`` and ``min`` have two
records each, the elementwise form ``max(a, b, ...)`` and the reduction ``max(x, axis=C)``.

Adding a function is one record here plus its operator: an entry in the operator
interface (``losscc/backends/operators.py``) and its spelling in every backend table;
``tests/test_functions.py`` checks that every record is complete and that the generated
function list in ``docs/spec.md`` (``python -m losscc.fundocs``) is current.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType

import mpmath
import sympy as sp

from . import gamma, hyperbolic, ir

# typing rules: methods ``rule_<name>`` of the parser's call rules
RULES = ("elementwise", "variadic", "clip", "where", "piecewise", "reduce", "keep", "one_hot",
         "stop_gradient", "piecewise_constant", "arg_extremum", "refused", "index", "rename",
         "normalize")
# range facts: how a property of the node follows from its arguments
#   yes / no: always / not known; arg: that of the first argument; all / any: of all / of any
#   argument; lo: that of the second argument (clip's lower bound); branches: of every value
#   of a Piecewise; numbers: the bounds (arguments after the first) are numbers of magnitude <= 50
FACTS = ("yes", "no", "arg", "all", "any", "lo", "branches", "numbers")
# reference evaluation by a method ``Evaluator._eval_<Node>`` (reductions, selections)
METHOD = "method"
# how a call prints in the formula language: name(args), name(x, axis=A), or a printer method
PRINTERS = ("call", "axis", "own")
# how the node lowers: one operator on its argument, or a lowering method of its own
LOWERINGS = ("unary", "own")


@dataclass(frozen=True)
class Range:
    """What the range analysis may assume of the node's value."""

    positive: str = "no"   # > 0
    nonneg: str = "no"     # >= 0
    bounded: str = "no"    # |value| <= a modest constant (no overflow in exp or small powers)


@dataclass(frozen=True)
class Function:
    """One formula-language function (one overload of max/min); see the module docstring."""

    name: str
    signature: str                    # as documented: "exp(x)", "max(x, axis=C)"
    rule: str                         # typing rule (RULES)
    doc: str                          # one line for docs/spec.md
    nargs: int | None = 1             # positional arguments; None: two or more
    axis: bool = False                # takes axis=C
    build: Callable | None = None     # IR arguments -> IR expression
    node: type | None = None          # the IR class it builds (None: sugar or refused)
    reference: Callable | str | None = None  # mpmath function of the node (elementwise) or METHOD
    ops: tuple[str, ...] = ()         # backend operator keys the lowering uses
    range: Range | None = None
    printer: str = "call"
    lowering: str = "own"
    expands: str = ""                 # sugar: the formula it stands for
    gradient: bool = True             # False: allowed only on values without a gradient
    variadic_axis: bool = False       # may reduce over a variadic group (*S)
    singular: int | None = None       # a constant argument of this value is refused (E203)
    section: str = "elementwise"      # the function list's group
    keywords: tuple[str, ...] = ()    # keyword arguments beside axis= (constants or parameters)
    exponential: bool = False         # exp(-|x|) of its argument counts next to 1: the reference
    #                                   needs |x| / 2.3 more digits (losscc.casecheck.reference_digits)
    nonpos_op: str | None = None      # the operator for an argument proved <= 0, where a backend has one


# ------------------------------------------------------------------ mpmath evaluators

def mp_log(x):
    if x == 0:
        return mpmath.mpf("-inf")
    if x < 0:
        return mpmath.mpf("nan")
    return mpmath.log(x)


def mp_log1p(x):
    return mp_log(1 + x) if x <= -1 else mpmath.log1p(x)


# beyond every float's range: exp, its relatives, tanh, erf and the periodic functions cost
# time or memory in the digits of such an argument (sin(exp(exp(exp(20)))) computed pi to
# 10**8 digits, tanh(exp(exp(23))) allocated gigabytes), and a float argument there is
# infinite, so they take the value at the infinity
HUGE = mpmath.mpf(2) ** 1100


def mp_exp(x):
    return mpmath.exp(x) if not abs(x) > HUGE else (mpmath.inf if x > 0 else mpmath.mpf(0))


def _capped(f, big):
    """f, with the value at +-infinity (`big(sign)`) beyond HUGE."""
    return lambda x: f(x) if not abs(x) > HUGE else big(1 if x > 0 else -1)


_NAN = mpmath.mpf("nan")


def mp_sigmoid(x):
    return 1 / (1 + mp_exp(-x))


def mp_softplus(x):
    return mpmath.log1p(mp_exp(x)) if x < 0 else x + mpmath.log1p(mp_exp(-x))


def _mp_round(v):  # half to even, as both frameworks' round
    return mpmath.mpf(mpmath.nint(v))


def _mp_floor(v):
    return mpmath.mpf(mpmath.floor(v))


def _mp_ceil(v):
    return mpmath.mpf(mpmath.ceil(v))


def _mp_sign(v):
    return mpmath.mpf(mpmath.sign(v))


# ------------------------------------------------------------------ the records

def _relu(x):
    # relu'(0) = 0 (torch, both frameworks' relu); max(x, 0) passes the gradient at 0 (clamp)
    return ir.Where(sp.StrictGreaterThan(x, 0), x, 0)


def _unary(name, node, ref, doc, build=None, range_=Range(), **kw) -> Function:
    return Function(name, f"{name}(x)", "elementwise", doc, build=build or node, node=node, reference=ref,
                    ops=(name,), range=range_, lowering="unary", **kw)


def _sugar(name, signature, rule, doc, build, expands, **kw) -> Function:
    return Function(name, signature, rule, doc, build=build, expands=expands, **kw)


def _reduce(name, node, op, doc, range_=Range(), rule="reduce", **kw) -> Function:
    return Function(name, f"{name}(x, axis=C)", rule, doc, axis=True, build=node, node=node,
                    reference=METHOD, ops=(op,), range=range_, printer="axis", section="axis", **kw)


def _norm(x, axis):
    return sp.sqrt(ir.ReduceSum(x**2, axis))


NORMALIZE_EPS = sp.Float(1e-12)  # PyTorch's F.normalize


def _normalize(x, axis, eps=NORMALIZE_EPS):
    return x / sp.Max(_norm(x, axis), eps, evaluate=False)


_NONNEG = Range(nonneg="yes")
_ARG = Range(positive="arg", nonneg="arg", bounded="arg")

FUNCTIONS: tuple[Function, ...] = (
    _unary("exp", sp.exp, mp_exp, "e to the power x", range_=_NONNEG, exponential=True),
    _unary("log", sp.log, mp_log, "natural logarithm (-inf at 0, nan below)", singular=0),
    _unary("log1p", ir.log1p, mp_log1p, "log(1 + x), accurate near 0", singular=-1),
    _unary("expm1", ir.expm1, _capped(mpmath.expm1, lambda s: mpmath.inf if s > 0 else -1), "exp(x) - 1, accurate near 0", exponential=True),
    _sugar("sqrt", "sqrt(x)", "elementwise", "square root (its gradient at 0 is guarded to 0)",
           sp.sqrt, "x**(1/2)", ops=("sqrt", "rsqrt")),
    _unary("abs", sp.Abs, METHOD, "absolute value; abs'(0) = 0", build=ir.real_abs,
           range_=Range(nonneg="yes", bounded="arg")),
    _unary("sigmoid", ir.sigmoid, mp_sigmoid, "1 / (1 + exp(-x))", range_=Range(nonneg="yes", bounded="yes"), exponential=True),
    _unary("softplus", ir.softplus, mp_softplus, "log(1 + exp(x)), without overflow", range_=_NONNEG, exponential=True,
           nonpos_op="softplus_nonpos"),
    _sugar("log_sigmoid", "log_sigmoid(x)", "elementwise", "log(sigmoid(x)), finite for any x",
           lambda x: -ir.softplus(-x), "-softplus(-x)", exponential=True),
    _unary("tanh", hyperbolic.tanh, _capped(mpmath.tanh, mpmath.mpf), "hyperbolic tangent", range_=Range(bounded="yes"), exponential=True),
    _unary("cosh", hyperbolic.cosh, _capped(mpmath.cosh, lambda s: mpmath.inf), "hyperbolic cosine", exponential=True),
    _unary("erf", sp.erf, _capped(mpmath.erf, mpmath.mpf), "error function, 2 / sqrt(pi) * integral of exp(-t**2) from 0 to x",
           range_=Range(bounded="yes"), exponential=True),
    _unary("atan", sp.atan, _capped(mpmath.atan, lambda s: s * mpmath.pi / 2),
           "inverse tangent, in radians between -pi/2 and pi/2 (CIoU's aspect term)",
           range_=Range(positive="arg", nonneg="arg", bounded="yes")),
    _unary("lgamma", gamma.lgamma, gamma.mp_lgamma, "log |Gamma(x)|, log((n - 1)!) at x = n (+inf at 0, -1, -2, ...)",
           singular=0),
    _unary("digamma", gamma.digamma, gamma.mp_digamma, "the derivative of lgamma(x) (-inf at 0, NaN at -1, -2, ...)",
           singular=0),
    _unary("trigamma", gamma.trigamma, gamma.mp_trigamma, "the derivative of digamma(x), > 0 (+inf at 0, -1, "
           "-2, ...); differentiable, but its derivative is no function here (backward: custom falls back)", singular=0, range_=Range(positive="yes", nonneg="yes")),
    _unary("cos", sp.cos, _capped(mpmath.cos, lambda s: _NAN), "cosine (x in radians)", range_=Range(bounded="yes")),
    _unary("sin", sp.sin, _capped(mpmath.sin, lambda s: _NAN), "sine (x in radians)", range_=Range(bounded="yes")),
    _sugar("relu", "relu(x)", "elementwise", "max(x, 0) with relu'(0) = 0; NaN gives 0 (the select, unlike torch)", _relu, "where(x > 0, x, 0)"),
    _sugar("square", "square(x)", "elementwise", "x times x", lambda x: x**2, "x**2"),
    Function("max", "max(a, b, ...)", "variadic", "largest argument; ties: see Gradients at ties and kinks",
             nargs=None, build=lambda *a: sp.Max(*a, evaluate=False), node=sp.Max, reference=METHOD,
             ops=("maximum", "clip_min"), range=Range(positive="any", nonneg="any", bounded="all")),
    Function("min", "min(a, b, ...)", "variadic", "smallest argument", nargs=None,
             build=lambda *a: sp.Min(*a, evaluate=False), node=sp.Min, reference=METHOD,
             ops=("minimum", "clip_max"), range=Range(positive="all", nonneg="all", bounded="all")),
    Function("clip", "clip(x, lo, hi)", "clip", "x limited to [lo, hi]; lo and hi are constants or parameters, "
             "lo <= hi (E225 at compile time for numbers and defaults; a ValueError from the generated "
             "`_check` at a call)",
             nargs=3, build=ir.Clip, node=ir.Clip, reference=METHOD, ops=("clip",),
             range=Range(positive="lo", nonneg="lo", bounded="numbers")),
    _sugar("where", "where(cond, a, b)", "where", "a where cond holds, else b (also `a if cond else b`)",
           None, "Piecewise((a, cond), (b, True))", nargs=3),
    Function("Piecewise", "Piecewise((a, cond), ..., (z, True))", "piecewise",
             "the value of the first pair whose condition holds; the last condition is True", nargs=None,
             node=sp.Piecewise, reference=METHOD, ops=("where",), range=Range(nonneg="branches"), printer="own"),
    _reduce("sum", ir.ReduceSum, "sum", "sum over the axis", Range(positive="arg", nonneg="arg"),
            variadic_axis=True),
    _reduce("mean", ir.ReduceMean, "mean", "mean over the axis", _ARG, variadic_axis=True),
    _reduce("max", ir.ReduceMax, "amax", "largest entry along the axis; ties share the gradient evenly", _ARG),
    _sugar("min", "min(x, axis=C)", "reduce", "smallest entry along the axis", lambda x, a: -ir.ReduceMax(-x, a),
           "-max(-x, axis=C)", axis=True, section="axis"),
    _reduce("logsumexp", ir.LogSumExp, "logsumexp", "log(sum(exp(x), axis=C)), without overflow", exponential=True),
    _reduce("softmax", ir.Softmax, "softmax", "exp(x) / sum(exp(x), axis=C); keeps the axis",
            Range(nonneg="yes", bounded="yes"), rule="keep", exponential=True),
    _reduce("log_softmax", ir.LogSoftmax, "log_softmax", "x - logsumexp(x, axis=C); keeps the axis", rule="keep", exponential=True),
    _sugar("norm", "norm(x, axis=C)", "reduce", "Euclidean (L2) norm over the axis; its gradient at a zero "
           "vector is 0 (the guard of sqrt)", _norm, "sqrt(sum(x**2, axis=C))", axis=True, section="axis",
           variadic_axis=True),
    _sugar("normalize", "normalize(x, axis=C, eps=1e-12)", "normalize",
           "x divided by its norm over the axis, at least eps (PyTorch's F.normalize); keeps the axis; "
           "eps a constant or a parameter", _normalize, "x / max(norm(x, axis=C), eps)", axis=True,
           section="axis", keywords=("eps",)),
    Function("one_hot", "one_hot(label, C)", "one_hot", "1.0 where the position along C equals the label, else 0.0",
             nargs=2, build=ir.OneHot, node=ir.OneHot, reference=METHOD, ops=("arange", "reshape", "cast"),
             range=Range(nonneg="yes", bounded="yes"), section="other"),
    Function("stop_gradient", "stop_gradient(x)", "stop_gradient", "x, with no gradient flowing through it",
             build=ir.StopGradient, node=ir.StopGradient, reference=METHOD, ops=("stop_gradient",), range=_ARG,
             section="other"),
    Function("index", "index(C)", "index", "the position along axis C (0, 1, ..., C - 1) as a float without "
             "a gradient: `index(N) == index(M)` is the diagonal of two axes", build=ir.Index, node=ir.Index,
             reference=METHOD, ops=("positions", "reshape"), range=Range(nonneg="yes"), section="pairs"),
    Function("rename", "rename(x, N=M)", "rename", "x with its axis N called M, a new axis of N's size "
             "(pairs of one tensor's entries: `sum(z * rename(z, N=M), axis=D)` is [N, M])", build=ir.Rename,
             node=ir.Rename, reference=METHOD, ops=("reshape",), range=_ARG, printer="own", section="pairs"),
    Function("diff", "diff(x, axis=C)", "keep", "x[k + 1] - x[k] along the axis, 0 at its last position "
             "(keeps the axis; the count of differences is C - 1)", axis=True, build=ir.Diff, node=ir.Diff,
             reference=METHOD, ops=("concat", "zeros_like"), range=Range(), printer="axis", section="pairs"),
    Function("round", "round(x)", "piecewise_constant", "nearest integer, ties to even (2.5 -> 2)",
             build=ir.Round, node=ir.Round, reference=_mp_round, ops=("round", "cast"), range=Range(),
             gradient=False, section="no gradient"),
    Function("floor", "floor(x)", "piecewise_constant", "largest integer <= x", build=ir.Floor, node=ir.Floor,
             reference=_mp_floor, ops=("floor", "cast"), range=Range(), gradient=False, section="no gradient"),
    Function("ceil", "ceil(x)", "piecewise_constant", "smallest integer >= x", build=ir.Ceil, node=ir.Ceil,
             reference=_mp_ceil, ops=("ceil", "cast"), range=Range(), gradient=False, section="no gradient"),
    Function("sign", "sign(x)", "piecewise_constant", "-1, 0 or 1", build=ir.Sign, node=ir.Sign,
             reference=_mp_sign, ops=("sign", "cast"), range=Range(), gradient=False, section="no gradient"),
    Function("argmax", "argmax(x, axis=C)", "arg_extremum",
             "position of the largest entry (the first at ties), an integer indexing C", axis=True,
             build=ir.ArgMax, node=ir.ArgMax, reference=METHOD, ops=("argmax", "cast"), range=Range(),
             printer="axis", gradient=False, section="no gradient"),
    Function("argmin", "argmin(x, axis=C)", "arg_extremum", "position of the smallest entry (the first at ties)",
             axis=True, build=ir.ArgMin, node=ir.ArgMin, reference=METHOD, ops=("argmin", "cast"), range=Range(),
             printer="axis", gradient=False, section="no gradient"),
    Function("sort", "sort(x)", "refused",
             "the losses that sort (the Lovasz hinge) also need a permutation gather and a cumulative "
             "sum along the axis, which the language lacks; reduce with max/min/logsumexp over the axis instead", nargs=None, gradient=False, section="refused"),
    Function("topk", "topk(x, k)", "refused",
             "its k largest values would need a new tensor axis of size k; use max(..., axis=C) "
             "for k = 1 or argmax(stop_gradient(x), axis=C) for the index", nargs=None, gradient=False,
             section="refused"),
    *(Function(name, f"{name}(x)", "refused",
               "its derivative is infinite at -1 and 1, where the cosines of normalised vectors end up; "
               "write the angle's cosine and sine instead (cos(2t) = 2c**2 - 1, sin(t) = sqrt(1 - c**2)), "
               "as arcface does", nargs=None, gradient=False, section="refused") for name in ("acos", "asin")),
    *(Function(name, f"{name}(x, axis=K)", "refused",
               "the language has no cumulative operations along an axis; a cumulative sum of x over K "
               "is sum(where(index(J) <= index(K), rename(x, K=J), 0), axis=J), J a new axis name "
               "(Wasserstein-1 between histograms)", nargs=None, gradient=False,
               section="refused") for name in ("cumsum", "cumprod")),
)


def _by_name() -> MappingProxyType:
    out: dict[str, tuple[Function, ...]] = {}
    for f in FUNCTIONS:
        out[f.name] = out.get(f.name, ()) + (f,)
    return MappingProxyType(out)


def _by_node() -> MappingProxyType:
    """Each record's node class, and SymPy's own class under losscc's cheap-assumption one
    (hyperbolic.py): SymPy builds its own (a derivative's 1 - tanh(x)**2), which must lower too."""
    out = {f.node: f for f in FUNCTIONS if f.node is not None}
    for node, f in list(out.items()):
        if isinstance(node, type) and node.__module__ == hyperbolic.__name__:
            out.setdefault(node.__mro__[1], f)
    return MappingProxyType(out)


BY_NAME = _by_name()         # name -> its records (two for max and min)
BY_NODE = _by_node()         # IR class -> the record that builds it
NAMES = frozenset(BY_NAME)   # every function name (inputs may not shadow one)
# names a call may use (the refused ones are known, but not offered as suggestions)
CALLABLE = tuple(n for n, fs in BY_NAME.items() if fs[0].rule != "refused")


def overload(name: str, axis: bool) -> Function:
    """The record that a call of `name` (with axis= or without) selects."""
    records = BY_NAME[name]
    for f in records:
        if f.axis == axis:
            return f
    return records[0]


def of_node(e) -> Function | None:
    """The record of the function that built IR node `e` (None: core syntax, or sugar)."""
    for cls in type(e).__mro__:
        f = BY_NODE.get(cls)
        if f is not None:
            return f
        if cls is sp.Basic:
            return None
    return None


def op_key(e) -> str:
    """The backend operator of node `e` (its record's first key)."""
    return of_node(e).ops[0]


def unary_op(e) -> str | None:
    """The operator of `e` when it lowers as one operator on its argument, else None."""
    f = of_node(e)
    return f.ops[0] if f is not None and f.lowering == "unary" else None
