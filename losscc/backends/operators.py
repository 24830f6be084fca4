"""The operator interface: every key a backend's op table may spell, once.

Each :class:`Operator` names its operands (the fields of a spelling's format string),
what it computes, and, where the function is not differentiable everywhere, the
gradient the generated code must give there (the convention of docs/spec.md, "Gradients
at ties and kinks").  ``ties`` are that convention as numbers: operand values at the
ties and the gradient (or value) every backend must give, checked for each backend in
``tests/test_operators.py``.

A spelling is a Python expression over its operands' fields.  The lowering makes an
operand safe wherever the spelling puts it: one in an argument position (``f({x})``,
``f(min={lo})``) is substituted as it is; one elsewhere (``{x}.sum()``,
``{x} - lse({x})``) is parenthesised when compound; one the spelling uses twice is a
variable.  Operands ``axis``, ``shape``, ``dtype``, ``n`` and ``value`` are code for a
Python value (a negative axis, a shape tuple, a dtype, an int, a number;
:data:`VALUE_OPERANDS`); the others are tensors (``lo``/``hi`` of the clips may also be numbers).

:data:`BASE` spells the operators whose Python form serves any tensor type; a backend's
table (:func:`table`) overrides it.  :func:`table` is called when a backend module is
imported and refuses an unknown key, a missing required key, or a field that is not
one of the operator's operands, naming the backend.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

# operands that are code for Python values, not tensors: free to repeat
VALUE_OPERANDS = frozenset({"axis", "shape", "dtype", "n", "value"})


class OperatorTableError(ValueError):
    """A backend's op table does not match the operator interface."""


@dataclass(frozen=True)
class Tie:
    """The convention at one set of points: tensor operands (float ones differentiated,
    bool and int ones not), code for the other operands, and the expected gradient of the
    summed result with respect to each float operand, or the expected value."""

    tensors: Mapping[str, tuple]
    code: Mapping[str, str] = field(default_factory=dict)
    gradient: Mapping[str, tuple] = field(default_factory=dict)
    value: tuple | None = None


@dataclass(frozen=True)
class Operator:
    key: str
    operands: tuple[str, ...]
    semantics: str
    gradient: str = ""          # the convention at ties and kinks; empty: smooth where defined
    ties: tuple[Tie, ...] = ()
    optional: bool = False      # a table may leave it out: the lowering has a general form


def _op(key, operands, semantics, gradient="", ties=(), optional=False) -> Operator:
    return Operator(key, tuple(operands.split()), semantics, gradient, tuple(ties), optional)


_X = (0.0, 1.0, -1.0)  # a kink at 0 and a point on either side

