"""The formula's Python AST into SymPy IR, typed node by node (calls: ``losscc.calls``).

The formula is parsed by Python's :mod:`ast` (which only builds a tree; nothing is
evaluated) and every node is checked against a whitelist of node types before a SymPy
expression is built from it by hand.  No text ever reaches ``eval``, ``exec``,
``sympify`` or ``parse_expr``.
"""

from __future__ import annotations

import ast

import sympy as sp

from . import functions, ir, limits
from .calls import CallRules
from .compose import SpecCalls
from .constants import (
    check_constant,
    decide,
    describe,
    is_zero_constant,
    magnitude_digits,
    name_of,
    opaque,
    source,
)
from .errors import Collector, did_you_mean
from .spec import Binding
from .ttype import Fail, TType, union
from .yamlread import clip as _clip

CONSTANTS = {"pi": sp.pi}


class Converter(CallRules, SpecCalls):
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
        self.aliases: dict[str, str] = {}  # axes made by rename(x, N=M): M -> N

    # ---------------------------------------------------------------- entry points
    def binding(self, b: Binding, later: set[str], used: set[str]):
        self.later, self.used = later, used
        return self.expression(b, "formula")

    def expression(self, b: Binding, where: str):
        self.line, self.col, self.where = b.loc.line, b.loc.col, where
        self.indent = b.name_loc.col - 1 if b.name_loc.line else 0  # the block's indentation
        text = b.text
        self.shift = 0
        odd = _non_ascii(text)
        if odd is not None:
            row, col, ch = odd
            self.out.error(self.line + row, (self.col if row == 0 else 1) + col, "E201",
                           f"{where}: the character {ascii(ch)} is not ASCII: Python reads letters like it as "
                           "others (fullwidth 'ｘ' as 'x'), so the formula would not say what it computes")
            return None
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
        except Fail as f:
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
        if ir.is_constant(expr):
            # `x - x` is 0 and `0 * x` is 0: the number is one key for every such value, so it
            # is typed where it is used (a constant broadcasts), never memoised with axes
            return expr, t
        self.types.setdefault(expr, t)
        return expr, self.types[expr]

    def union(self, *ts: TType) -> tuple[str, ...]:
        return union([t.axes for t in ts], self.axes)

    def need_value(self, node, t: TType, what="operand"):
        if t.dtype == "bool":
            raise Fail(node, "E212", f"a condition is used as a number ({what}); comparisons have no "
                        "gradient, so they may only choose between values",
                        "select with where(condition, a, b); for a 0/1 indicator write "
                        "where(condition, 1.0, 0.0), which carries no gradient")
        if t.dtype == "int" and t.axes:
            name = name_of(node)
            raise Fail(node, "E213", f"integer input '{name}' used as a float" if name else
                        "an integer tensor is used as a float",
                        "index with it (x[label]), compare it, or use one_hot(label, C)")
        if t.literal:
            name = name_of(node)
            raise Fail(node, "E214", f"learnable tensor '{name}' has shape [{t.literal}]; "
                        f"index it with a constant, e.g. {name}[0]")

    def need_bool(self, node, t: TType):
        if t.dtype != "bool":
            raise Fail(node, "E215", "expected a condition (a comparison such as x > 0)")

    def axis_arg(self, node, t: TType, fname: str) -> str:
        if not isinstance(node, ast.Name):
            raise Fail(node, "E216", f"{fname}: axis must be a shape symbol such as C")
        name = node.id
        if name not in self.axes:
            raise Fail(node, "E217", f"{fname}: unknown axis '{_clip(name)}'", did_you_mean(name, self.axes))
        if name not in t.axes:
            raise Fail(node, "E218", f"{fname}: the argument has no axis '{name}' "
                        f"(its axes: [{', '.join(t.axes)}])")
        return name

    # ---------------------------------------------------------------- visitor
    def visit(self, node: ast.AST, depth: int):
        if depth > limits.MAX_DEPTH:
            raise Fail(node, "E104", f"expression exceeds the limit 'depth' ({limits.MAX_DEPTH})")
        self.nodes += 1
        if self.nodes > limits.MAX_NODES:
            raise Fail(node, "E104", f"formula exceeds the limit 'nodes' ({limits.MAX_NODES})")
        method = getattr(self, "v_" + type(node).__name__, None)
        if method is None:
            raise Fail(node, "E202", f"'{describe(node)}' is not allowed in a formula")
        try:
            e, t = method(node, depth + 1)
        except (TypeError, ValueError, ZeroDivisionError, ArithmeticError) as exc:
            # SymPy refuses some constant combinations (e.g. comparisons with zoo)
            raise Fail(node, "E203", f"cannot build this expression ({type(exc).__name__}: "
                        f"{str(exc).strip().splitlines()[0][:80] if str(exc).strip() else 'invalid'})") from None
        if e.is_number and not e.has(ir.TensorOp):
            check_constant(node, e)
        if isinstance(e, sp.Pow) and e.args[1].is_Number and abs(e.args[1]) > limits.MAX_EXPONENT:
            raise Fail(node, "E104", f"exponent exceeds the limit 'exponent' ({limits.MAX_EXPONENT})")
        return e, t

    def v_Constant(self, node, d):
        v = node.value
        if isinstance(v, bool):
            return self._t(sp.true if v else sp.false, TType("bool"))
        if isinstance(v, int):
            if abs(v) > 10**15:
                raise Fail(node, "E203", "integer constant too large")
            return self._t(sp.Integer(v), TType("float"))
        if isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                raise Fail(node, "E203", "constants must be finite")
            if v.is_integer() and abs(v) <= 2**53:
                return self._t(sp.Integer(int(v)), TType("float"))  # 1.0 is 1: rewrites match it
            return self._t(sp.Float(v), TType("float"))
        raise Fail(node, "E202", f"{type(v).__name__} constants are not allowed in a formula")

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
            raise Fail(node, "silent", "")
        if name == self.current:
            raise Fail(node, "E143", f"'{name}' refers to itself (a binding may only use earlier bindings)")
        if name in self.later:
            raise Fail(node, "E143", f"'{name}' is used before it is bound "
                        "(a binding may only use earlier bindings, so cycles are impossible)")
        if name.startswith("_"):
            raise Fail(node, "E204", f"names starting with '_' are not allowed ('{_clip(name)}')")
        known = sorted(set(self.env) | set(self.axes))
        if name in functions.NAMES:
            raise Fail(node, "E205", f"function '{name}' used without calling it")
        if name in ("true", "false", "none", "null"):  # YAML's spellings, not Python's
            raise Fail(node, "E206", f"unknown symbol '{name}'",
                       f"a formula is Python: write {name.capitalize() if name != 'null' else 'None'}")
        raise Fail(node, "E206", f"unknown symbol '{_clip(name)}' (known: {', '.join(known)})",
                    did_you_mean(name, known))

    def v_UnaryOp(self, node, d):
        e, t = self.visit(node.operand, d)
        if isinstance(node.op, ast.Not):
            self.need_bool(node.operand, t)
            return self._t(sp.Not(e), t)
        if isinstance(node.op, (ast.USub, ast.UAdd)):
            self.need_value(node.operand, t)
            return self._t(-e if isinstance(node.op, ast.USub) else e, TType("float", t.axes, grad=t.grad))
        raise Fail(node, "E202", f"operator '{describe(node.op)}' is not allowed")

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
            if is_zero_constant(re_):
                if re_.is_zero:
                    raise Fail(node, "E207", "division by zero")
                raise Fail(node, "E207", "division by a constant that is zero",
                            "the denominator evaluates to 0 (below 1e-100 at 50 and at 200 digits)")
            return self._t(le / re_, t)
        if isinstance(op, ast.Pow):
            if le.is_number and re_.is_number and magnitude_digits(le, re_) > 300:
                raise Fail(node, "E203", "constant too large (more than 300 digits)")
            if re_.is_Number and (abs(float(re_)) > limits.MAX_EXPONENT):
                raise Fail(node.right, "E104",
                            f"exponent exceeds the limit 'exponent' ({limits.MAX_EXPONENT})")
            if le.is_number and re_.is_Number and re_.is_negative and is_zero_constant(le):
                raise Fail(node, "E207", "division by zero")
            return self._t(le ** re_, t)
        raise Fail(node, "E202", f"operator '{describe(node.op)}' is not allowed")

    def v_Compare(self, node, d):
        parts = [node.left] + list(node.comparators)
        vals = [self.visit(p, d) for p in parts]
        for p, (e, t) in zip(parts, vals):
            if t.dtype == "bool" or t.literal:
                raise Fail(p, "E215", "comparison operands must be numbers or tensors")
        rels = []
        for k, op in enumerate(node.ops):
            a, b = vals[k][0], vals[k + 1][0]
            rel = {ast.Lt: sp.Lt, ast.LtE: sp.Le, ast.Gt: sp.Gt, ast.GtE: sp.Ge,
                   ast.Eq: sp.Eq, ast.NotEq: sp.Ne}.get(type(op))
            if rel is None:
                raise Fail(node, "E202", f"comparison '{describe(op)}' is not allowed")
            ta, tb = vals[k][1], vals[k + 1][1]
            if (ta.dtype == "int" and ta.axes or tb.dtype == "int" and tb.axes) and rel not in (sp.Eq, sp.Ne):
                raise Fail(node, "E213", "integer tensors can only be compared with == or !=")
            if a.is_number and b.is_number:  # a constant condition is decided now
                rels.append(sp.true if decide(rel, a, b) else sp.false)
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
        return self._t(sp.Piecewise((a[0], opaque(c[0])), (b[0], True), evaluate=False), t)

    def component(self, node, idx_node, k: int, x, xt: TType):
        """x[k] on a tensor with one axis of a fixed size (shape: [N, K=4]): entry k along it."""
        sizes = self.spec.sizes
        fixed = [a for a in xt.axes if a in sizes]
        if not fixed:
            raise Fail(node, "E219", "constant indices apply only to learnable tensors of shape [K] and to "
                        "tensors with an axis of a fixed size (shape: [N, K=4])")
        if len(fixed) > 1:
            raise Fail(node, "E219", f"'{source(node.value)}' has several axes of a fixed size "
                        f"([{', '.join(fixed)}]); a constant index needs exactly one")
        if xt.dtype != "float":
            raise Fail(node.value, "E220", "only float tensors can be indexed by a constant")
        ax = fixed[0]
        if not 0 <= k < sizes[ax]:
            raise Fail(idx_node, "E219", f"index {k} is out of range for axis {ax} of size {sizes[ax]}")
        rest = tuple(a for a in xt.axes if a != ax)
        return self._t(ir.Component(x, sp.Integer(k), sp.Symbol(ax)), TType("float", rest, grad=xt.grad))

    def v_Subscript(self, node, d):
        x, xt = self.visit(node.value, d)
        idx_node = node.slice
        if isinstance(idx_node, ast.Constant) and isinstance(idx_node.value, int) and not isinstance(idx_node.value, bool):
            k = idx_node.value
            if not xt.literal:
                return self.component(node, idx_node, k, x, xt)
            if not 0 <= k < xt.literal:
                raise Fail(idx_node, "E219", f"index {k} is out of range for shape [{xt.literal}]")
            return self._t(ir.Item(x, sp.Integer(k)), TType("float", (), grad=True))
        i, it = self.visit(idx_node, d)
        if xt.dtype != "float" or xt.literal:
            raise Fail(node.value, "E220", "only float tensors can be indexed by a label")
        if it.dtype != "int" or not it.axes and not it.index_of:
            what = "a float" if it.dtype == "float" else f"a {it.dtype}"
            raise Fail(idx_node, "E221", f"index must be an integer input, not {what}",
                        "declare the label as {dtype: int, domain: \"[0, C)\"}")
        if not (isinstance(i, (sp.Symbol, *ir.ARG_EXTREMA)) or i.is_Integer):  # argmax of a constant: 0
            raise Fail(idx_node, "E221", "index must be an integer input itself or an argmax/argmin, "
                        "not an expression")
        k = it.index_of
        if k is None:
            raise Fail(idx_node, "E222", f"cannot tell which axis '{i}' indexes; give it a domain "
                        "such as \"[0, C)\" (open at C: C itself is past the axis; a gather reads inside "
                        "the axis, so a padding value such as -1 is declared with `ignore: <int parameter>` "
                        "on the input, not in the domain)")
        if k not in xt.axes:
            raise Fail(node, "E223", f"'{source(idx_node)}' indexes axis {k}, which the indexed tensor lacks "
                        f"(its axes: [{', '.join(xt.axes)}])")
        if k in it.axes:
            raise Fail(idx_node, "E223", f"'{source(idx_node)}' has the axis {k} that it indexes")
        rest = tuple(a for a in xt.axes if a != k)
        own = [a for a in rest if a not in it.axes]
        if own and any(a in self.variadic for a in rest):
            raise Fail(node, "E224", f"gather: the indexed tensor has axes [{', '.join(own)}] that the label "
                        f"lacks and a variadic group among [{', '.join(rest)}]; a table (centers[label]) "
                        "has fixed axes only")
        return self._t(ir.Gather(x, i, sp.Symbol(k)), TType("float", self.union(TType("float", rest), it),
                                                           grad=xt.grad))


def _non_ascii(text: str):
    """(line offset, column offset, character) of the first non-ASCII character outside a
    comment, or None."""
    for row, line in enumerate(text.split("\n")):
        code = line.split("#", 1)[0]
        for col, ch in enumerate(code):
            if ord(ch) > 127:
                return row, col, ch
    return None
