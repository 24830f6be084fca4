"""Stage 5: the rewritten IR into straight-line code for one backend.

Layout rule (the reason the lowering is small): every tensor is kept in a
*canonical layout* -- the program's global axis order, right-aligned, with size-1
dimensions for the axes it lacks.  Reductions keep their axis (``keepdim``) and
gathers keep the class axis as size 1, so every elementwise operation broadcasts
by plain NumPy rules and every axis has one fixed negative position
(:mod:`losscc.shapes`).  Inputs are reshaped into the layout once, at entry; the loss
is reshaped back for ``reduction="none"``.

Common subexpressions become named statements (the user's binding names where a
rewritten binding survives), so each value is computed once; the generated function's
own names come from :mod:`losscc.localnames`.

Each IR node type has a method ``_lower_<TypeName>`` (found along the type's MRO, as
SymPy's printers dispatch): arithmetic, numbers, logic and elementwise calls here,
selections and tensor operators in :mod:`losscc.lower_ops`.  Operators are written
through the backend's spellings (:meth:`Lowerer.op`), whose operands are made safe to
put where the spelling puts them (:mod:`losscc.operands`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from . import fusion, ir
from .backends import Backend
from .layout import power, unary_needs_parens
from .literals import cancelling_pair
from .literals import factored as _factored
from .literals import is_f32_exact as _is_f32_exact
from .literals import is_negative as _is_negative
from .literals import power_of_two
from .lower_ops import OperatorLowering
from .localnames import Locals, allocate, import_names  # noqa: F401  (import_names: re-exported)
from .localnames import hint as _hint
from .operands import ADD, AND, ATOM, CMP, MUL, NOT, OR, POW, UNARY, VALUE_OPERANDS, analyse, is_atomic, is_simple
from .parse import Program, TType
from .ranges import unary_operator
from .shapes import canonical_shape, plain_shape, span  # noqa: F401  (re-exported for the pipeline)
from .spec import Spec

_span = span  # the name pipeline.py imports

_RELATIONS = {sp.StrictLessThan: "<", sp.LessThan: "<=", sp.StrictGreaterThan: ">",
              sp.GreaterThan: ">=", sp.Equality: "==", sp.Unequality: "!="}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


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


class Lowerer(OperatorLowering):
    def __init__(self, prog: Program, backend: Backend, taken: set[str], names: dict[sp.Expr, str],
                 symbol_vars: dict[sp.Symbol, str], locals_: Locals | None = None,
                 flags: dict | None = None, values: dict | None = None):
        self.prog, self.b = prog, backend
        self.flags = flags or {}            # condition -> the Python bool computed before the body
        # float hyperparameter -> the variable holding its Python number (a built-in's argument)
        self.values = values or {}
        self.values_used: set = set()
        self.fused: dict = {}               # IR node -> fusion.Match (fuse_over)
        self.unfused: set = set()           # nodes being lowered as their composite form
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

    def fuse_over(self, *exprs) -> None:
        """The backend's fused built-ins that may occur in `exprs` (losscc.fusion)."""
        if self.b.fused:
            self.fused = fusion.candidates(self.prog, self.b.fused, sp.Tuple(*[e for e in exprs if e is not None]))

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
        for src in self.b.helper_sources(op):
            if src not in self.helpers:
                self.helpers.append(src)

    def op(self, key: str, **operands) -> str:
        """The backend's spelling of `key` over `operands` (code), each operand made safe where
        the spelling puts it (losscc.operands)."""
        self.helper(key)
        spelling = self.b.ops.get(key)
        if spelling is not None:
            for name, slot in analyse(spelling).slots.items():
                code = operands.get(name)
                if code is None:
                    continue
                if slot.uses > 1 and name not in VALUE_OPERANDS and not is_simple(code):
                    operands[name] = self.materialize_code(code)
                elif not slot.bare and not is_atomic(code):
                    operands[name] = f"({code})"
        return self.b.op(key, **operands)

    def call(self, key: str, **operands) -> tuple[str, int]:
        """:meth:`op`, with the precedence of the spelled expression."""
        code = self.op(key, **operands)
        return code, analyse(self.b.ops[key]).precedence

    def materialize_code(self, code: str) -> str:
        var = self.fresh("t")
        self.stmts.append(f"{var} = {code}")
        return var

    def tensor_code(self, code: str) -> str:
        return code if code.isidentifier() else self.materialize_code(code)

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

    def python_value(self, sym) -> str:
        """The Python number a float hyperparameter was called with."""
        self.values_used.add(sym)
        return self.values.get(sym, self.symbol_vars[sym])

    def scalar_like(self, e) -> bool:
        """A value the generated code holds as a Python number (not a tensor)."""
        if e.is_Number:  # also one typed with axes where a tensor expression folded to it (`x - x`)
            return True
        if self.typeof(e).axes:
            return False
        tensors = {self.prog.symbols[lr.name] for lr in self.prog.spec.learnable}
        if self.b.wrap_scalars:
            tensors |= {self.prog.symbols[p.name] for p in self.prog.spec.params if p.kind == "float"}
        return not (e.free_symbols & tensors) and not e.has(ir.Item)

    def _constant_bound(self, e) -> bool:
        """A scalar that no gradient flows into: numbers and hyperparameters."""
        if e.is_Number:  # also one that a tensor expression folded to (`x - x`), typed with its axes
            return True
        if self.typeof(e).axes or e.has(ir.Item):
            return False
        params = {self.prog.symbols[p.name] for p in self.prog.spec.params}
        return e.free_symbols <= params

    def is_flag(self, c) -> bool:
        """A condition on hyperparameters held as Python numbers alone (int, bool; float ones
        a backend does not wrap): a Python bool, never a tensor op's operand."""
        if c in self.flags:
            return True
        if not isinstance(c, (sp.Rel, sp.And, sp.Or, sp.Not, sp.ITE, sp.Symbol)) or c.has(ir.TensorOp):
            return False
        if isinstance(c, sp.Symbol) and self.typeof(c).dtype != "bool":
            return False
        if c.atoms(sp.Function):  # log1p(p) > 1 calls a framework op: a traced value under a jit
            return False
        params = {self.prog.symbols[p.name] for p in self.prog.spec.params}
        return bool(c.free_symbols) and c.free_symbols <= params and self.scalar_like(c)

    # ---------------------------------------------------------------- nodes
    def build(self, e: sp.Expr) -> tuple[str, int]:
        """Code and precedence of `e`, from the ``_lower_<Type>`` method of its nearest type."""
        if e in self.flags:
            return self.flags[e], ATOM
        if e in self.fused and e not in self.unfused:
            m = fusion.match(e, self.fused, self.prog)
            if m is not None:
                return self.fused_call(e, m)
        if not e.is_Atom and e.is_number and not e.has(ir.TensorOp):
            e = sp.Float(e.evalf(20), 17)  # constant folding: log(2*pi) is a number
        for cls in type(e).__mro__:
            method = getattr(self, f"_lower_{cls.__name__}", None)
            if method is not None:
                return method(e)
        raise NotImplementedError(f"no lowering for {type(e).__name__}")

    def _lower_Symbol(self, e) -> tuple[str, int]:
        if e in self.symbol_vars:
            return self.symbol_vars[e], ATOM
        raise KeyError(f"no variable for symbol {e}")

    def _lower_BooleanAtom(self, e) -> tuple[str, int]:  # sp.true, sp.false
        return str(bool(e)), ATOM

    def _lower_Integer(self, e) -> tuple[str, int]:
        v = int(e)
        if abs(v) > 2**53:  # no framework takes a Python int past int64; a float holds it as well as any
            return self._lower_Number(sp.Float(v))
        return str(v), ATOM if v >= 0 else UNARY

    def _lower_Number(self, e) -> tuple[str, int]:
        v = float(e)
        text = repr(v)
        if self.b.wrap_scalars and not _is_f32_exact(v):
            return self.wrapped(text)
        return text, ATOM if v >= 0 else UNARY

    _lower_NumberSymbol = _lower_Number  # pi, E

    def _lower_Function(self, e) -> tuple[str, int]:
        """An elementwise function of one argument (the call-lowering entry point)."""
        key = unary_operator(e, self.b.ops, self.prog)  # one operator on its argument (maybe its x <= 0 form)
        if key is not None:
            return self.call(key, x=self.function_arg(e.args[0]))
        raise NotImplementedError(f"no lowering for {type(e).__name__}")

    def sizes_typed(self) -> bool:
        """The backend's axis sizes are tensors of the dtype (else Python ints)."""
        return "dtype" in analyse(self.b.ops["size_value"]).slots

    def function_arg(self, e: sp.Expr) -> str:
        """A function's argument; of axis sizes only (`log(C + 1)`) a tensor of the dtype."""
        code = self.value(e)
        if _sizes_only(e) and not self.sizes_typed() and not (
                self.b.wrap_scalars and any(not _is_f32_exact(float(n)) for n in e.atoms(sp.Float))):
            return self.op("cast", x=code, dtype=self.dtype())
        return self.wrapped(code)[0] if self.b.wrap_scalars and self.python_number(e) else code  # exp(k), k an int

    def _lower_And(self, e) -> tuple[str, int]:
        if self.is_flag(e):
            return " and ".join(self.wrap(a, AND + 1) for a in e.args), AND
        return self.fold("and", e.args), ATOM

    def _lower_Or(self, e) -> tuple[str, int]:
        if self.is_flag(e):
            return " or ".join(self.wrap(a, OR + 1) for a in e.args), OR
        return self.fold("or", e.args), ATOM

    def _lower_Not(self, e) -> tuple[str, int]:
        if self.is_flag(e):
            return f"not {self.wrap(e.args[0], NOT)}", NOT
        return self.call("not", x=self.value(e.args[0]))

    def fold(self, key, args):
        code = self.value(args[0])
        for a in args[1:]:
            code = self.op(key, x=code, y=self.value(a))
        return code

    def _lower_Add(self, e: sp.Add) -> tuple[str, int]:
        got = _factored(e)  # a number SymPy distributed over a difference, taken out again
        if got is not None:
            c, inner, rest = got
            if not rest:
                return f"{self.wrap(c, MUL)} * {self.wrap(inner, MUL + 1)}", MUL
            e = sp.Add(sp.Mul(c, inner, evaluate=False), *rest, evaluate=False)
        terms = list(e.args)
        # positive terms first ("1 - x"); constants last after two or more tensor terms ("x1 - x2 + eps",
        # not "eps + x1 - x2"); one tensor term: numbers, tensor, hyperparameters ("1 - p + eps")
        tensors = [t for t in terms if not self._constant_bound(t)]
        last = len(tensors) >= 2 and not all(_is_negative(t) for t in tensors) and len(tensors) < len(terms)
        one = len(tensors) == 1 and len(terms) > 2
        terms.sort(key=lambda t: (0 if t.is_number else 1 if t in tensors else 2) if one else
                   (last and self._constant_bound(t), _is_negative(t)))
        out, pair = "", cancelling_pair(terms)
        if pair:  # f(a) - f(b) first: exact where they are close (Itakura-Saito's log(i) - log(t))
            out = f"{self.wrap(pair[0], ADD)} - {self.wrap(-pair[1], MUL)}"
            terms = [t for t in terms if t not in pair]
            out = f"({out})" if terms else out
        for t in terms:
            if _is_negative(t):
                out = f"{out} - {self.wrap(-t, MUL)}" if out else self.negate(-t, UNARY)
            else:
                code = self.wrap(t, ADD)
                out = f"{out} + {code}" if out else code
        return out, ADD

    def _lower_Mul(self, e: sp.Mul) -> tuple[str, int]:
        coeff, rest = e.as_coeff_Mul()
        if coeff == -1:
            if isinstance(rest, sp.Add) and len(rest.args) == 2 and sum(map(_is_negative, rest.args)) == 1:
                return self._lower_Add(sp.Add(*(-t for t in rest.args)))  # -(x - y) is y - x, exactly
            return self.negate(rest, UNARY + 1), UNARY
        num, den = [], []
        for f in (e.args if coeff == 1 else (coeff,) + sp.Mul.make_args(rest)):
            if isinstance(f, sp.Pow) and f.exp.is_Number and f.exp.is_negative:
                den.append(f.base ** -f.exp)
            elif f.is_Rational and not f.is_Integer and f.p == 1:
                den.append(sp.Integer(f.q))
            else:
                num.append(f)
        code = " * ".join(self._factor(f, num) for f in num) if num else "1"
        if den:
            t = not all(self.python_number(f) for f in num)  # a tensor divided
            dcode = self._divisor(den[0], MUL + 1, t) if len(den) == 1 else \
                "(" + " * ".join(self._divisor(f, MUL, t) for f in den) + ")"
            code = f"{code} / {dcode}"
        return code, MUL

    def _divisor(self, f: sp.Expr, prec: int, of_tensor: bool = True) -> str:
        """A factor of a denominator; an integer other than 2**k, or hyperparameters (x / k, k an
        int) dividing a tensor, a tensor of the dtype where Python numbers round to float32
        (a graph mode scaled x / 3 by float32 1/3: 3e-8 off in float64)."""
        if self.b.wrap_scalars and (f.is_Integer and not power_of_two(float(f))
                                    or of_tensor and not f.is_Number and self.python_number(f)):
            return self.b.scalar.format(value=repr(float(f)) if f.is_Integer else self.value(f), dtype=self.dtype())
        return self.wrap(f, prec)

    def _lower_Pow(self, e: sp.Pow) -> tuple[str, int]:
        base, ex = e.args
        if ex in (sp.Rational(1, 2), sp.Rational(-1, 2)):
            return self.call("sqrt" if ex > 0 else "rsqrt", x=self.function_arg(base))
        if ex.is_Number and ex.is_negative:  # 1 / C of Python ints: a tensor where they round to float32
            return f"1 / {self.wrap(self._of_sizes(base ** -ex), MUL + 1)}", MUL
        if ex == 2 and "square" in self.b.ops and not self.python_number(base):  # a slow generic pow kernel
            return self.call("square", x=self.value(base))
        if ex.is_Integer:
            return power(self.wrap(base, ATOM), str(int(ex))), POW
        if (not ex.is_Number and self.typeof(ex).dtype == "int" and self.python_number(base)
                and (base.is_Integer or self.typeof(base).dtype == "int")):
            # int ** int of Python ints: a graph compiler may keep it an int (2 ** -2 is 0)
            code = self.wrap(self.filled((), base), ATOM) if self.b.wrap_scalars else (
                repr(float(base)) if base.is_Number else f"float({self.wrap(base, ATOM)})")
            return power(code, self.wrap(ex, ATOM)), POW
        if self.b.wrap_scalars and self.python_number(ex) and self.typeof(ex).dtype != "int":  # 1 / r: a float32 scale
            ex = ex.xreplace({s: self.filled((), s) for s in ex.free_symbols})  # tensor arithmetic of the dtype
        return power(self.wrap(base, ATOM), self.wrap(ex, ATOM)), POW

    def _lower_Relational(self, e) -> tuple[str, int]:
        sym = _RELATIONS[type(e)]
        lhs, rhs = e.args
        if not self.typeof(lhs).axes and self.typeof(rhs).axes:
            lhs, rhs, sym = rhs, lhs, _FLIP[sym]
        lcode, rcode = self.wrap(lhs, CMP + 1), self.wrap(rhs, CMP + 1)
        # argmax/argmin give int64; a framework may refuse to compare int64 with an int32 label
        if isinstance(lhs, ir.ARG_EXTREMA) and isinstance(rhs, sp.Symbol) and self.typeof(rhs).axes:
            lcode = self.op("cast", x=lcode, dtype=f"{rcode}.dtype")
        elif isinstance(rhs, ir.ARG_EXTREMA) and isinstance(lhs, sp.Symbol) and self.typeof(lhs).axes:
            rcode = self.op("cast", x=rcode, dtype=f"{lcode}.dtype")
        else:  # an int tensor against a float one (index(C) == label): a backend may promote neither
            lt, rt = self.typeof(lhs), self.typeof(rhs)
            if lt.axes and rt.axes and {lt.dtype, rt.dtype} == {"int", "float"}:
                if lt.dtype == "int":
                    lcode = self.op("cast", x=lcode, dtype=self.dtype())
                else:
                    rcode = self.op("cast", x=rcode, dtype=self.dtype())
        return f"{lcode} {sym} {rcode}", CMP


def _sizes_only(e: sp.Expr) -> bool:
    """An expression of axis sizes and numbers only (`C + 1`): no tensor in it."""
    return e.has(ir.Size) and not e.xreplace({s: sp.S.One for s in e.atoms(ir.Size)}).free_symbols