OPERATORS: Mapping[str, Operator] = MappingProxyType({o.key: o for o in (
    # elementwise
    _op("exp", "x", "e ** x"),
    _op("log", "x", "natural logarithm"),
    _op("log1p", "x", "log(1 + x), accurate near 0"),
    _op("expm1", "x", "exp(x) - 1, accurate near 0"),
    _op("sqrt", "x", "square root", "inf at 0 (a kink the reference reports)"),
    _op("rsqrt", "x", "1 / sqrt(x)"),
    _op("square", "x", "x ** 2 (instruction selection for the integer power)", optional=True),
    _op("abs", "x", "absolute value", "0 at x = 0",
        [Tie({"x": _X}, gradient={"x": (0.0, 1.0, -1.0)})]),
    _op("tanh", "x", "hyperbolic tangent", "1 - tanh(x)**2, accurate in both tails",
        [Tie({"x": (0.0, 0.25, 25.0, -25.0)}, gradient={"x": (1.0, 0.940014848806378, 7.714999391855671e-22, 7.714999391855671e-22)})]),
    _op("cosh", "x", "hyperbolic cosine"),
    _op("atan", "x", "inverse tangent"),
    _op("lgamma", "x", "log of the absolute value of the gamma function"),
    _op("digamma", "x", "digamma function, the derivative of lgamma"),
    _op("trigamma", "x", "trigamma function, the derivative of digamma"),
    _op("cos", "x", "cosine"),
    _op("sin", "x", "sine"),
    _op("erf", "x", "error function"),
    _op("sigmoid", "x", "1 / (1 + exp(-x))", "sigmoid(x) sigmoid(-x), accurate in both tails",
        [Tie({"x": (0.0, 40.0, -40.0)}, gradient={"x": (0.25, 4.248354255291589e-18, 4.248354255291589e-18)})]),
    _op("softplus", "x", "log(1 + exp(x)) without overflow, accurate far below 0 too", "sigmoid(x), also at x = 0",
        [Tie({"x": _X}, gradient={"x": (0.5, 0.7310585786300049, 0.2689414213699951)})]),
    _op("softplus_nonpos", "x", "log(1 + exp(x)) for x <= 0 (the lowering proves it): no select of the sign",
        "sigmoid(x)", [Tie({"x": (0.0, -1.0, -40.0)}, gradient={"x": (0.5, 0.2689414213699951, 4.248354255291589e-18)})],
        optional=True),
    _op("maximum", "x y", "elementwise maximum of two differentiated tensors", "1/2 to each side at a tie",
        [Tie({"x": (0.0, 1.0, -1.0), "y": (0.0, 1.0, 3.0)},
             gradient={"x": (0.5, 0.5, 0.0), "y": (0.5, 0.5, 1.0)})]),
    _op("minimum", "x y", "elementwise minimum of two differentiated tensors", "1/2 to each side at a tie",
        [Tie({"x": (0.0, 1.0, -1.0), "y": (0.0, 1.0, 3.0)},
             gradient={"x": (0.5, 0.5, 1.0), "y": (0.5, 0.5, 0.0)})]),
    _op("clip", "x lo hi", "x limited to [lo, hi]", "1 to x at either bound",
        [Tie({"x": (0.0, 1.0, -1.0, 2.0, 0.5)}, {"lo": "0.0", "hi": "1.0"},
             gradient={"x": (1.0, 1.0, 0.0, 0.0, 1.0)})]),
    _op("clip_min", "x lo", "max(x, lo) against a bound no gradient flows into", "1 to x at the bound",
        [Tie({"x": _X}, {"lo": "0.0"}, gradient={"x": (1.0, 1.0, 0.0)})]),
    _op("clip_max", "x hi", "min(x, hi) against a bound no gradient flows into", "1 to x at the bound",
        [Tie({"x": _X}, {"hi": "0.0"}, gradient={"x": (1.0, 0.0, 1.0)})]),
    _op("where", "c x y", "x where c holds, else y (c a bool tensor)",
        "all to the selected branch, none to the other",
        [Tie({"c": (True, False, True), "x": (0.0, 0.0, 2.0), "y": (0.0, 0.0, 2.0)},
             gradient={"x": (1.0, 0.0, 1.0), "y": (0.0, 1.0, 0.0)})]),
    _op("and", "x y", "logical and of bool tensors"),
    _op("or", "x y", "logical or of bool tensors"),
    _op("not", "x", "logical not of a bool tensor"),
    _op("round", "x", "round half to even", "0 everywhere",
        [Tie({"x": (0.5, 1.5, -0.5, 2.5)}, value=(0.0, 2.0, -0.0, 2.0)),
         Tie({"x": (0.5, 1.5, -0.5)}, gradient={"x": (0.0, 0.0, 0.0)})]),
    _op("floor", "x", "largest integer <= x", "0 everywhere",
        [Tie({"x": (1.0, 1.5, -0.5)}, gradient={"x": (0.0, 0.0, 0.0)})]),
    _op("ceil", "x", "smallest integer >= x", "0 everywhere",
        [Tie({"x": (1.0, 1.5, -0.5)}, gradient={"x": (0.0, 0.0, 0.0)})]),
    _op("sign", "x", "-1, 0 or 1", "0 everywhere, also at 0",
        [Tie({"x": _X}, value=(0.0, 1.0, -1.0), gradient={"x": (0.0, 0.0, 0.0)})]),
    _op("stop_gradient", "x", "x, a copy", "0 everywhere",
        [Tie({"x": _X}, value=_X, gradient={"x": (0.0, 0.0, 0.0)})]),
    # over one axis (a negative position), the axis kept with size 1
    _op("sum", "x axis", "sum over the axis"),
    _op("mean", "x axis", "mean over the axis"),
    _op("amax", "x axis", "maximum over the axis", "shared evenly among the tied entries",
        [Tie({"x": ((1.0, 1.0, 0.0), (2.0, 2.0, 2.0))}, {"axis": "-1"},
             gradient={"x": ((0.5, 0.5, 0.0), (1 / 3, 1 / 3, 1 / 3))})]),
    _op("logsumexp", "x axis", "log(sum(exp(x))) over the axis, exact for any magnitude"),
    _op("softmax", "x axis", "softmax along the axis (same shape)"),
    _op("log_softmax", "x axis", "x - logsumexp(x) along the axis (same shape), accurate near 0 too"),
    _op("argmax", "x axis", "index of the maximum, int64", "no gradient; at a tie the first index",
        [Tie({"x": ((1.0, 3.0, 3.0), (2.0, 2.0, 2.0))}, {"axis": "-1"}, value=((1,), (0,)))]),
    _op("argmin", "x axis", "index of the minimum, int64", "no gradient; at a tie the first index",
        [Tie({"x": ((1.0, 0.0, 0.0), (2.0, 2.0, 2.0))}, {"axis": "-1"}, value=((1,), (0,)))]),
    # gathers: index has x's shape with size 1 on the axis (int tensor)
    _op("take_along_axis", "x axis index", "x's entries at index along the axis"),
    _op("gather_log_softmax", "x axis index", "log_softmax(x)[index] as x[index] - logsumexp(x)",
        optional=True),
    _op("lookup", "x index", "entries of x read flat (row-major) at an int tensor of positions"),
    # shapes, dtypes and constants
    _op("broadcast_to", "x shape", "x broadcast to the shape"),
    _op("reshape", "x shape", "x with the shape"),
    _op("cast", "x dtype", "x converted to the dtype"),
    _op("zeros_like", "x", "zeros of x's shape and dtype"),
    _op("full_like", "x value", "value in x's shape and dtype"),
    _op("full", "shape value dtype", "value in the shape and dtype"),
    _op("arange", "n like", "0, 1, ..., n - 1 in the integer dtype of `like` (an int32 label compares without promotion)"),
    _op("positions", "n dtype", "0, 1, ..., n - 1 in the (float) dtype"),
    _op("concat", "x y axis", "x and y joined along the axis (equal shapes elsewhere)"),
    _op("size_value", "n dtype", "an axis size as a number for float arithmetic (dtype: the computation's)"),
    _op("group_size", "n", "the number of entries of a variadic group of axes, n its sizes (a tuple)"),
    _op("sum_all", "x", "sum of every element (a 0-d tensor)"),
    _op("mean_all", "x", "mean of every element (a 0-d tensor)"),
    _op("shape", "x", "x's shape as a tuple (sizes unknown until run time as the framework reads them)"),
    _op("dtype_of", "x", "x's dtype"),
    _op("half_dtypes", "", "the tuple of 16-bit float dtypes (computed in float32)"),
    _op("float_dtypes", "", "the tuple of float dtypes a float input may have (the input checks)"),
    _op("int_dtypes", "", "the tuple of int dtypes an index may have (int32, int64)"),
    _op("float32", "", "the float32 dtype (the learnable tensors' default)"),
)})

