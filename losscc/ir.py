"""The symbolic IR: plain SymPy expressions plus a few tensor operators.

Elementwise math is ordinary SymPy (``Add``, ``Mul``, ``Pow``, ``exp``, ``log``,
``Piecewise``, ``Min``, ``Max``, ``Abs``, ``tanh``, ``cosh``) together with the elementwise
functions SymPy lacks (``sigmoid``, ``softplus``; ``log1p`` and ``expm1`` come
from ``sympy.codegen.cfunctions``).  Everything that is not elementwise is a
``TensorOp``: reductions over a named axis, softmax, gathers, one-hot and
``stop_gradient``.  Axes are SymPy symbols named after the spec's shape symbols.

Symbols for inputs, parameters and learnable tensors are created by the parser
with names validated as identifiers; the IR never holds spec text.
"""

from __future__ import annotations

import math
from fractions import Fraction

import sympy as sp
from sympy.codegen.cfunctions import expm1, log1p

__all__ = [
    "sigmoid", "softplus", "log1p", "expm1", "Clip", "Where", "TensorOp", "ReduceSum", "ReduceMean",
    "ReduceMax", "LogSumExp", "Softmax", "LogSoftmax", "Gather", "Component", "OneHot", "StopGradient",
    "Size", "Item", "Index", "Rename", "Diff", "AXIS_REMOVING", "AXIS_KEEPING", "Round", "Floor", "Ceil",
    "Sign", "ArgMax", "ArgMin",
    "PIECEWISE_CONSTANT", "ARG_EXTREMA", "real_abs", "real_parts", "tree_size", "EVALUATE_NODES",
]


def real_parts(e: sp.Expr) -> sp.Expr:
    """e with re(a) -> a and im(a) -> 0: every IR value is real, but its symbols carry no
    assumptions, so SymPy evaluates Abs(exp(a)) to exp(re(a))."""
    if not e.has(sp.re, sp.im):
        return e
    e = e.replace(lambda n: isinstance(n, sp.re), lambda n: n.args[0])
    return e.replace(lambda n: isinstance(n, sp.im), lambda n: sp.S.Zero)


# Above this many tree nodes in its arguments, |x|, max and min are built without SymPy's
# evaluation: it runs signsimp and factor_terms over the whole argument, whose cost grows
# with the tree (shared subtrees counted each time), exponentially in chained bindings.
EVALUATE_NODES = 200


def tree_size(*exprs: sp.Expr) -> int:
    """Nodes of the expressions as trees (shared subtrees counted each time), in linear time."""
    memo: dict = {}

    def size(e):
        got = memo.get(e)
        if got is None:
            got = 1 + sum(size(a) for a in e.args)
            memo[e] = got
        return got

    return sum(size(e) for e in exprs)


def dag_size(*exprs: sp.Expr) -> int:
    """Distinct nodes of the expressions (each shared subtree once), in linear time."""
    seen: set = set()
    stack = list(exprs)
    while stack:
        e = stack.pop()
        if e not in seen:
            seen.add(e)
            stack.extend(e.args)
    return len(seen)


def real_abs(x: sp.Expr) -> sp.Expr:
    """|x| of a real x (abs of a positive expression is the expression)."""
    if tree_size(x) > EVALUATE_NODES:
        return sp.Abs(x, evaluate=False)
    return real_parts(sp.Abs(x))


class sigmoid(sp.Function):  # noqa: N801 - mirrors the formula language
    """Logistic function 1 / (1 + exp(-x))."""

    nargs = 1

    def fdiff(self, argindex=1):  # not s (1 - s): 1 - s cancels where s is near 1
        return sigmoid(self.args[0]) * sigmoid(-self.args[0])

    def _eval_rewrite_as_exp(self, x, **kwargs):
        return 1 / (1 + sp.exp(-x))

    def _eval_evalf(self, prec):  # constants such as sigmoid(2) are numbers
        return self.rewrite(sp.exp)._eval_evalf(prec) if self.args[0].is_number else None

    def _eval_is_extended_real(self):
        return self.args[0].is_extended_real


