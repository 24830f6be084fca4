"""Stage 5: the rewritten IR into straight-line code for one backend.

Layout rule (the reason the lowering is small): every tensor is kept in a
*canonical layout* -- the program's global axis order, right-aligned, with size-1
dimensions for the axes it lacks.  Reductions keep their axis (``keepdim``) and
gathers keep the class axis as size 1, so every elementwise operation broadcasts
by plain NumPy rules and every axis has one fixed negative position.  Inputs are
reshaped into the layout once, at entry; the loss is reshaped back for
``reduction="none"``.

Common subexpressions become named statements (the user's binding names where a
rewritten binding survives), so each value is computed once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import sympy as sp

from . import functions, ir
from .backends import Backend
from .layout import power, unary_needs_parens
from .parse import Program, TType
from .spec import Spec

ATOM, POW, UNARY, MUL, ADD, CMP, NOT, AND, OR, TERNARY = 100, 80, 70, 60, 50, 40, 30, 20, 10, 5


@dataclass
class Block:
    """Statements plus the expression a reduction returns."""

    stmts: list[str]
    result: str


@dataclass
class Lowered:
    backend: Backend
    spec: Spec
    signature: list[str]                 # parameters of the generated function
    checks: list[str]
    prologue: list[str]
    body: list[str]
    reductions: list[tuple[str, Block]]  # (name, block) in order: none, sum, then mean and extras
    helpers: list[str]
    formula_lines: list[str]             # the computed form, in the formula language
    call: dict = field(default_factory=dict)
    restore: str | None = None           # cast of `result_var` back to the inputs' dtype (half precision)
    result_var: str = "result"           # the local each reduction assigns when a cast back follows
    entry: str | None = None             # module-level alias the class calls, when an input shadows the function
    # the call where every optional input is None, when it has its own path:
    # ``if <none_test>: <none_body, none_reductions> else: <branch_prologue, body, reductions>``
    none_test: str | None = None
    none_body: list[str] = field(default_factory=list)
    none_reductions: list[tuple[str, Block]] = field(default_factory=list)
    branch_prologue: list[str] = field(default_factory=list)  # the general path's own prologue


def _pos_expr(axis: str, prog: Program, need) -> str:
    """Negative position of `axis` in the canonical layout; `need(a)` gives the size variable of a."""
    after = prog.axes[prog.axes.index(axis) + 1:]
    fixed = 1 + sum(1 for a in after if a not in prog.variadic)
    var = [f"len({need(a)})" for a in after if a in prog.variadic]
    if axis in prog.variadic:
        end = sum(1 for a in after if a not in prog.variadic)
        own = f"len({need(axis)})"
        lo = " + ".join([str(end)] + var + [own]) if end or var else own
        hi = f"-({' + '.join([str(end)] + var)})" if end or var else "0"
        return f"tuple(range(-({lo}), {hi}))"
    return str(-fixed) if not var else f"-({fixed} + {' + '.join(var)})"


def _span(axes: tuple[str, ...], prog: Program) -> tuple[str, ...]:
    if not axes:
        return ()
    return prog.axes[prog.axes.index(axes[0]):]


def canonical_shape(axes: tuple[str, ...], prog: Program, need) -> str | None:
    """Code for the canonical shape of a tensor with `axes`, or None if it is already canonical."""
    span = _span(axes, prog)
    if tuple(span) == tuple(axes):
        return None
    parts: list[str] = []
    fixed: list[str] = []
    for a in span:
        if a in prog.variadic:
            if fixed:
                parts.append(_tuple(fixed))
                fixed = []
            n = need(a)
            parts.append(n if a in axes else f"(1,) * len({n})")
        else:
            if a in axes:
                fixed.append(need(a))
            else:
                fixed.append("1")
    if fixed:
        parts.append(_tuple(fixed))
    return " + ".join(parts)


def _tuple(items: list[str]) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def plain_shape(axes: tuple[str, ...], prog: Program, need) -> str:
    """Code for the shape made of the sizes of `axes` (the shape of reduction='none')."""
    parts, fixed = [], []
    for a in axes:
        n = need(a)
        if a in prog.variadic:
            if fixed:
                parts.append(_tuple(fixed))
                fixed = []
            parts.append(n)
        else:
            fixed.append(n)
    if fixed:
        parts.append(_tuple(fixed))
    return " + ".join(parts) if parts else "()"


def import_names(backend: Backend) -> frozenset[str]:
    """The names a backend's import lines bind in a generated module."""
    import ast

    out: set[str] = set()
    for line in backend.imports:
        for node in ast.walk(ast.parse(line)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                out |= {a.asname or a.name.split(".")[0] for a in node.names}
    return frozenset(out)


def python_names() -> frozenset[str]:
    """Keywords and builtins: a local of the generated code never shadows one."""
    import builtins
    import keyword

    return frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))


