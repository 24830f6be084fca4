"""Stage 2: formula text into the symbolic IR, with names, shapes and dtypes checked.

The formula is parsed by Python's :mod:`ast` (which only builds a tree; nothing is
evaluated) and every node is checked against a whitelist of node types and
function names before a SymPy expression is built from it by hand.  No text ever
reaches ``eval``, ``exec``, ``sympify`` or ``parse_expr``.

While building, every subexpression gets a :class:`TType` (dtype and named axes),
so shape and dtype mistakes are reported at the line and column where they occur.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import sympy as sp

from . import ir, limits
from .errors import Collector, SpecError, did_you_mean
from .spec import Binding, Spec, _clip


@dataclass(frozen=True)
class TType:
    dtype: str                       # "float", "int" or "bool"
    axes: tuple[str, ...] = ()       # named axes, in the program's global order
    literal: int = 0                 # >0: a learnable tensor with one literal-size axis
    grad: bool = False               # depends differentiably on a float input or learnable
    index_of: str | None = None      # int inputs: the axis their values index ([0, C) -> "C")


class _Fail(Exception):
    def __init__(self, node: ast.AST | None, code: str, msg: str, hint: str = ""):
        self.node, self.code, self.msg, self.hint = node, code, msg, hint


UNARY = {
    "exp": sp.exp, "log": sp.log, "log1p": ir.log1p, "expm1": ir.expm1, "sqrt": sp.sqrt,
    "abs": ir.real_abs, "sigmoid": ir.sigmoid, "softplus": ir.softplus, "tanh": sp.tanh, "cosh": sp.cosh,
    "square": lambda x: x**2,
    # relu'(0) = 0 (torch, both frameworks' relu); max(x, 0) passes the gradient at 0 (clamp)
    "relu": lambda x: ir.Where(sp.StrictGreaterThan(x, 0), x, 0),
    "log_sigmoid": lambda x: -ir.softplus(-x),
}
REDUCE = {"sum": ir.ReduceSum, "mean": ir.ReduceMean, "logsumexp": ir.LogSumExp}
KEEP = {"softmax": ir.Softmax, "log_softmax": ir.LogSoftmax}
OTHER = ("min", "max", "clip", "where", "Piecewise", "one_hot", "stop_gradient")
# Functions without a useful derivative: allowed only on values that carry no gradient
# (integer inputs, constants, parameters, anything under stop_gradient).
PIECEWISE_CONSTANT = {"round": ir.Round, "floor": ir.Floor, "ceil": ir.Ceil, "sign": ir.Sign}
ARG_EXTREMA = {"argmax": ir.ArgMax, "argmin": ir.ArgMin}
UNSUPPORTED = {
    "sort": "it would need a new tensor axis for the sorted values; reduce with max/min/logsumexp "
            "over the axis instead",
    "topk": "its k largest values would need a new tensor axis of size k; use max(..., axis=C) "
            "for k = 1 or argmax(stop_gradient(x), axis=C) for the index",
}
NON_DIFFERENTIABLE = tuple(ARG_EXTREMA) + tuple(UNSUPPORTED) + tuple(PIECEWISE_CONSTANT)
KNOWN_FUNCS = tuple(UNARY) + tuple(REDUCE) + tuple(KEEP) + OTHER + tuple(PIECEWISE_CONSTANT) + tuple(ARG_EXTREMA)
CONSTANTS = {"pi": sp.pi}


@dataclass
class Program:
    """The validated IR of one spec."""

    spec: Spec
    axes: tuple[str, ...]                    # global axis order (names without '*')
    variadic: frozenset[str]                 # axes that are variadic groups
    symbols: dict[str, sp.Symbol]            # inputs, params, learnables, axes by name
    bindings: tuple[tuple[str, sp.Expr], ...]  # user bindings, inlined
    loss: sp.Expr                            # the per-element loss, inlined
    denominators: dict[str, sp.Expr | None]  # reduction name -> per-element denominator
    types: dict[sp.Expr, TType]

    def typeof(self, expr: sp.Expr) -> TType:
        return type_of(expr, self)


def global_axes(spec: Spec, out: Collector) -> tuple[tuple[str, ...], frozenset[str]]:
    order: list[str] = []
    for inp in spec.inputs:
        for a in inp.shape:
            if a.lstrip("*") not in order:
                order.append(a.lstrip("*"))
    for inp in spec.inputs:
        names = [a.lstrip("*") for a in inp.shape]
        pos = [order.index(a) for a in names]
        if pos != sorted(pos):
            out.error(inp.loc.line, inp.loc.col, "E211",
                      f"inputs.{inp.name}.shape: axes must appear in the same order in every input "
                      f"(expected the order {', '.join(order)})")
    variadic = frozenset(a.lstrip("*") for i in spec.inputs for a in i.shape if a.startswith("*"))
    return tuple(order), variadic


def build_program(spec: Spec) -> Program:
    out = Collector(spec.path)
    axes, variadic = global_axes(spec, out)
    out.raise_if_errors()
    symbols: dict[str, sp.Symbol] = {}
    env: dict[str, tuple[sp.Expr, TType]] = {}
    for a in axes:
        symbols[a] = sp.Symbol(a)
    for inp in spec.inputs:
        s = sp.Symbol(inp.name)
        symbols[inp.name] = s
        index_of = None
        if inp.dtype == "int" and isinstance(inp.domain.hi, str) and inp.domain.lo == 0:
            index_of = inp.domain.hi
        t = TType(inp.dtype, tuple(a.lstrip("*") for a in inp.shape),
                  grad=inp.dtype == "float", index_of=index_of)
        env[inp.name] = (s, t)
    for p in spec.params:
        s = sp.Symbol(p.name)
        symbols[p.name] = s
        env[p.name] = (s, TType(p.kind))
    for lr in spec.learnable:
        s = sp.Symbol(lr.name)
        symbols[lr.name] = s
        env[lr.name] = (s, TType("float", (), literal=lr.shape[0] if lr.shape else 0, grad=True))

    types: dict[sp.Expr, TType] = {v[0]: v[1] for v in env.values()}
    conv = _Converter(spec, axes, variadic, env, types, out)
    bound: list[tuple[str, sp.Expr]] = []
    used: set[str] = set()
    later = {b.name for b in spec.bindings}
    reserved = set(env) | set(axes)
    for b in spec.bindings:
        later.discard(b.name)
        if b.name in reserved:
            out.error(b.name_loc.line, b.name_loc.col, "E144",
                      f"binding '{b.name}' has the name of an input, parameter, learnable tensor or axis")
            conv.failed.add(b.name)
            continue
        conv.current = b.name
        res = conv.binding(b, later, used)
        if res is not None:
            env[b.name] = res
            bound.append((b.name, res[0]))
        else:
            conv.failed.add(b.name)
    out.raise_if_errors()
    size = _tree_size(bound[-1][1])
    if size > limits.MAX_TREE:
        last = spec.bindings[-1]
        out.error(last.loc.line, last.loc.col, "E104",
                  f"formula exceeds the limit 'tree' ({limits.MAX_TREE} nodes after inlining the bindings)")
        out.raise_if_errors()
    clip = spec.guards.get("clip")
    if clip:
        # guards: {clip: c} limits every unbounded float input to [-c, c] (logit clipping)
        sub = {symbols[i.name]: ir.Clip(symbols[i.name], -sp.Float(clip), sp.Float(clip)) for i in spec.inputs
               if i.dtype == "float" and not i.optional and i.domain.lo is None and i.domain.hi is None
               and not i.domain.is_set}
        bound = [(n, ir.real_parts(e.xreplace(sub))) for n, e in bound]
        for old, new in sub.items():
            types[new] = types[old]
        scratch = Program(spec, axes, variadic, symbols, (), bound[-1][1], {}, types)
        for _, e in bound:
            type_of(e, scratch)
    loss_name, loss = bound[-1]
    lt = types[loss]
    last = spec.bindings[-1]
    if lt.dtype != "float":
        out.error(last.loc.line, last.loc.col, "E250",
                  f"the loss '{loss_name}' must be a float expression, not {lt.dtype}")
    elif lt.literal:
        out.error(last.loc.line, last.loc.col, "E250",
                  f"the loss '{loss_name}' still has the literal axis of a learnable tensor")
    elif not lt.grad:
        out.error(last.loc.line, last.loc.col, "E251",
                  f"the loss '{loss_name}' does not depend on any float input or learnable tensor")
    for b in spec.bindings[:-1]:
        if b.name not in used:
            out.error(b.name_loc.line, b.name_loc.col, "E142", f"binding '{b.name}' is never used")
    denominators: dict[str, sp.Expr | None] = {}
    for red in spec.reductions:
        if red.denominator is None:
            denominators[red.name] = None
            continue
        res = conv.expression(red.denominator, f"reductions.{red.name}.denominator")
        if res is None:
            continue
        expr, t = res
        if t.dtype == "bool":
            expr = sp.Piecewise((1, expr), (0, True))
            types[expr] = TType("float", t.axes)
        elif t.dtype != "float" and not (t.dtype == "int" and not t.axes):
            out.error(red.denominator.loc.line, red.denominator.loc.col, "E252",
                      f"reductions.{red.name}.denominator: must be a float expression")
            continue
        if t.axes and t.axes != lt.axes:
            out.error(red.denominator.loc.line, red.denominator.loc.col, "E252",
                      f"reductions.{red.name}.denominator: has axes [{', '.join(t.axes)}] but the loss "
                      f"has [{', '.join(lt.axes)}]; use the loss's axes or a scalar")
            continue
        denominators[red.name] = expr
    out.raise_if_errors()
    return Program(spec, axes, variadic, symbols, tuple(bound), loss, denominators, types)


def _tree_size(expr: sp.Expr) -> int:
    """Nodes of the expression as a tree (shared subtrees counted each time), in linear time."""
    return ir.tree_size(expr)


def type_of(expr: sp.Expr, prog: Program) -> TType:
    """The type of an IR expression built by rewrites (memoised in prog.types)."""
    t = prog.types.get(expr)
    if t is None:
        t = _infer(expr, prog)
        prog.types[expr] = t
    return t


def _union(axes_list, order) -> tuple[str, ...]:
    present = set().union(*axes_list) if axes_list else set()
    return tuple(a for a in order if a in present)


def _infer(expr: sp.Expr, prog: Program) -> TType:
    """Types for nodes that rewrites create; mirrors the converter's rules."""
    if expr.is_Number or expr in (sp.pi, sp.E):
        return TType("float")
    if isinstance(expr, sp.Symbol):
        if expr.name in prog.axes:
            return TType("int")
        raise KeyError(f"untyped symbol {expr}")
    if isinstance(expr, (sp.logic.boolalg.BooleanAtom,)):
        return TType("bool")
    args = [type_of(a, prog) for a in expr.args if not (isinstance(a, sp.Symbol) and a.name in prog.axes)]
    grad = any(a.grad for a in args)
    if isinstance(expr, ir.StopGradient):
        return TType("float", args[0].axes)
    if isinstance(expr, ir.PIECEWISE_CONSTANT):
        return TType("float", args[0].axes)
    if isinstance(expr, ir.ARG_EXTREMA):
        ax = expr.args[1].name
        return TType("int", tuple(a for a in args[0].axes if a != ax), index_of=ax)
    if isinstance(expr, ir.Size):
        return TType("float")
    if isinstance(expr, ir.AXIS_REMOVING):
        ax = expr.args[1].name
        return TType("float", tuple(a for a in args[0].axes if a != ax), grad=grad)
    if isinstance(expr, ir.AXIS_KEEPING):
        return TType("float", args[0].axes, grad=grad)
    if isinstance(expr, ir.Gather):
        return TType("float", args[1].axes if len(args[0].axes) > 1 else args[1].axes, grad=args[0].grad)
    if isinstance(expr, ir.OneHot):
        return TType("float", _union([args[0].axes, (expr.args[1].name,)], prog.axes))
    if isinstance(expr, ir.Item):
        return TType("float", (), grad=True)
    if isinstance(expr, (sp.Rel, sp.And, sp.Or, sp.Not, sp.ITE)):
        return TType("bool", _union([a.axes for a in args], prog.axes))
    if isinstance(expr, sp.Piecewise):
        vals = [type_of(e, prog) for e, _ in expr.args]
        conds = [type_of(c, prog) for _, c in expr.args]
        dtype = "int" if all(v.dtype == "int" for v in vals) else "float"
        return TType(dtype, _union([v.axes for v in vals] + [c.axes for c in conds], prog.axes),
                     grad=any(v.grad for v in vals))
    return TType("float", _union([a.axes for a in args], prog.axes), grad=grad)