class softplus(sp.Function):  # noqa: N801
    """log(1 + exp(x)), computed without overflow."""

    nargs = 1

    def fdiff(self, argindex=1):
        return sigmoid(self.args[0])

    def _eval_rewrite_as_exp(self, x, **kwargs):
        return sp.log(1 + sp.exp(x))

    def _eval_evalf(self, prec):
        return self.rewrite(sp.exp)._eval_evalf(prec) if self.args[0].is_number else None

    def _eval_is_extended_real(self):
        return self.args[0].is_extended_real

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

    def _eval_evalf(self, prec):  # clip of constants, such as clip(sigmoid(1), 0, 1), is a number
        if not all(a.is_number for a in self.args):
            return None
        return sp.Min(sp.Max(self.args[0], self.args[1]), self.args[2])._eval_evalf(prec)


def on_flags(c, prog) -> bool:
    """c is a condition on boolean hyperparameters alone (a bool parameter, And/Or/Not of
    them): the generated code tests it in Python, so only the branch it picks runs."""
    spec = getattr(prog, "spec", None)
    if spec is None or not isinstance(c, (sp.Symbol, sp.And, sp.Or, sp.Not)):
        return False
    flags = {p.name for p in spec.params if p.kind == "bool"}
    return all(str(s) in flags for s in c.free_symbols)


def decided(c):
    """sp.true or sp.false for a condition without symbols or tensors that SymPy left
    unevaluated (`sigmoid(0) > 0`: losscc's functions of numbers stay symbolic), else c."""
    if not isinstance(c, (sp.Rel, sp.And, sp.Or, sp.Not)):  # also sp.true, sp.false
        return c
    if tree_size(c) > EVALUATE_NODES or c.free_symbols or c.has(TensorOp):  # free_symbols walks a DAG as a tree
        return c
    try:
        out = c.replace(lambda n: isinstance(n, sp.Function) and n.is_number and not isinstance(n, sp.Piecewise),
                        lambda n: sp.Float(n.evalf(30), 30))
        if isinstance(out, sp.Rel):  # built unevaluated (0 > 0 of a guard): evaluated now
            out = out.func(*out.args)
    except (TypeError, ValueError):  # pragma: no cover - a function SymPy cannot evaluate
        return c
    return out if out in (sp.true, sp.false) else c


class Where(sp.Function):
    """where(c, a, b) made by the compiler's guards.  Unlike Piecewise, SymPy never
    simplifies it away (a guard inside a branch with the same condition is the point).

    Commutative by declaration: SymPy derives a function's commutativity from its
    arguments, and a condition has none, so `x * where(...)` was a non-commutative product,
    hence not real, and `x * where(...) + w > 0` an invalid comparison."""

    nargs = 3
    is_commutative = True

    @classmethod
    def eval(cls, c, a, b):  # a condition decided where a default or a range was substituted
        c = decided(c)
        if c is sp.true:
            return a
        if c is sp.false or a == b:  # two equal branches (a rule made them equal): no select
            return b
        # a branch that is itself a select on the same condition takes only its own side: the
        # other is never chosen (nor differentiated), and a rule that keeps the written form in
        # its far branch (relative-difference) stays a fixpoint when it runs again
        if isinstance(b, Where) and b.args[0] == c:
            return cls(c, a, b.args[2])
        if isinstance(a, Where) and a.args[0] == c:
            return cls(c, a.args[1], b)
        return None

    def _eval_rewrite_as_Piecewise(self, c, a, b, **kwargs):
        return sp.Piecewise((a, c), (b, True))