def allocate(hint: str, taken: set[str]) -> str:
    """`hint`, or `hint_1`, `hint_2`, ... : the first not in `taken` (which it joins)."""
    name, k = hint, 0
    while name in taken:
        k += 1
        name = f"{hint}_{k}"
    taken.add(name)
    return name


@dataclass(frozen=True)
class Locals:
    """The generated function's own variables, allocated once per module so that the general
    path and the all-None path agree: none is a spec name, a framework alias or a builtin."""

    sizes: dict                          # axis -> variable holding its size (the axis's own name if free)
    dtype: str
    in_dtype: str
    half: str
    result: str

    @staticmethod
    def allocate(prog: Program, taken: set[str], forbidden: frozenset = frozenset()) -> "Locals":
        """`taken` (spec names and aliases) is extended in place. An axis keeps its own name
        unless that is `forbidden` or a Python name (a shape symbol F, Ellipsis, ...)."""
        bad = forbidden | python_names()
        sizes = {}
        for a in prog.axes:
            sizes[a] = allocate(a, taken | bad) if a in bad else a
            taken.add(sizes[a])
        taken |= bad
        return Locals(sizes, allocate("dtype", taken), allocate("in_dtype", taken), allocate("half", taken),
                      allocate("result", taken))

    def names(self) -> set[str]:
        return set(self.sizes.values()) | {self.dtype, self.in_dtype, self.half, self.result}


def _is_f32_exact(v: float) -> bool:
    import struct

    try:
        return struct.unpack("f", struct.pack("f", v))[0] == v
    except OverflowError:
        return False


_NUMBER = re.compile(r"-?(\d+\.?\d*(e[-+]?\d+)?|inf)")


def _float_text(v: float) -> str:
    text = repr(float(v))
    return text