class _Converter:
    def __init__(self, spec, axes, variadic, env, types, out: Collector):
        self.spec, self.axes, self.variadic = spec, axes, variadic
        self.env, self.types, self.out = env, types, out
        self.line = self.col = 0
        self.later: set[str] = set()
        self.used: set[str] = set()
        self.failed: set[str] = set()   # bindings that had errors: no follow-on errors for them
        self.current = ""
        self.nodes = 0
        self.frozen = 0                 # > 0 while inside stop_gradient(...)

    # ---------------------------------------------------------------- entry points
    def binding(self, b: Binding, later: set[str], used: set[str]):
        self.later, self.used = later, used
        return self.expression(b, "formula")

    def expression(self, b: Binding, where: str):
        self.line, self.col, self.where = b.loc.line, b.loc.col, where
        self.indent = b.name_loc.col - 1 if b.name_loc.line else 0  # the block's indentation
        text = b.text
        self.shift = 0
        try:
            try:
                tree = ast.parse(text, mode="eval")
            except SyntaxError:
                if "\n" not in text:
                    raise
                self.shift = 1
                tree = ast.parse("(" + text + "\n)", mode="eval")  # continuation lines
        except SyntaxError as exc:
            col = max((exc.offset or 1) - self.shift, 1)
            msg = (exc.msg or "invalid syntax").replace("'(' was never closed", "unbalanced parentheses")
            self.out.error(self.line + (exc.lineno or 1) - 1, self.col + col - 1 if (exc.lineno or 1) == 1 else col,
                           "E201", f"{where}: syntax error: {msg}")
            return None
        except (ValueError, RecursionError, MemoryError):
            self.out.error(self.line, self.col, "E201", f"{where}: cannot parse expression")
            return None
        try:
            return self.visit(tree.body, 0)
        except _Fail as f:
            if f.code == "silent":
                return None
            line, col = self.line, self.col
            if f.node is not None and hasattr(f.node, "lineno"):
                line = self.line + f.node.lineno - 1
                col = (self.col + f.node.col_offset - self.shift) if f.node.lineno == 1 else \
                    self.indent + f.node.col_offset + 1
            self.out.error(line, col, f.code, f"{where}: {f.msg}", f.hint)
            return None
        except RecursionError:
            self.out.error(self.line, self.col, "E104", f"{where}: expression nested too deeply")
            return None

    # ---------------------------------------------------------------- helpers
    def _t(self, expr, t: TType):
        self.types.setdefault(expr, t)
        return expr, self.types[expr]

    def union(self, *ts: TType) -> tuple[str, ...]:
        return _union([t.axes for t in ts], self.axes)

    def need_value(self, node, t: TType, what="operand"):
        if t.dtype == "bool":
            raise _Fail(node, "E212", f"a condition is used as a number ({what}); comparisons have no "
                        "gradient, so they may only choose between values",
                        "select with where(condition, a, b); for a 0/1 indicator write "
                        "where(condition, 1.0, 0.0), which carries no gradient")
        if t.dtype == "int" and t.axes:
            name = _name_of(node)
            raise _Fail(node, "E213", f"integer input '{name}' used as a float" if name else
                        "an integer tensor is used as a float",
                        "index with it (x[label]), compare it, or use one_hot(label, C)")
        if t.literal:
            name = _name_of(node)
            raise _Fail(node, "E214", f"learnable tensor '{name}' has shape [{t.literal}]; "
                        f"index it with a constant, e.g. {name}[0]")

    def need_bool(self, node, t: TType):
        if t.dtype != "bool":
            raise _Fail(node, "E215", "expected a condition (a comparison such as x > 0)")

    def axis_arg(self, node, t: TType, fname: str) -> str:
        if not isinstance(node, ast.Name):
            raise _Fail(node, "E216", f"{fname}: axis must be a shape symbol such as C")
        name = node.id
        if name not in self.axes:
            raise _Fail(node, "E217", f"{fname}: unknown axis '{_clip(name)}'", did_you_mean(name, self.axes))
        if name not in t.axes:
            raise _Fail(node, "E218", f"{fname}: the argument has no axis '{name}' "
                        f"(its axes: [{', '.join(t.axes)}])")
        return name

    # ---------------------------------------------------------------- visitor
    def visit(self, node: ast.AST, depth: int):
        if depth > limits.MAX_DEPTH:
            raise _Fail(node, "E104", f"expression exceeds the limit 'depth' ({limits.MAX_DEPTH})")
        self.nodes += 1
        if self.nodes > limits.MAX_NODES:
            raise _Fail(node, "E104", f"formula exceeds the limit 'nodes' ({limits.MAX_NODES})")
        method = getattr(self, "v_" + type(node).__name__, None)
        if method is None:
            raise _Fail(node, "E202", f"'{_describe(node)}' is not allowed in a formula")
        try:
            e, t = method(node, depth + 1)
        except (TypeError, ValueError, ZeroDivisionError, ArithmeticError) as exc:
            # SymPy refuses some constant combinations (e.g. comparisons with zoo)
            raise _Fail(node, "E203", f"cannot build this expression ({type(exc).__name__}: "
                        f"{str(exc).strip().splitlines()[0][:80] if str(exc).strip() else 'invalid'})") from None
        if e.is_number and not e.has(ir.TensorOp):
            _check_constant(node, e)
        if isinstance(e, sp.Pow) and e.args[1].is_Number and abs(e.args[1]) > limits.MAX_EXPONENT:
            raise _Fail(node, "E104", f"exponent exceeds the limit 'exponent' ({limits.MAX_EXPONENT})")
        return e, t

    def v_Constant(self, node, d):
        v = node.value
        if isinstance(v, bool):
            return self._t(sp.true if v else sp.false, TType("bool"))
        if isinstance(v, int):
            if abs(v) > 10**15:
                raise _Fail(node, "E203", "integer constant too large")
            return self._t(sp.Integer(v), TType("float"))
        if isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                raise _Fail(node, "E203", "constants must be finite")
            if v.is_integer() and abs(v) <= 2**53:
                return self._t(sp.Integer(int(v)), TType("float"))  # 1.0 is 1: rewrites match it
            return self._t(sp.Float(v), TType("float"))
        raise _Fail(node, "E202", f"{type(v).__name__} constants are not allowed in a formula")

    def v_Name(self, node, d):
        name = node.id
        if name in self.env:
            self.used.add(name)
            return self.env[name]
        if name in CONSTANTS:
            return self._t(CONSTANTS[name], TType("float"))
        if name in self.axes:
            return self._t(ir.Size(sp.Symbol(name)), TType("float"))
        if name in self.failed:
            raise _Fail(node, "silent", "")
        if name == self.current:
            raise _Fail(node, "E143", f"'{name}' refers to itself (a binding may only use earlier bindings)")
        if name in self.later:
            raise _Fail(node, "E143", f"'{name}' is used before it is bound "
                        "(a binding may only use earlier bindings, so cycles are impossible)")
        if name.startswith("__") or name.startswith("_"):
            raise _Fail(node, "E204", f"names starting with '_' are not allowed ('{_clip(name)}')")
        known = sorted(set(self.env) | set(self.axes))
        if name in KNOWN_FUNCS or name in NON_DIFFERENTIABLE:
            raise _Fail(node, "E205", f"function '{name}' used without calling it")
        raise _Fail(node, "E206", f"unknown symbol '{_clip(name)}' (known: {', '.join(known)})",
                    did_you_mean(name, known))

    def v_UnaryOp(self, node, d):
        e, t = self.visit(node.operand, d)
        if isinstance(node.op, ast.Not):
            self.need_bool(node.operand, t)
            return self._t(sp.Not(e), t)
        if isinstance(node.op, (ast.USub, ast.UAdd)):
            self.need_value(node.operand, t)
            return self._t(-e if isinstance(node.op, ast.USub) else e, TType("float", t.axes, grad=t.grad))
        raise _Fail(node, "E202", f"operator '{_describe(node)}' is not allowed")

    def v_BinOp(self, node, d):
        op = node.op
        le, lt = self.visit(node.left, d)
        re_, rt = self.visit(node.right, d)
        if isinstance(op, (ast.BitAnd, ast.BitOr)):
            self.need_bool(node.left, lt)
            self.need_bool(node.right, rt)
            e = sp.And(le, re_) if isinstance(op, ast.BitAnd) else sp.Or(le, re_)
            return self._t(e, TType("bool", self.union(lt, rt)))
        self.need_value(node.left, lt)
        self.need_value(node.right, rt)
        t = TType("float", self.union(lt, rt), grad=lt.grad or rt.grad)
        if isinstance(op, ast.Add):
            return self._t(le + re_, t)
        if isinstance(op, ast.Sub):
            return self._t(le - re_, t)
        if isinstance(op, ast.Mult):
            return self._t(le * re_, t)
        if isinstance(op, ast.Div):
            if _is_zero_constant(re_):
                if re_.is_zero:
                    raise _Fail(node, "E207", "division by zero")
                raise _Fail(node, "E207", "division by a constant that is zero",
                            "the denominator evaluates to 0 (below 1e-100 at 50 and at 200 digits)")
            return self._t(le / re_, t)
        if isinstance(op, ast.Pow):
            if le.is_number and re_.is_number and _magnitude_digits(le, re_) > 300:
                raise _Fail(node, "E203", "constant too large (more than 300 digits)")
            if re_.is_Number and (abs(float(re_)) > limits.MAX_EXPONENT):
                raise _Fail(node.right, "E104",
                            f"exponent exceeds the limit 'exponent' ({limits.MAX_EXPONENT})")
            if le.is_Number and not re_.is_Number:
                pass
            if le.is_number and re_.is_Number and re_.is_negative and _is_zero_constant(le):
                raise _Fail(node, "E207", "division by zero")
            return self._t(le ** re_, t)
        raise _Fail(node, "E202", f"operator '{_describe(node)}' is not allowed")

    def v_Compare(self, node, d):
        parts = [node.left] + list(node.comparators)
        vals = [self.visit(p, d) for p in parts]
        for p, (e, t) in zip(parts, vals):
            if t.dtype == "bool" or t.literal:
                raise _Fail(p, "E215", "comparison operands must be numbers or tensors")
        rels = []
        for k, op in enumerate(node.ops):
            a, b = vals[k][0], vals[k + 1][0]
            rel = {ast.Lt: sp.Lt, ast.LtE: sp.Le, ast.Gt: sp.Gt, ast.GtE: sp.Ge,
                   ast.Eq: sp.Eq, ast.NotEq: sp.Ne}.get(type(op))
            if rel is None:
                raise _Fail(node, "E202", f"comparison '{_describe(op)}' is not allowed")
            ta, tb = vals[k][1], vals[k + 1][1]
            if (ta.dtype == "int" and ta.axes or tb.dtype == "int" and tb.axes) and rel not in (sp.Eq, sp.Ne):
                raise _Fail(node, "E213", "integer tensors can only be compared with == or !=")
            if a.is_number and b.is_number:  # a constant condition is decided now
                rels.append(sp.true if _decide(rel, a, b) else sp.false)
            else:
                rels.append(rel(a, b, evaluate=False))
        e = rels[0] if len(rels) == 1 else sp.And(*rels)
        return self._t(e, TType("bool", self.union(*[t for _, t in vals])))

    def v_BoolOp(self, node, d):
        vals = [self.visit(v, d) for v in node.values]
        for v, (e, t) in zip(node.values, vals):
            self.need_bool(v, t)
        f = sp.And if isinstance(node.op, ast.And) else sp.Or
        return self._t(f(*[e for e, _ in vals]), TType("bool", self.union(*[t for _, t in vals])))

    def v_IfExp(self, node, d):
        c, ct = self.visit(node.test, d)
        a, at = self.visit(node.body, d)
        b, bt = self.visit(node.orelse, d)
        return self._where(node, (c, ct), (a, at), (b, bt), node.test, node.body, node.orelse)

    def _where(self, node, c, a, b, nc, na, nb):
        self.need_bool(nc, c[1])
        ints = a[1].dtype == "int" and b[1].dtype == "int"
        if not ints:
            self.need_value(na, a[1])
            self.need_value(nb, b[1])
        t = TType("int" if ints else "float", self.union(c[1], a[1], b[1]), grad=a[1].grad or b[1].grad)
        if c[0] is sp.true or c[0] is sp.false:
            return a if c[0] is sp.true else b
        return self._t(sp.Piecewise((a[0], _opaque(c[0])), (b[0], True), evaluate=False), t)

    def v_Subscript(self, node, d):
        x, xt = self.visit(node.value, d)
        idx_node = node.slice
        if isinstance(idx_node, ast.Constant) and isinstance(idx_node.value, int) and not isinstance(idx_node.value, bool):
            k = idx_node.value
            if not xt.literal:
                raise _Fail(node, "E219", "constant indices apply only to learnable tensors of shape [K]")
            if not 0 <= k < xt.literal:
                raise _Fail(idx_node, "E219", f"index {k} is out of range for shape [{xt.literal}]")
            return self._t(ir.Item(x, sp.Integer(k)), TType("float", (), grad=True))
        i, it = self.visit(idx_node, d)
        if xt.dtype != "float" or xt.literal:
            raise _Fail(node.value, "E220", "only float tensors can be indexed by a label")
        if it.dtype != "int" or not it.axes and not it.index_of:
            what = "a float" if it.dtype == "float" else f"a {it.dtype}"
            raise _Fail(idx_node, "E221", f"index must be an integer input, not {what}",
                        "declare the label as {dtype: int, domain: \"[0, C)\"}")
        if not isinstance(i, (sp.Symbol, *ir.ARG_EXTREMA)):
            raise _Fail(idx_node, "E221", "index must be an integer input itself or an argmax/argmin, "
                        "not an expression")
        k = it.index_of
        if k is None:
            raise _Fail(idx_node, "E222", f"cannot tell which axis '{i}' indexes; give it a domain "
                        "such as \"[0, C)\"")
        if k not in xt.axes:
            raise _Fail(node, "E223", f"'{_source(idx_node)}' indexes axis {k}, which the indexed tensor lacks "
                        f"(its axes: [{', '.join(xt.axes)}])")
        if k in it.axes:
            raise _Fail(idx_node, "E223", f"'{_source(idx_node)}' has the axis {k} that it indexes")
        rest = tuple(a for a in xt.axes if a != k)
        if rest and set(rest) != set(it.axes):
            raise _Fail(node, "E224", f"gather: the indexed tensor's other axes [{', '.join(rest)}] "
                        f"must equal the label's axes [{', '.join(it.axes)}]")
        return self._t(ir.Gather(x, i, sp.Symbol(k)), TType("float", it.axes, grad=xt.grad))

    def v_Call(self, node, d):
        if not isinstance(node.func, ast.Name):
            raise _Fail(node.func, "E202", "only calls of formula functions are allowed")
        fname = node.func.id
        if fname in NON_DIFFERENTIABLE:
            return self.non_differentiable(node, fname, d)
        if fname not in KNOWN_FUNCS:
            hint = did_you_mean(fname, KNOWN_FUNCS)
            raise _Fail(node.func, "E208", f"unknown function '{_clip(fname)}'", hint)
        kws = {}
        for kw in node.keywords:
            if kw.arg != "axis":
                raise _Fail(kw, "E209", f"{fname}: unknown keyword '{kw.arg}' (only axis=)")
            kws["axis"] = kw.value
        args = node.args
        if any(isinstance(a, ast.Starred) for a in args):
            raise _Fail(node, "E202", "'*' arguments are not allowed")

        def arity(n):
            if len(args) != n:
                raise _Fail(node, "E210", f"{fname} takes {n} argument{'s' if n != 1 else ''}, got {len(args)}")

        if fname in UNARY:
            if kws:
                raise _Fail(node, "E209", f"{fname}: takes no axis")
            arity(1)
            x, t = self.visit(args[0], d)
            self.need_value(args[0], t)
            if fname in ("log", "log1p") and x.is_number and _is_zero_constant(x + (1 if fname == "log1p" else 0)):
                raise _Fail(node, "E203", f"{fname} of a constant that is {'-1' if fname == 'log1p' else 'zero'}",
                            "the argument evaluates to it (below 1e-100 at 50 and at 200 digits)")
            return self._t(UNARY[fname](x), TType("float", t.axes, grad=t.grad))
        if fname in REDUCE or fname in KEEP or (fname in ("min", "max") and kws):
            arity(1)
            if "axis" not in kws:
                raise _Fail(node, "E209", f"{fname}: needs axis=, e.g. {fname}(x, axis=C)")
            x, t = self.visit(args[0], d)
            self.need_value(args[0], t)
            ax = self.axis_arg(kws["axis"], t, fname)
            if ax in self.variadic and fname not in ("sum", "mean"):
                raise _Fail(kws["axis"], "E218", f"{fname}: cannot reduce over the variadic group *{ax}")
            axs = sp.Symbol(ax)
            if fname in KEEP:
                return self._t(KEEP[fname](x, axs), TType("float", t.axes, grad=t.grad))
            rest = tuple(a for a in t.axes if a != ax)
            if fname == "max":
                return self._t(ir.ReduceMax(x, axs), TType("float", rest, grad=t.grad))
            if fname == "min":
                return self._t(-ir.ReduceMax(-x, axs), TType("float", rest, grad=t.grad))
            return self._t(REDUCE[fname](x, axs), TType("float", rest, grad=t.grad))
        if kws and fname != "one_hot":
            raise _Fail(node, "E209", f"{fname}: takes no axis")
        if len(args) > limits.MAX_CALL_ARGS:  # each becomes a nested call in the generated code
            raise _Fail(node, "E104", f"{fname}: {len(args)} arguments exceed the limit 'call_args' "
                                      f"({limits.MAX_CALL_ARGS})")
        if fname in ("min", "max"):
            if len(args) < 2:
                raise _Fail(node, "E210", f"{fname} takes 2 or more arguments, or one with axis=")
            vals = [self.visit(a, d) for a in args]
            for a, (_, t) in zip(args, vals):
                self.need_value(a, t)
            f = sp.Min if fname == "min" else sp.Max
            e = f(*[v for v, _ in vals], evaluate=False)
            return self._t(e, TType("float", self.union(*[t for _, t in vals]), grad=any(t.grad for _, t in vals)))
        if fname == "clip":
            arity(3)
            x, t = self.visit(args[0], d)
            self.need_value(args[0], t)
            lo, lt = self.visit(args[1], d)
            hi, ht = self.visit(args[2], d)
            for a, tt in ((args[1], lt), (args[2], ht)):
                if tt.axes or tt.dtype == "bool":
                    raise _Fail(a, "E225", "clip bounds must be constants or parameters")
            if lo.is_Number and hi.is_Number and lo > hi:
                raise _Fail(node, "E225", "clip: lower bound is above the upper bound")
            return self._t(ir.Clip(x, lo, hi), TType("float", t.axes, grad=t.grad))
        if fname == "where":
            arity(3)
            c, a, b = (self.visit(x, d) for x in args)
            return self._where(node, c, a, b, *args)
        if fname == "Piecewise":
            if not args:
                raise _Fail(node, "E210", "Piecewise needs (value, condition) pairs")
            pairs = []
            for k, a in enumerate(args):
                if not isinstance(a, ast.Tuple) or len(a.elts) != 2:
                    raise _Fail(a, "E210", "Piecewise arguments are (value, condition) pairs")
                v, vt = self.visit(a.elts[0], d)
                self.need_value(a.elts[0], vt)
                c, ct = self.visit(a.elts[1], d)
                self.need_bool(a.elts[1], ct)
                pairs.append(((v, vt), (c, ct)))
            if pairs[-1][1][0] is not sp.true:
                raise _Fail(args[-1], "E226", "the last Piecewise condition must be True (the otherwise branch)")
            t = TType("float", self.union(*[p[0][1] for p in pairs], *[p[1][1] for p in pairs]),
                      grad=any(p[0][1].grad for p in pairs))
            e = sp.Piecewise(*[(v, _opaque(c)) for (v, _), (c, _) in pairs], evaluate=False)
            if not isinstance(e, sp.Piecewise):
                return self._t(e, t)
            return self._t(e, t)
        if fname == "one_hot":
            if len(args) == 1 and "axis" in kws:
                ax_node = kws["axis"]
            elif len(args) == 2 and not kws:
                ax_node = args[1]
            else:
                raise _Fail(node, "E210", "one_hot takes a label and an axis: one_hot(label, C)")
            i, it = self.visit(args[0], d)
            if it.dtype != "int" or not it.axes and not it.index_of:
                raise _Fail(args[0], "E221", "one_hot needs an integer input")
            if not isinstance(ax_node, ast.Name) or ax_node.id not in self.axes:
                raise _Fail(ax_node, "E217", "one_hot: the axis must be a shape symbol of an input")
            ax = ax_node.id
            if ax in it.axes:
                raise _Fail(ax_node, "E218", f"one_hot: the label already has axis {ax}")
            return self._t(ir.OneHot(i, sp.Symbol(ax)), TType("float", self.union(it, TType("int", (ax,)))))
        if fname == "stop_gradient":
            arity(1)
            self.frozen += 1
            try:
                x, t = self.visit(args[0], d)
            finally:
                self.frozen -= 1
            self.need_value(args[0], t)
            return self._t(ir.StopGradient(x), TType("float", t.axes))
        raise _Fail(node, "E208", f"unknown function '{fname}'")  # pragma: no cover

    # ---------------------------------------------------------------- no gradient
    def non_differentiable(self, node, fname, d):
        """round floor ceil sign argmax argmin (and the refused sort, topk): allowed only
        where their argument carries no gradient, or inside stop_gradient(...)."""
        args = node.args
        kws = {}
        for kw in node.keywords if fname not in UNSUPPORTED else ():
            if kw.arg != "axis" or fname not in ARG_EXTREMA:
                what = f"unknown keyword '{kw.arg}' (only axis=)" if kw.arg != "axis" else "takes no axis"
                raise _Fail(kw if kw.arg != "axis" else node, "E209", f"{fname}: {what}")
            kws["axis"] = kw.value
        if any(isinstance(a, ast.Starred) for a in args):
            raise _Fail(node, "E202", "'*' arguments are not allowed")
        if fname in UNSUPPORTED:
            if not args:
                raise _Fail(node, "E210", f"{fname} takes a tensor argument")
            x, t = self.visit(args[0], d)
            self.no_gradient(node, fname, args[0], x, t)
            raise _Fail(node, "E231", f"'{fname}' is not supported by losscc yet: {UNSUPPORTED[fname]}")
        if len(args) != 1:
            raise _Fail(node, "E210", f"{fname} takes 1 argument, got {len(args)}")
        x, t = self.visit(args[0], d)
        if t.dtype == "bool":
            self.need_value(args[0], t, f"the argument of {fname}")
        if t.literal:
            self.need_value(args[0], t)
        if fname in ARG_EXTREMA:
            if "axis" not in kws:
                raise _Fail(node, "E209", f"{fname}: needs axis=, e.g. {fname}(x, axis=C)")
            ax = self.axis_arg(kws["axis"], t, fname)
            if ax in self.variadic:
                raise _Fail(kws["axis"], "E218", f"{fname}: cannot reduce over the variadic group *{ax}")
            self.no_gradient(node, fname, args[0], x, t)
            rest = tuple(a for a in t.axes if a != ax)
            return self._t(ARG_EXTREMA[fname](x, sp.Symbol(ax)), TType("int", rest, index_of=ax))
        self.no_gradient(node, fname, args[0], x, t)
        if t.dtype == "int" and not t.axes and fname != "sign":
            return self._t(x, TType("float"))  # an integer parameter is its own round/floor/ceil
        return self._t(PIECEWISE_CONSTANT[fname](x), TType("float", t.axes))

    def no_gradient(self, node, fname, arg_node, x, t: TType) -> None:
        if not t.grad or self.frozen:
            return
        what = _source(arg_node)
        sources = [n for n in self.grad_sources(x) if n != what]
        origin = f" (from {', '.join(repr(n) for n in sources)})" if sources else ""
        if fname in UNSUPPORTED:
            why = f"losscc refuses '{fname}' on values with a gradient"
        elif fname in ARG_EXTREMA:
            why = f"an index has no derivative, so no gradient flows through '{fname}'"
        else:
            why = f"'{fname}' is piecewise constant (its derivative is 0 or undefined), so no gradient flows through it"
        if fname in ARG_EXTREMA:
            hint = f"wrap the argument in stop_gradient: {fname}(stop_gradient({what}), axis=...)"
        elif fname in UNSUPPORTED:
            hint = f"'{fname}' is not supported by losscc yet, also under stop_gradient: {UNSUPPORTED[fname]}"
        else:
            hint = (f"wrap the argument in stop_gradient: {fname}(stop_gradient({what})); for a straight-through "
                    f"estimator write v + stop_gradient({fname}(v) - v)")
        raise _Fail(node, "E230", f"'{fname}' of '{what}', which carries a gradient{origin}: {why}", hint)

    def grad_sources(self, expr) -> list[str]:
        """Float inputs and learnable tensors that `expr` depends on outside stop_gradient."""
        found: set[str] = set()
        seen: set = set()

        def walk(e):
            if e in seen or isinstance(e, ir.StopGradient):
                return
            seen.add(e)
            if isinstance(e, sp.Symbol):
                found.add(e.name)
            for a in e.args:
                walk(a)

        walk(expr)
        order = [i.name for i in self.spec.inputs if i.dtype == "float"] + [lr.name for lr in self.spec.learnable]
        return [n for n in order if n in found]