class _PiecewiseConstant(sp.Function):
    """Elementwise functions that are constant between jumps (round, floor, ceil, sign).

    Their derivative is 0 wherever it exists, so a loss only uses them on values that
    carry no gradient (the parser enforces it).  Numbers fold exactly, so constant
    formulas stay constants; ``round`` rounds half to even, like both frameworks."""

    nargs = 1

    def fdiff(self, argindex=1):
        return sp.Integer(0)

    @classmethod
    def eval(cls, x):
        if x.is_Rational:
            return sp.Integer(cls._fold(Fraction(int(x.p), int(x.q))))
        if x.is_Float:
            return sp.Integer(cls._fold(Fraction(*map(int, sp.Rational(x).as_numer_denom()))))
        if x.is_number and x.is_real is not False:  # pi, log(2), sigmoid(2): decided at 60 digits
            v = sp.N(x, 60)
            if v.is_Float:
                return cls.eval(v)
        return None

    @staticmethod
    def _fold(v: Fraction) -> int:  # pragma: no cover - overridden
        raise NotImplementedError


class Round(_PiecewiseConstant):
    """Nearest integer, ties to even (2.5 -> 2, -0.5 -> -0)."""

    @staticmethod
    def _fold(v):
        return round(v)


class Floor(_PiecewiseConstant):
    @staticmethod
    def _fold(v):
        return math.floor(v)


class Ceil(_PiecewiseConstant):
    @staticmethod
    def _fold(v):
        return math.ceil(v)


class Sign(_PiecewiseConstant):
    """-1, 0 or 1."""

    @staticmethod
    def _fold(v):
        return (v > 0) - (v < 0)


PIECEWISE_CONSTANT = (Round, Floor, Ceil, Sign)


def is_constant(x) -> bool:
    """A number with no tensor in it: what SymPy leaves of `x - x`, `0 * x` or a substituted
    default, which no framework's reduction or gather accepts."""
    return bool(x.is_number) and not x.has(TensorOp)


class TensorOp(sp.Function):
    """Base of the operators that are not elementwise (never differentiated by SymPy).

    An operator whose `fold` is set evaluates, on a constant first argument, to the
    constant it stands for (``max(x - x, axis=C)`` is 0): at every construction, so neither
    the lowering nor a pass ever meets an operator of a number."""

    is_commutative = True
    fold = None  # (constant, *other args) -> the operator's value

    @classmethod
    def eval(cls, *args):
        if cls.fold is not None and is_constant(args[0]):
            return cls.fold(*args)
        return None

    def _eval_derivative(self, s):  # pragma: no cover - guarded by callers
        raise TypeError(f"{type(self).__name__} is not elementwise")


class ReduceSum(TensorOp):
    nargs = 2
    fold = staticmethod(lambda c, axis: c * Size(axis))


class ReduceMean(TensorOp):
    nargs = 2
    fold = staticmethod(lambda c, axis: c)


class ReduceMax(TensorOp):
    nargs = 2
    fold = staticmethod(lambda c, axis: c)


class LogSumExp(TensorOp):
    nargs = 2
    fold = staticmethod(lambda c, axis: c + sp.log(Size(axis)))


class Softmax(TensorOp):
    nargs = 2
    fold = staticmethod(lambda c, axis: 1 / Size(axis))


class LogSoftmax(TensorOp):
    nargs = 2
    fold = staticmethod(lambda c, axis: -sp.log(Size(axis)))


class Gather(TensorOp):
    """Gather(x, index, axis): x taken along `axis` at integer `index`."""

    nargs = 3
    fold = staticmethod(lambda c, index, axis: c)

    @classmethod
    def eval(cls, x, index, axis):
        if index.is_Integer:  # an argmax of a constant is 0: a fixed position, a slice
            return Component(x, index, axis)
        return super().eval(x, index, axis)


class Component(TensorOp):
    """Component(x, k, axis): entry k of x along an axis of a fixed size (``box[0]`` for
    ``shape: [N, K=4]``); the axis is removed."""

    nargs = 3
    fold = staticmethod(lambda c, k, axis: c)