class Lowerer:
    def __init__(self, prog: Program, backend: Backend, taken: set[str], names: dict[sp.Expr, str],
                 symbol_vars: dict[sp.Symbol, str], locals_: "Locals | None" = None):
        self.prog, self.b = prog, backend
        self.taken = set(taken)
        self.locals = locals_ or Locals.allocate(prog, self.taken)
        self.taken |= self.locals.names()
        self.names = names                  # IR node -> user binding name
        self.user_names = set(names.values())  # reserved for exactly those nodes
        self.symbol_vars = symbol_vars      # IR symbol -> variable in the generated code
        self.memo: dict[sp.Expr, tuple[str, int]] = {}
        self.stmts: list[str] = []
        self.exprs: list[tuple[str, sp.Expr]] = []   # materialised (var, IR) for the docstring
        self.uses: dict[sp.Expr, int] = {}
        self.sizes: set[str] = set()
        self.helpers: list[str] = []
        self.needs_dtype = False

    # ---------------------------------------------------------------- bookkeeping
    def count(self, expr: sp.Expr) -> None:
        seen: set = set()

        def walk(e):
            self.uses[e] = self.uses.get(e, 0) + 1
            if e in seen:
                return
            seen.add(e)
            for a in e.args:
                walk(a)

        walk(expr)

    def need(self, axis: str) -> str:
        """Mark the size of `axis` as read; the variable that holds it."""
        self.sizes.add(axis)
        return self.locals.sizes[axis]

    def fresh(self, hint: str) -> str:
        if hint in self.user_names:
            self.user_names.discard(hint)
            return hint
        return allocate(hint, self.taken)

    def typeof(self, e) -> TType:
        return self.prog.typeof(e)

    def dtype(self) -> str:
        self.needs_dtype = True
        return self.locals.dtype

    def helper(self, op: str) -> None:
        src = self.b.helpers.get(op)
        if src and src not in self.helpers:
            self.helpers.append(src)

    def op(self, key: str, **kw) -> str:
        self.helper(key)
        return self.b.op(key, **kw)

    # ---------------------------------------------------------------- entry
    def value(self, expr: sp.Expr) -> str:
        code, _ = self.emit(expr)
        return code

    def materialize(self, expr: sp.Expr, hint: str = "t") -> str:
        code, prec = self.emit(expr)
        if prec == ATOM and (code.isidentifier()):
            return code
        var = self.fresh(self.names.get(expr, hint))
        self.stmts.append(f"{var} = {code}")
        self.exprs.append((var, expr))
        self.memo[expr] = (var, ATOM)
        return var

    def emit(self, expr: sp.Expr) -> tuple[str, int]:
        got = self.memo.get(expr)
        if got is not None:
            return got
        code, prec = self.build(expr)
        shared = self.uses.get(expr, 0) > 1 and not expr.is_Atom and not isinstance(expr, (ir.Size,))
        named = expr in self.names
        tensor_op = isinstance(expr, ir.TensorOp) and not isinstance(expr, (ir.Size, ir.Item))
        if named or (shared and prec < ATOM or shared and "(" in code) or tensor_op or len(code) > 90:
            if not (prec == ATOM and code.isidentifier()):
                var = self.fresh(self.names.get(expr) or _hint(expr))
                self.stmts.append(f"{var} = {code}")
                self.exprs.append((var, expr))
                code, prec = var, ATOM
        self.memo[expr] = (code, prec)
        return code, prec

    def wrap(self, e: sp.Expr, min_prec: int) -> str:
        code, prec = self.emit(e)
        return f"({code})" if prec < min_prec else code

    def negate(self, e: sp.Expr, min_prec: int) -> str:
        """`-e`; black writes `-(x**2)`, so a power of a plain name or number is parenthesised."""
        code, prec = self.emit(e)
        if prec < min_prec or (prec == POW and unary_needs_parens(code)):
            return f"-({code})"
        return f"-{code}"

    def tensor_arg(self, e: sp.Expr) -> str:
        """An operand that a template uses more than once must be a variable."""
        code, prec = self.emit(e)
        if prec == ATOM and code.isidentifier():
            return code
        return self.materialize(e, _hint(e))

    # ---------------------------------------------------------------- nodes
    def build(self, e: sp.Expr) -> tuple[str, int]:
        b = self.b
        if isinstance(e, sp.Symbol):
            if e in self.symbol_vars:
                return self.symbol_vars[e], ATOM
            raise KeyError(f"no variable for symbol {e}")
        if e is sp.true:
            return "True", ATOM
        if e is sp.false:
            return "False", ATOM
        if not e.is_Atom and e.is_number and not e.has(ir.TensorOp):
            e = sp.Float(e.evalf(20), 17)  # constant folding: log(2*pi) is a number
        if e.is_Integer:
            v = int(e)
            return (str(v), ATOM) if v >= 0 else (str(v), UNARY)
        if e.is_Number or e in (sp.pi, sp.E):
            v = float(e)
            text = _float_text(v)
            if b.wrap_scalars and not _is_f32_exact(v):
                return b.scalar.format(value=text, dtype=self.dtype()), ATOM
            return text, ATOM if v >= 0 else UNARY
        if isinstance(e, sp.Add):
            return self.add(e)
        if isinstance(e, sp.Mul):
            return self.mul(e)
        if isinstance(e, sp.Pow):
            return self.pow(e)
        key = functions.unary_op(e)  # a function that is one operator on its argument
        if key is not None:
            return self.op(key, x=self.value(e.args[0])), ATOM
        if isinstance(e, ir.PIECEWISE_CONSTANT):
            return self.piecewise_constant(e)
        if isinstance(e, (sp.Max, sp.Min)):
            return self.minmax(e)
        if isinstance(e, ir.Clip):
            x, lo, hi = e.args
            lo_c, hi_c = self.value(lo), self.value(hi)
            literal = [bool(_NUMBER.fullmatch(c)) for c in (lo_c, hi_c)]
            if self.b.wrap_scalars and literal[0] != literal[1]:
                # one bound a tensor, the other a Python number: MindSpore's clamp takes neither mix
                lo_c, hi_c = (self.b.scalar.format(value=c, dtype=self.dtype()) if lit else c
                              for c, lit in zip((lo_c, hi_c), literal))
            return self.op("clip", x=self.value(x), lo=lo_c, hi=hi_c), ATOM
        if isinstance(e, sp.Piecewise):
            return self.piecewise(e)
        if isinstance(e, ir.Where):
            c, a, b2 = e.args
            return self.where(c, a, b2), ATOM
        if isinstance(e, sp.Rel):
            return self.relation(e)
        if isinstance(e, sp.ITE):  # SymPy's form of "condition on a where"
            c, a, b2 = e.args
            return self.op("where", c=self.value(c), x=self.value(a), y=self.value(b2)), ATOM
        if isinstance(e, sp.And):
            return self.fold("and", e.args), ATOM
        if isinstance(e, sp.Or):
            return self.fold("or", e.args), ATOM
        if isinstance(e, sp.Not):
            return self.op("not", x=self.value(e.args[0])), ATOM
        return self.tensor_op(e)

    def piecewise_constant(self, e) -> tuple[str, int]:
        """round floor ceil sign; integer arguments are cast to the float dtype first."""
        key = functions.op_key(e)
        x = e.args[0]
        t = self.typeof(x)
        if t.dtype == "int" and self.scalar_like(x):  # an integer parameter: a Python int
            v = self.wrap(x, CMP + 1)
            return (f"(({v} > 0) - ({v} < 0))", ATOM) if key == "sign" else (v, self.emit(x)[1])
        code = self.value(x)
        if t.dtype == "int":
            code = self.op("cast", x=code, dtype=self.dtype())
            if key != "sign":
                return code, ATOM  # an integer is its own round, floor and ceil
        return self.op(key, x=code), ATOM

    def fold(self, key, args):
        code = self.value(args[0])
        for a in args[1:]:
            code = self.op(key, x=code, y=self.value(a))
        return code

    def add(self, e: sp.Add) -> tuple[str, int]:
        terms = list(e.args)
        # positive terms first reads naturally: "1 - x", "a + b - c". Constants (numbers and
        # hyperparameters) go last after two or more tensor terms, one of them positive, as in
        # "x1 - x2 + eps": SymPy's order "eps + x1 - x2" loses eps in float32 when x1 == x2
        tensors = [t for t in terms if not self._constant_bound(t)]
        last = len(tensors) >= 2 and not all(_is_negative(t) for t in tensors) and len(tensors) < len(terms)
        terms.sort(key=lambda t: (last and self._constant_bound(t), _is_negative(t)))
        out = ""
        for k, t in enumerate(terms):
            if _is_negative(t):
                code = self.wrap(-t, MUL if not out else MUL)
                out = f"{out} - {code}" if out else self.negate(-t, UNARY)
            else:
                code = self.wrap(t, ADD)
                out = f"{out} + {code}" if out else code
        return out, ADD

    def mul(self, e: sp.Mul) -> tuple[str, int]:
        coeff, rest = e.as_coeff_Mul()
        if coeff == -1:
            return self.negate(rest, UNARY + 1), UNARY
        num, den = [], []
        for f in (e.args if coeff == 1 else (coeff,) + sp.Mul.make_args(rest)):
            if isinstance(f, sp.Pow) and f.exp.is_Number and f.exp.is_negative:
                den.append(f.base ** -f.exp)
            elif f.is_Rational and not f.is_Integer and f.p == 1:
                den.append(sp.Integer(f.q))
            else:
                num.append(f)
        code = " * ".join(self.wrap(f, MUL) for f in num) if num else "1"
        if den:
            d = den[0] if len(den) == 1 else sp.Mul(*den, evaluate=False)
            dcode = self.wrap(d, MUL + 1) if len(den) == 1 else "(" + " * ".join(self.wrap(f, MUL) for f in den) + ")"
            code = f"{code} / {dcode}"
        return code, MUL

    def pow(self, e: sp.Pow) -> tuple[str, int]:
        base, ex = e.args
        if ex == sp.Rational(1, 2):
            return self.op("sqrt", x=self.value(base)), ATOM
        if ex == sp.Rational(-1, 2):
            return self.op("rsqrt", x=self.value(base)), ATOM
        if ex.is_Number and ex.is_negative:
            return f"1 / {self.wrap(base ** -ex, MUL + 1)}", MUL
        if ex == 2 and "square" in self.b.ops:  # a backend whose integer pow is a slow generic kernel
            return self.op("square", x=self.value(base)), ATOM
        if ex.is_Integer:
            return power(self.wrap(base, ATOM), str(int(ex))), POW
        return power(self.wrap(base, ATOM), self.wrap(ex, ATOM)), POW

    def minmax(self, e) -> tuple[str, int]:
        """max/min, folded left over the arguments (tensors first, then bounds).

        Against a bound that is not differentiated (a number or a hyperparameter) it is a
        one-sided clip: at a tie the gradient goes to the tensor (torch.clamp's convention,
        the hinge of margin losses passes gradient). Between two differentiated values it is
        maximum/minimum: at a tie each side gets half (torch.maximum's convention); both
        backends' kernels do both (docs/spec.md, "Gradients at ties and kinks")."""
        args = list(e.args)
        args.sort(key=lambda a: 0 if not self._constant_bound(a) else 1)
        clip = "clip_min" if isinstance(e, sp.Max) else "clip_max"
        pair = "maximum" if isinstance(e, sp.Max) else "minimum"
        if self._constant_bound(args[0]):  # no tensor among the arguments: no gradient, no tie rule
            return self._select_fold(e, args), ATOM
        code = self.value(args[0])
        for other in args[1:]:
            if self._constant_bound(other):
                bound = self.value(other)
                code = self.op(clip, x=code, lo=bound, hi=bound)
            else:
                code = self.op(pair, x=code, y=self.value(other))
        return code, ATOM

    def _select_fold(self, e, args) -> str:
        rel = ">=" if isinstance(e, sp.Max) else "<="
        code = self.value(args[0])
        first_scalar = self.scalar_like(args[0])
        for other in args[1:]:
            left = code if code.isidentifier() else self.materialize_code(code)
            code = self.where_codes(f"{left} {rel} {self.wrap(other, CMP + 1)}", left, self.value(other),
                                    first_scalar, self.scalar_like(other))
            first_scalar = False
        return code

    def _constant_bound(self, e) -> bool:
        """A scalar that no gradient flows into: numbers and hyperparameters."""
        if e.is_Number:  # also one that a tensor expression folded to (`x - x`), typed with its axes
            return True
        if self.typeof(e).axes or e.has(ir.Item):
            return False
        params = {self.prog.symbols[p.name] for p in self.prog.spec.params}
        return e.free_symbols <= params

    def materialize_code(self, code: str) -> str:
        var = self.fresh("t")
        self.stmts.append(f"{var} = {code}")
        return var

    def piecewise(self, e: sp.Piecewise) -> tuple[str, int]:
        pairs = list(e.args)
        if len(pairs) == 2 and pairs[0].expr == 1 and pairs[1].expr == 0 and pairs[1].cond is sp.true:
            return self.op("cast", x=self.value(pairs[0].cond), dtype=self.dtype()), ATOM
        c0 = pairs[0].cond
        if len(pairs) == 2 and self.is_flag(c0):
            branched = self.flag_branch(c0, pairs[0].expr, pairs[1].expr, self.names.get(e))
            if branched is not None:
                return branched, ATOM
        code, prec = self.emit(pairs[-1].expr)
        scalar = self.scalar_like(pairs[-1].expr)
        for pair in reversed(pairs[:-1]):
            c = pair.cond
            if self.is_flag(c):
                a = self.wrap(pair.expr, TERNARY + 1)
                code = f"{a} if {self.value(c)} else {code if prec > TERNARY else '(' + code + ')'}"
                prec = TERNARY
                scalar = scalar and self.scalar_like(pair.expr)
                continue
            code = self.where_codes(self.value(c), self.value(pair.expr), code, self.scalar_like(pair.expr), scalar)
            scalar = False
            prec = ATOM
        return code, prec

    def is_flag(self, c) -> bool:
        """A boolean hyperparameter: a Python bool in the generated code."""
        return isinstance(c, sp.Symbol) and self.typeof(c).dtype == "bool" and not self.typeof(c).axes

    def flag_branch(self, flag, a, b, name: str | None = None) -> str | None:
        """where(flag, a, b) on a boolean hyperparameter, when a branch needs statements of its
        own: ``if flag: <a's statements> else: <b's>``, so the branch not taken costs nothing
        (a ternary would compute both). Values first computed inside a branch are not reused
        after it. Returns None when neither branch needs a statement (the ternary serves)."""
        blocks = []
        memo = dict(self.memo)
        for e in (a, b):
            start = len(self.stmts)
            code = self.value(e)
            blocks.append((code, self.stmts[start:]))
            del self.stmts[start:]
            self.memo = dict(memo)
        if not blocks[0][1] and not blocks[1][1]:
            return None
        # reuse the name a branch gives its value (stirling = ... / stirling = 0)
        var = self.fresh(name) if name else next(
            (c for c, st in blocks if st and c.isidentifier() and st[-1].startswith(f"{c} = ")), None)
        var = var or self.fresh("branch")
        out = []
        for head, (code, st) in zip((f"if {self.value(flag)}:", "else:"), blocks):
            out.append(head)
            out += ["    " + line for stmt in st for line in stmt.split("\n")]
            if not (st and st[-1].startswith(f"{var} = ") and code == var):
                out.append(f"    {var} = {code}")
        self.stmts += out
        return var

    def scalar_like(self, e) -> bool:
        """A value the generated code holds as a Python number (not a tensor)."""
        if self.typeof(e).axes:
            return False
        tensors = {self.prog.symbols[lr.name] for lr in self.prog.spec.learnable}
        if self.b.wrap_scalars:
            tensors |= {self.prog.symbols[p.name] for p in self.prog.spec.params if p.kind == "float"}
        return not (e.free_symbols & tensors) and not e.has(ir.Item)

    def where(self, c, a, b, y_code: str | None = None) -> str:
        if self.is_flag(c) and y_code is None:  # a Python bool: no tensor op takes it as a condition
            branched = self.flag_branch(c, a, b)
            if branched is not None:
                return branched
            return f"({self.wrap(a, TERNARY + 1)} if {self.value(c)} else {self.wrap(b, TERNARY + 1)})"
        yb = y_code if y_code is not None else self.value(b)
        b_s = y_code is None and self.scalar_like(b)
        return self.where_codes(self.value(c), self.value(a), yb, self.scalar_like(a), b_s)

    def where_codes(self, cc: str, xa: str, yb: str, a_s: bool, b_s: bool) -> str:
        if not self.b.where_scalars:
            if a_s and b_s:
                cc = self.tensor_code(cc)
                xa = self.tensor_code(self.op("full", shape=f"{cc}.shape", value=xa, dtype=self.dtype()))
                yb = self.op("full_like", x=xa, value=yb)
            elif a_s:
                yb = self.tensor_code(yb)
                xa = self.op("full_like", x=yb, value=xa)
            elif b_s:
                xa = self.tensor_code(xa)
                yb = self.op("full_like", x=xa, value=yb)
        return self.op("where", c=cc, x=xa, y=yb)

    def tensor_code(self, code: str) -> str:
        return code if code.isidentifier() else self.materialize_code(code)

    def relation(self, e) -> tuple[str, int]:
        ops = {sp.StrictLessThan: "<", sp.LessThan: "<=", sp.StrictGreaterThan: ">",
               sp.GreaterThan: ">=", sp.Equality: "==", sp.Unequality: "!="}
        flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
        sym = ops[type(e)]
        lhs, rhs = e.args
        if not self.typeof(lhs).axes and self.typeof(rhs).axes:
            lhs, rhs, sym = rhs, lhs, flip[sym]
        lcode, rcode = self.wrap(lhs, CMP + 1), self.wrap(rhs, CMP + 1)
        # argmax/argmin give int64; Paddle refuses to compare int64 with an int32 label
        if isinstance(lhs, ir.ARG_EXTREMA) and isinstance(rhs, sp.Symbol) and self.typeof(rhs).axes:
            lcode = self.op("cast", x=lcode, dtype=f"{rcode}.dtype")
        elif isinstance(rhs, ir.ARG_EXTREMA) and isinstance(lhs, sp.Symbol) and self.typeof(lhs).axes:
            rcode = self.op("cast", x=rcode, dtype=f"{lcode}.dtype")
        return f"{lcode} {sym} {rcode}", CMP

    def tensor_op(self, e) -> tuple[str, int]:
        prog = self.prog
        if isinstance(e, ir.Size):
            name = self.need(e.args[0].name)
            code = self.op("size_value", n=name, dtype="{dtype}")
            return code.replace("{dtype}", self.dtype()) if "{dtype}" in code else code, ATOM
        if isinstance(e, ir.Item):
            return f"{self.wrap(e.args[0], ATOM)}[{int(e.args[1])}]", ATOM
        if isinstance(e, ir.StopGradient):
            return self.op("stop_gradient", x=self.value(e.args[0])), ATOM
        if isinstance(e, ir.OneHot):
            idx, ax = e.args
            rng = self.op("arange", n=self.need(ax.name))
            shape = canonical_shape((ax.name,), prog, self.need)
            if shape:
                rng = self.op("reshape", x=rng, shape=shape)
            return self.op("cast", x=f"{self.value(idx)} == {rng}", dtype=self.dtype()), ATOM
        x = e.args[0]
        ax = e.args[-1].name
        pos = _pos_expr(ax, prog, self.need)
        if isinstance(e, ir.Gather):
            src_axes = self.typeof(x).axes
            index = self.value(e.args[1])
            if src_axes == (ax,):
                return self.op("lookup", x=self.value(x), index=index), ATOM
            if (isinstance(x, ir.LogSoftmax) and x.args[-1] == e.args[-1] and "gather_log_softmax" in self.b.ops
                    and self.uses.get(x, 0) <= 1 and x not in self.memo):
                # log_softmax(z)[i] = z[i] - logsumexp(z): no full-size subtraction, where the
                # backend has it and nothing else reads the whole log_softmax
                z = self.tensor_arg(x.args[0])
                return self.op("gather_log_softmax", x=z, axis=pos, index=index), ADD
            return self.op("take_along_axis", x=self.value(x), axis=pos, index=index), ATOM
        key = functions.op_key(e)
        template = self.b.ops[key]
        if ax in prog.variadic:
            # a group of no axes reduces nothing (a reduction over axis=() reduces every axis)
            xs = self.tensor_arg(x)
            return f"{self.op(key, x=xs, axis=pos)} if {self.need(ax)} else {xs}", TERNARY
        xs = self.tensor_arg(x) if template.count("{x}") > 1 else self.value(x)
        return self.op(key, x=xs, axis=pos), (ATOM if template.count("{x}") == 1 else ADD)


def _is_negative(t) -> bool:
    if t.is_Number:
        return bool(t.is_negative)
    if isinstance(t, sp.Mul):
        c, _ = t.as_coeff_Mul()
        return bool(c.is_Number and c.is_negative)
    return False


def _hint(e) -> str:
    table = {ir.LogSoftmax: "log_probs", ir.Softmax: "probs", ir.LogSumExp: "lse", ir.ReduceSum: "total",
             ir.ReduceMean: "avg", ir.ReduceMax: "peak", ir.Gather: "picked", ir.OneHot: "onehot",
             ir.StopGradient: "frozen", sp.exp: "e", sp.log: "lg", ir.softplus: "sp", ir.sigmoid: "sig",
             sp.Piecewise: "branch", sp.Abs: "magnitude", ir.ArgMax: "top", ir.ArgMin: "bottom",
             ir.Round: "rounded", ir.Floor: "floored", ir.Ceil: "ceiled", ir.Sign: "signs"}
    for cls, name in table.items():
        if isinstance(e, cls):
            return name
    return "t"