def _opaque(cond):
    """cond with every Piecewise inside it as the compiler's Where, which SymPy leaves
    alone: a Piecewise in a condition makes SymPy piecewise_fold it, which runs
    simplify_logic and simplify (unbounded: products of 30 sigmoids took minutes)."""
    if not isinstance(cond, sp.Basic) or not cond.has(sp.Piecewise):
        return cond

    def where(pw):
        *pairs, (last, _) = pw.args
        out = last
        for expr, c in reversed(pairs):
            out = ir.Where(c, expr, out)
        return out

    return cond.replace(lambda n: isinstance(n, sp.Piecewise), where)


def _magnitude_digits(base, ex) -> float:
    """Decimal digits of base**ex, estimated without computing it."""
    import math

    try:
        b = abs(complex(sp.N(base, 15)))
        x = float(sp.N(ex, 15))
    except (TypeError, ValueError, OverflowError):
        return float("inf")
    if b in (0.0, 1.0):
        return 0.0
    return abs(x * math.log10(b))


CONST_DIGITS = (50, 200)  # working precisions of the zero test of constants


def constant_value(e) -> float | str:
    """The float value of the constant `e`, or the reason it has none.

    Evaluated (SymPy evalf, i.e. mpmath, on a tree of at most 'tree' nodes) at 17 digits;
    a value below 1e-10 is evaluated again at 50 and at 200 digits: below 10**-(digits/2)
    at both it is exactly zero (log(2) + log(3) - log(6) cancels at any precision; a true
    constant such as 1e-50 does not), and it is refused when the two disagree."""
    first = _evaluate(e, 17)
    if isinstance(first, str) or abs(first) >= 1e-10:
        return _real(first)
    a, b = (_evaluate(e, n) for n in CONST_DIGITS)
    if isinstance(a, str) or isinstance(b, str):
        return a if isinstance(a, str) else b
    (na, nb) = CONST_DIGITS
    if abs(a) < 10.0 ** -(na // 2) and abs(b) < 10.0 ** -(nb // 2):
        return 0.0
    if abs(a - b) > 1e-12 * max(abs(a), abs(b)):
        return "constant cannot be evaluated reliably (it depends on a value that cancels to 0)"
    return _real(b)


def _evaluate(e, digits: int) -> complex | str:
    try:
        v = complex(sp.N(e, digits))
    except (TypeError, ValueError, OverflowError, ArithmeticError, RecursionError):
        return "constant cannot be evaluated"
    if v != v:
        return "constant is not a real number"
    return v


def _real(v: complex | str) -> float | str:
    if isinstance(v, str):
        return v
    if abs(v.imag) > 1e-12 * abs(v):
        return "constant is not a real number"
    if not abs(v.real) < 1e300:
        return "constant overflows a float (|value| >= 1e300)"
    return v.real


def _check_constant(node, e) -> float:
    v = constant_value(e)
    if isinstance(v, str):
        raise _Fail(node, "E203", v)
    return v


def _is_zero_constant(e) -> bool:
    return bool(e.is_zero) or (e.is_number and not e.has(ir.TensorOp) and constant_value(e) == 0.0)


def _decide(rel, a, b) -> bool:
    """A comparison of two constants, decided on their evaluated difference."""
    d = constant_value(a - b)
    if isinstance(d, str):
        raise ValueError(d)
    return {sp.Lt: d < 0, sp.Le: d <= 0, sp.Gt: d > 0, sp.Ge: d >= 0, sp.Eq: d == 0, sp.Ne: d != 0}[rel]


def _source(node) -> str:
    """The formula text of a node, normalised and shortened for messages."""
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - a message must not fail
        return "..."
    return text if len(text) <= 60 else text[:57] + "..."


def _name_of(node) -> str:
    return node.id if isinstance(node, ast.Name) else ""


def _describe(node) -> str:
    return {
        "Attribute": "attribute access", "Lambda": "lambda", "ListComp": "comprehension",
        "GeneratorExp": "generator", "DictComp": "comprehension", "SetComp": "comprehension",
        "List": "list", "Dict": "dict", "Set": "set", "Tuple": "tuple", "JoinedStr": "f-string",
        "Await": "await", "Yield": "yield", "NamedExpr": ":=", "Starred": "*",
        "MatMult": "@", "Mod": "%", "FloorDiv": "//", "LShift": "<<", "RShift": ">>",
        "BitXor": "^", "Invert": "~", "Is": "is", "IsNot": "is not", "In": "in", "NotIn": "not in",
        "Slice": "slice",
    }.get(type(node).__name__, type(node).__name__)


__all__ = ["TType", "Program", "build_program", "type_of", "SpecError"]
