"""The symbolic IR: plain SymPy expressions plus a few tensor operators.

Elementwise math is ordinary SymPy (``Add``, ``Mul``, ``Pow``, ``exp``, ``log``,
``Piecewise``, ``Min``, ``Max``, ``Abs``, ``tanh``) together with the elementwise
functions SymPy lacks (``sigmoid``, ``softplus``; ``log1p`` and ``expm1`` come
from ``sympy.codegen.cfunctions``).  Everything that is not elementwise is a
``TensorOp``: reductions over a named axis, softmax, gathers, one-hot and
``stop_gradient``.  Axes are SymPy symbols named after the spec's shape symbols.

Symbols for inputs, parameters and learnable tensors are created by the parser
with names validated as identifiers; the IR never holds spec text.
"""

from __future__ import annotations

import sympy as sp
from sympy.codegen.cfunctions import expm1, log1p

__all__ = [
    "sigmoid", "softplus", "log1p", "expm1", "Clip", "Where", "TensorOp", "ReduceSum", "ReduceMean",
    "ReduceMax", "LogSumExp", "Softmax", "LogSoftmax", "Gather", "OneHot", "StopGradient",
    "Size", "Item", "AXIS_REMOVING", "AXIS_KEEPING",
]


class sigmoid(sp.Function):  # noqa: N801 - mirrors the formula language
    """Logistic function 1 / (1 + exp(-x))."""

    nargs = 1

    def fdiff(self, argindex=1):
        s = sigmoid(self.args[0])
        return s * (1 - s)

    def _eval_rewrite_as_exp(self, x, **kwargs):
        return 1 / (1 + sp.exp(-x))


class softplus(sp.Function):  # noqa: N801
    """log(1 + exp(x)), computed without overflow."""

    nargs = 1

    def fdiff(self, argindex=1):
        return sigmoid(self.args[0])

    def _eval_rewrite_as_exp(self, x, **kwargs):
        return sp.log(1 + sp.exp(x))

    _eval_rewrite_as_log = _eval_rewrite_as_exp


class Clip(sp.Function):
    """clip(x, lo, hi): x limited to [lo, hi]; lo and hi are constants or parameters."""

    nargs = 3

    def fdiff(self, argindex=1):
        x, lo, hi = self.args
        if argindex == 1:
            return sp.Piecewise((0, x < lo), (0, x > hi), (1, True))
        return sp.Integer(0)

    def _eval_rewrite_as_Min(self, x, lo, hi, **kwargs):
        return sp.Min(sp.Max(x, lo), hi)


class Where(sp.Function):
    """where(c, a, b) made by the compiler's guards.  Unlike Piecewise, SymPy never
    simplifies it away (a guard inside a branch with the same condition is the point)."""

    nargs = 3

    def _eval_rewrite_as_Piecewise(self, c, a, b, **kwargs):
        return sp.Piecewise((a, c), (b, True))


class TensorOp(sp.Function):
    """Base of the operators that are not elementwise (never differentiated by SymPy)."""

    is_commutative = True

    def _eval_derivative(self, s):  # pragma: no cover - guarded by callers
        raise TypeError(f"{type(self).__name__} is not elementwise")


class ReduceSum(TensorOp):
    nargs = 2


class ReduceMean(TensorOp):
    nargs = 2


class ReduceMax(TensorOp):
    nargs = 2


class LogSumExp(TensorOp):
    nargs = 2


class Softmax(TensorOp):
    nargs = 2


class LogSoftmax(TensorOp):
    nargs = 2


class Gather(TensorOp):
    """Gather(x, index, axis): x taken along `axis` at integer `index`."""

    nargs = 3


class OneHot(TensorOp):
    """OneHot(index, axis): 1.0 where the position along `axis` equals index."""

    nargs = 2


class StopGradient(TensorOp):
    nargs = 1


class Size(TensorOp):
    """The size of a named axis, as a value."""

    nargs = 1


class Item(TensorOp):
    """Item(x, k): element k of a tensor whose only axis has a literal size."""

    nargs = 2


AXIS_REMOVING = (ReduceSum, ReduceMean, ReduceMax, LogSumExp)
AXIS_KEEPING = (Softmax, LogSoftmax)