class OneHot(TensorOp):
    """OneHot(index, axis): 1.0 where the position along `axis` equals index."""

    nargs = 2

    @classmethod
    def eval(cls, index, axis):
        if index.is_Integer:  # a fixed position
            return sp.Piecewise((1, sp.Eq(Index(axis), index)), (0, True))
        return None


class StopGradient(TensorOp):
    nargs = 1
    fold = staticmethod(lambda c: c)


class Size(TensorOp):
    """The size of a named axis, as a value."""

    nargs = 1


class Item(TensorOp):
    """Item(x, k): element k of a tensor whose only axis has a literal size."""

    nargs = 2


class ArgMax(TensorOp):
    """ArgMax(x, axis): the position of the largest value along `axis` (the first one at
    ties), an integer that indexes `axis`.  The axis is removed."""

    nargs = 2
    fold = staticmethod(lambda c, axis: sp.S.Zero)  # the first position of a tie


class ArgMin(TensorOp):
    """ArgMin(x, axis): as ArgMax, for the smallest value."""

    nargs = 2
    fold = staticmethod(lambda c, axis: sp.S.Zero)  # the first position of a tie


class Index(TensorOp):
    """Index(axis): the position along `axis`, 0 to size - 1, as a float without a gradient."""

    nargs = 1


class Rename(TensorOp):
    """Rename(x, old, new): x with its axis `old` called `new` (an axis of the same size)."""

    nargs = 3
    fold = staticmethod(lambda c, old, new: c)


class Diff(TensorOp):
    """Diff(x, axis): x[k + 1] - x[k] along `axis`, and 0 at the last position (same shape)."""

    nargs = 2
    fold = staticmethod(lambda c, axis: sp.S.Zero)


ARG_EXTREMA = (ArgMax, ArgMin)
AXIS_REMOVING = (ReduceSum, ReduceMean, ReduceMax, LogSumExp, ArgMax, ArgMin)
AXIS_KEEPING = (Softmax, LogSoftmax)


def opaque(cond):
    """cond with every Piecewise inside it as the compiler's Where, which SymPy leaves
    alone: a Piecewise in a condition makes SymPy piecewise_fold it, which runs
    simplify_logic and simplify (unbounded: products of 30 sigmoids took minutes).

    The walk visits each distinct node once: bindings that use a `where` three times make a
    DAG whose tree has 3**n nodes (a tree walk, SymPy's `has` and `replace`, took a minute at
    n = 15)."""
    if not isinstance(cond, sp.Basic):
        return cond
    memo: dict = {}

    def walk(n):
        done = memo.get(n)
        if done is not None:
            return done
        if not n.args:
            out = n
        else:
            args = tuple(walk(a) for a in n.args)
            if isinstance(n, sp.Piecewise):
                *pairs, (last, _) = [a.args for a in args]
                out = last
                for expr, c in reversed(pairs):
                    out = Where(c, expr, out)
            elif all(a is b for a, b in zip(args, n.args)):
                out = n
            else:
                out = n.func(*args)
        memo[n] = out
        return out

    return walk(cond)


def piecewise(*pairs) -> sp.Piecewise:
    """Piecewise((value, cond), ...) built without SymPy's evaluation, every condition
    through :func:`opaque`: a condition holding a Piecewise (log-cosh of log-cosh) made SymPy
    rewrite it to ITE, solve inequalities and simplify (minutes, or an internal error)."""
    return sp.Piecewise(*[(v, opaque(c)) for v, c in pairs], evaluate=False)


_ARITHMETIC = (sp.Symbol, sp.Number, sp.NumberSymbol, sp.Add, sp.Mul, sp.Pow, sp.Max, sp.Min, StopGradient)


def arithmetic(e) -> bool:
    """e is numbers and symbols under + * max min stop_gradient, integer powers: on Python
    numbers, a Python number (a root or a function of one is a backend's 0-d tensor)."""
    return all(isinstance(n, _ARITHMETIC) and not (n.is_Pow and not n.exp.is_Integer)
               for n in sp.preorder_traversal(e))