# spellings that serve any tensor with Python's tensor methods; a backend overrides them
BASE: Mapping[str, str] = MappingProxyType({
    "size_value": "{n}",
    "group_size": "_group_size({n})",
    "sum_all": "{x}.sum()",
    "mean_all": "{x}.mean()",
    "shape": "{x}.shape",
    "dtype_of": "{x}.dtype",
})


def fields(spelling: str) -> tuple[str, ...]:
    """The operand fields a spelling reads, in order of first use."""
    out: list[str] = []
    for _, name, spec, conv in string.Formatter().parse(spelling):
        if name is None:
            continue
        if not name.isidentifier() or spec or conv:
            raise OperatorTableError(f"field {{{name}}} must be a plain name")
        if name not in out:
            out.append(name)
    return tuple(out)


# helpers of the base spellings (plain Python: every backend's generated code may hold them)
BASE_HELPERS: Mapping[str, str] = MappingProxyType({
    "group_size": '''def _group_size(sizes):
    """The number of entries of a group of axes: the product of its sizes."""
    count = 1
    for n in sizes:
        count = count * n
    return count''',
})


def table(backend: str, spellings: Mapping[str, str], helpers: Mapping[str, str] = MappingProxyType({})
          ) -> Mapping[str, str]:
    """`spellings` over :data:`BASE`, checked against :data:`OPERATORS`."""
    merged = {**BASE, **spellings}
    for key in sorted(set(merged) - set(OPERATORS)):
        raise OperatorTableError(f"backend '{backend}': unknown operator key '{key}' (not in losscc.backends.operators)")
    for key in sorted(set(helpers) - set(OPERATORS)):
        raise OperatorTableError(f"backend '{backend}': helper for unknown operator key '{key}'")
    for key, op in OPERATORS.items():
        if key not in merged:
            if not op.optional:
                raise OperatorTableError(f"backend '{backend}': missing operator key '{key}'")
            continue
        try:
            extra = [f for f in fields(merged[key]) if f not in op.operands]
        except (OperatorTableError, ValueError) as exc:
            raise OperatorTableError(f"backend '{backend}': operator '{key}': {exc}") from None
        if extra:
            raise OperatorTableError(f"backend '{backend}': operator '{key}' reads {{{extra[0]}}}, "
                                     f"not one of its operands ({', '.join(op.operands) or 'none'})")
    return MappingProxyType(merged)
