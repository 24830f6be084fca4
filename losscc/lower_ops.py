"""Stage 5, continued: :class:`losscc.lower.Lowerer`'s ``_lower_<Type>`` methods for the selecting nodes
(max/min, clip, where, Piecewise, round) and the tensor operators; ties as losscc.backends.operators says."""

from __future__ import annotations

import re

import sympy as sp

from . import functions, fusion, ir
from .operands import ATOM, CMP, MUL, TERNARY, UNARY, analyse
from .shapes import canonical_shape, plain_shape, pos_expr
from .ttype import TType
from .lower_diff import DiffLowering

_NUMBER = re.compile(r"-?(\d+\.?\d*(e[-+]?\d+)?|inf)")


class OperatorLowering(DiffLowering):
    """Selections and tensor operators; the bookkeeping (emit, op, value, ...) is the
    subclass's, :class:`losscc.lower.Lowerer`."""

    zero_terms: frozenset = frozenset()  # selects whose 0 branch may stay a number (losscc.selects)

    # ---------------------------------------------------------------- selections
    def static_part(self, c):
        """The first sub-condition of `c` that :meth:`is_flag` (a Python bool) when `c` also
        reads tensors, else None: `c` is then `s ? c[s:=True] : c[s:=False]`."""
        if self.is_flag(c) or not isinstance(c, (sp.And, sp.Or, sp.Not, sp.ITE)):
            return None
        for a in c.args:
            if self.is_flag(a):
                return a
            inner = self.static_part(a)
            if inner is not None:
                return inner
        return None

    def _lower__PiecewiseConstant(self, e) -> tuple[str, int]:
        """round floor ceil sign; integer arguments are cast to the float dtype first."""
        key = functions.op_key(e)
        x = e.args[0]
        t = self.typeof(x)
        if t.dtype == "int" and self.scalar_like(x) and ir.arithmetic(x):  # an integer parameter: a Python int
            v = self.wrap(x, CMP + 1)
            return (f"(({v} > 0) - ({v} < 0))", ATOM) if key == "sign" else (v, self.emit(x)[1])
        if self._python_number(x):  # of hyperparameters held as Python numbers: no tensor op
            v = self.wrap(x, MUL + 1)
            return {"sign": f"(({v} > 0) - ({v} < 0))", "floor": f"({v} // 1)", "ceil": f"(-(-{v} // 1))",
                    "round": f"round({self.value(x)})"}[key], ATOM
        code = self.value(x)
        if t.dtype == "int":
            code = self.op("cast", x=code, dtype=self.dtype())
            if key != "sign":
                return code, ATOM  # an integer is its own round, floor and ceil
        return self.call(key, x=code)

    def _lower_MinMaxBase(self, e) -> tuple[str, int]:
        """max/min, folded left over the arguments (tensors first, then bounds).

        Against a bound that is not differentiated (a number or a hyperparameter) it is a
        one-sided clip: at a tie the gradient goes to the tensor (torch.clamp's convention,
        the hinge of margin losses passes gradient). Between two differentiated values it is
        maximum/minimum: at a tie each side gets half (torch.maximum's convention); the
        operators declare both (docs/spec.md, "Gradients at ties and kinks")."""
        args = list(e.args)
        args.sort(key=lambda a: 0 if not self._constant_bound(a) else 1)
        is_max = isinstance(e, sp.Max)
        clip, bound_name = ("clip_min", "lo") if is_max else ("clip_max", "hi")
        pair = "maximum" if is_max else "minimum"
        if self._constant_bound(args[0]):  # no tensor among the arguments: no gradient, no tie rule
            return self._select_fold(e, args), ATOM
        code = self.value(args[0])
        for other in args[1:]:
            if self._constant_bound(other):
                code = self.op(clip, x=code, **{bound_name: self.value(other)})
            else:
                code = self.op(pair, x=code, y=self.value(other))
        return code, ATOM

    def _python_number(self, e) -> bool:
        """Of hyperparameters alone, held as a Python number (`sqrt(scale)` is a 0-d tensor)."""
        params = {self.prog.symbols[p.name] for p in self.prog.spec.params}
        return bool(e.free_symbols) and e.free_symbols <= params and self.scalar_like(e) and ir.arithmetic(e)

    def _select_fold(self, e, args) -> str:
        if all(a.is_Number or self._python_number(a) for a in args):  # Python numbers: Python's max/min
            return f"{'max' if isinstance(e, sp.Max) else 'min'}({', '.join(self.value(a) for a in args)})"
        rel = ">=" if isinstance(e, sp.Max) else "<="
        code = self.value(args[0])
        first_scalar = self.scalar_like(args[0])
        for other in args[1:]:
            left = code if code.isidentifier() else self.materialize_code(code)
            code = self.where_codes(f"{left} {rel} {self.wrap(other, CMP + 1)}", left, self.value(other),
                                    first_scalar, self.scalar_like(other))
            first_scalar = False
        return code

    def wrapped(self, text: str) -> tuple[str, int]:
        """A number as a tensor of the dtype (a wrapping backend), negated outside the tensor:
        a graph mode may compute the minus of a literal `-1.17` in float32 (docs/design.md,
        entry 51), never the minus of a tensor."""
        if text.startswith("-"):
            return "-" + self.b.scalar.format(value=text[1:], dtype=self.dtype()), UNARY
        return self.b.scalar.format(value=text, dtype=self.dtype()), ATOM

    def _lower_Clip(self, e) -> tuple[str, int]:
        x, lo, hi = e.args
        if self.python_number(x):  # clip(1, a, 2): the framework's clip takes a tensor
            x = self.filled((), x) if x.is_number else self.ones(()) * x
        lo_c, hi_c = self.value(lo), self.value(hi)
        literal = [bool(_NUMBER.fullmatch(c)) for c in (lo_c, hi_c)]
        if self.b.wrap_scalars and literal[0] != literal[1]:
            # one bound a tensor, the other a Python number: a wrapping backend's clip may take neither mix
            lo_c, hi_c = (self.wrapped(c)[0] if lit else c for c, lit in zip((lo_c, hi_c), literal))
        return self.call("clip", x=self.value(x), lo=lo_c, hi=hi_c)

    def _lower_Piecewise(self, e: sp.Piecewise) -> tuple[str, int]:
        pairs = []
        for pair in e.args:  # conditions on numbers alone (sigmoid(0) > 0) decided here
            c = ir.decided(pair.cond)
            if c is sp.false:
                continue
            pairs.append(sp.functions.elementary.piecewise.ExprCondPair(pair.expr, c))
            if c is sp.true:
                break
        if len(pairs) == 1 and pairs[0].cond is sp.true:
            return self.emit(pairs[0].expr)
        for k, pair in enumerate(pairs):
            s = self.static_part(pair.cond)
            if s is not None:  # a condition partly on hyperparameters: decided in Python first
                return self.emit(_split(e, k, s))
        if (len(pairs) == 2 and pairs[0].expr == 1 and pairs[1].expr == 0 and pairs[1].cond is sp.true
                and not self.is_flag(pairs[0].cond)):
            return self.op("cast", x=self.value(pairs[0].cond), dtype=self.dtype()), ATOM
        c0 = pairs[0].cond
        if any(self.is_flag(p.cond) for p in pairs):
            axes = self.typeof(e).axes
            pairs = [sp.functions.elementary.piecewise.ExprCondPair(self.with_axes(p.expr, axes, e in self.zero_terms), p.cond)
                     for p in pairs]
        if len(pairs) == 2 and self.is_flag(c0):
            branched = self.flag_branch(c0, pairs[0].expr, pairs[1].expr, self.names.get(e))
            if branched is not None:
                self.exprs.append((branched, e))
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

    def flag_branch(self, flag, a, b, name: str | None = None) -> str | None:
        """where(flag, a, b) on a boolean hyperparameter as ``if flag: ... else: ...`` where a
        branch needs statements (the branch not taken costs nothing), else None (a ternary)."""
        return self.branch_on(None, flag, a, b, name)

    def branch_on(self, test: str | None, flag, a, b, name: str | None = None) -> str | None:
        """:meth:`flag_branch` on `flag`, or on the Python code `test`; `a` may be code (a str)."""
        blocks = []
        memo = dict(self.memo)
        # each branch names its values afresh: the same names on both sides where they mean the same
        taken, users = set(self.taken), set(self.user_names)
        all_taken, left = set(taken), set(users)
        uses = self.uses
        for e in (a, b):
            start = len(self.stmts)
            self.taken, self.user_names = set(taken), set(users)
            if not isinstance(e, str):  # what is shared, counted in the branch alone (nothing after reuses it)
                self.uses = {}
                self.count(e)
            code = e if isinstance(e, str) else self.value(e)
            self.uses = uses
            blocks.append((code, self.stmts[start:]))
            del self.stmts[start:]
            self.memo = dict(memo)
            all_taken |= self.taken
            left &= self.user_names
        self.taken, self.user_names = all_taken, left
        if not blocks[0][1] and not blocks[1][1]:
            return None
        # reuse the name a branch gives its value (stirling = ... / stirling = 0)
        given = [c for c, st in blocks if st and c.isidentifier() and _assigns(st[-1], c)]
        var = (name if name in given else self.fresh(name)) if name else next(iter(given), None)
        var = var or self.fresh("branch")
        out = []
        for head, (code, st) in zip((f"if {test or self.value(flag)}:", "else:"), blocks):
            out.append(head)
            out += ["    " + line for stmt in st for line in stmt.split("\n")]
            if not (st and _assigns(st[-1], var) and code == var):
                out.append(f"    {var} = {code}")
        self.stmts += out
        return var

    def fused_call(self, e, m) -> tuple[str, int]:
        """A backend's built-in for node `e` (losscc.fusion): the call where its conditions
        hold, decided in Python; the composite form in the other branch."""
        rec = m.record
        shape = fusion.SHAPES[rec.shape]
        ops = {n: self.tensor_arg(m.operands[n]) for n in shape.tensors}
        ops.update({n: self.python_value(m.operands[n]) for n in shape.scalars})
        code = rec.call.format(**ops)
        tests = []
        if rec.dtypes:
            kinds = rec.dtypes[0] if len(rec.dtypes) == 1 else f"({', '.join(rec.dtypes)})"
            tests.append(f"{self.dtype()} {'==' if len(rec.dtypes) == 1 else 'in'} {kinds}")
        tests += [self.b.no_grad.format(x=ops[n]) for n in rec.no_grad]
        if not tests:
            return code, ATOM
        self.unfused.add(e)
        try:
            var = self.branch_on(" and ".join(tests), None, code, e, self.names.get(e))
            if var is None:
                return f"{code} if {' and '.join(tests)} else {self.value(e)}", TERNARY
        finally:
            self.unfused.discard(e)
        self.exprs.append((var, e))
        return var, ATOM

    def where(self, c, a, b, y_code: str | None = None) -> str:
        if y_code is None and self.static_part(c) is not None:
            return self.value(ir.piecewise((a, c), (b, True)))
        if self.is_flag(c) and y_code is None:  # a Python bool: no tensor op takes it as a condition
            branched = self.flag_branch(c, a, b)
            if branched is not None:
                return branched
            return f"({self.wrap(a, TERNARY + 1)} if {self.value(c)} else {self.wrap(b, TERNARY + 1)})"
        yb = y_code if y_code is not None else self.value(b)
        b_s = y_code is None and self.scalar_like(b)
        return self.where_codes(self.value(c), self.value(a), yb, self.scalar_like(a), b_s)

    def where_codes(self, cc: str, xa: str, yb: str, a_s: bool, b_s: bool) -> str:
        # two Python numbers: a backend that rounds them to float32 (wrap_scalars) selects in
        # float32, so they become tensors of the dtype as where it takes no scalars
        if not self.b.where_scalars or (a_s and b_s and self.b.wrap_scalars):
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

    def _lower_Where(self, e) -> tuple[str, int]:
        c, a, b = e.args
        decided = ir.decided(c)  # a guard's condition on numbers alone (0 > 0 of 0**p)
        if decided is sp.true or decided is sp.false:
            return self.emit(a if decided is sp.true else b)
        return self.where(c, a, b), ATOM

    def _lower_ITE(self, e) -> tuple[str, int]:  # SymPy's form of "condition on a where"
        c, a, b = e.args
        if self.is_flag(c):  # a Python bool (a mixed condition is split where it is read)
            return f"{self.wrap(a, TERNARY + 1)} if {self.value(c)} else {self.wrap(b, TERNARY + 1)}", TERNARY
        return self.call("where", c=self.value(c), x=self.value(a), y=self.value(b))

    # ---------------------------------------------------------------- tensor operators
    def _lower_Size(self, e) -> tuple[str, int]:
        name = self.need(e.args[0].name)
        if e.args[0].name in self.prog.variadic:  # a group of axes (*S): its number of entries
            name = self.op("group_size", n=name)
        return self.call("size_value", n=name, dtype=self.dtype() if self.sizes_typed() else None)

    def _lower_Item(self, e) -> tuple[str, int]:
        return f"{self.wrap(e.args[0], ATOM)}[{int(e.args[1])}]", ATOM

    def _lower_Component(self, e) -> tuple[str, int]:
        """Entry k along an axis of a fixed size, kept as size 1: ``x[..., k:k + 1, :]``."""
        x, k, ax = e.args
        pos = pos_expr(ax.name, self.prog, self.need)
        k = int(k)
        if pos.lstrip("-").isdigit():
            key = ", ".join(["...", f"{k}:{k + 1}"] + [":"] * (-int(pos) - 1))
        else:  # variadic axes after it
            key = f"(Ellipsis, slice({k}, {k + 1})) + (slice(None),) * ({pos[1:]} - 1)"
        return f"{self.wrap(x, ATOM)}[{key}]", ATOM  # basic indexing, the same in every backend

    def _lower_StopGradient(self, e) -> tuple[str, int]:
        if self.python_number(e.args[0]):  # a Python number carries no gradient (and round() takes it)
            return self.emit(e.args[0])
        return self.call("stop_gradient", x=self.value(e.args[0]))

    def _lower_OneHot(self, e) -> tuple[str, int]:
        idx, ax = e.args
        index = self.tensor_arg(idx)  # read twice: compared, and the dtype of the positions
        rng = self.op("arange", n=self.need(ax.name), like=index)
        shape = canonical_shape((ax.name,), self.prog, self.need)
        if shape:
            rng = self.op("reshape", x=rng, shape=shape)
        return self.op("cast", x=f"{index} == {rng}", dtype=self.dtype()), ATOM

    def _lower_Index(self, e) -> tuple[str, int]:
        ax = e.args[0].name
        rng = self.op("positions", n=self.need(ax), dtype=self.dtype())
        shape = canonical_shape((ax,), self.prog, self.need)
        return (self.op("reshape", x=rng, shape=shape) if shape else rng), ATOM

    def _lower_Rename(self, e) -> tuple[str, int]:
        """x on axis N, moved to the axis M right after N: a reshape (no axis of x lies between)."""
        x, old, new = e.args
        axes = tuple(new.name if a == old.name else a for a in self.typeof(x).axes)
        axes = tuple(a for a in self.prog.axes if a in axes)
        shape = canonical_shape(axes, self.prog, self.need) or plain_shape(axes, self.prog, self.need)
        return self.call("reshape", x=self.value(x), shape=shape)

    def _of_sizes(self, e):
        """e, a Python number of sizes, with the sizes as tensors where floats round to float32."""
        if not (self.b.wrap_scalars and not self.sizes_typed() and self.scalar_like(e)):
            return e  # the cheap tests first: atoms() walks a shared DAG as a tree
        sizes = e.atoms(ir.Size)
        if sizes and self.python_number(e.xreplace({s: sp.S.One for s in sizes})):
            return e.xreplace({s: self.filled((), s) for s in sizes})
        return e

    def _factor(self, f, num: list) -> str:
        """A factor of a product: a quotient of sizes times a tensor (1 / (H * W) * g) of sizes as tensors."""
        sized = self.scalar_like(f) and not all(map(self.scalar_like, num)) and f.has(sp.Pow)
        return self.wrap(self._of_sizes(f) if sized else f, MUL)

    def python_number(self, e) -> bool:
        """e is held as a Python number: scalar-like and reading no input (a reduced input is a tensor)."""
        inputs = {self.prog.symbols[i.name] for i in self.prog.spec.inputs}
        return self.scalar_like(e) and not e.free_symbols & inputs and not e.has(ir.TensorOp)

    def ones(self, axes) -> sp.Symbol:
        """A tensor of ones of the dtype over `axes` (in the program's order), as a symbol."""
        shape = canonical_shape(axes, self.prog, self.need) or plain_shape(axes, self.prog, self.need)
        ones = sp.Symbol(self.fresh("ones"))
        self.memo[ones] = (self.materialize_code(self.op("full", shape=shape, value="1", dtype=self.dtype())), ATOM)
        self.prog.types[ones] = TType("float", axes)
        return ones

    def with_axes(self, x, axes, keep_zero: bool = True):
        """x broadcast over `axes` where it lacks some (where(flag, 1.0, y) * z was [N] when flag);
        a 0 (a term dropped) broadcasts in any sum, unless it is the loss."""
        axes = tuple(a for a in self.prog.axes if a in axes)
        if (keep_zero and x == 0) or set(self.typeof(x).axes) >= set(axes):
            return x
        return self.filled(axes, x) if x.is_number else self.ones(axes) * x  # ones * a number folds back

    def filled(self, axes, x) -> sp.Symbol:
        """A tensor of the dtype over `axes` holding the number x, as a symbol."""
        shape = canonical_shape(axes, self.prog, self.need) or plain_shape(axes, self.prog, self.need)
        sym = sp.Symbol(self.fresh("filled"))
        self.memo[sym] = (self.op("full", shape=shape, value=self.value(x), dtype=self.dtype()), ATOM)
        self.prog.types[sym] = TType("float", axes)
        return sym

    def _lower_Gather(self, e) -> tuple[str, int]:
        x = e.args[0]
        ax = e.args[-1].name
        pos = pos_expr(ax, self.prog, self.need)
        src_axes = self.typeof(x).axes
        tensors = {self.prog.symbols[i.name] for i in self.prog.spec.inputs} | {
            self.prog.symbols[lr.name] for lr in self.prog.spec.learnable}
        if ax not in src_axes or not x.free_symbols & tensors:
            # the same entry everywhere: constant along the axis, or a number (softmax(x - x) is 1 / C)
            axes = tuple(a for a in self.prog.axes if a in self.typeof(e).axes)
            shape = canonical_shape(axes, self.prog, self.need) or plain_shape(axes, self.prog, self.need)
            if not x.free_symbols & tensors:
                # a number (graph modes round a Python one to float32): ones of the dtype times it
                return self.emit(self.ones(axes) * x)
            return self.call("broadcast_to", x=self.tensor_arg(x), shape=shape)
        index = self.value(e.args[1])
        if src_axes == (ax,):
            return self.call("lookup", x=self.value(x), index=index)
        rest = [a for a in src_axes if a != ax]
        if set(rest) != set(self.typeof(e.args[1]).axes):
            return self._gather_table(e, src_axes)
        if (isinstance(x, ir.LogSoftmax) and x.args[-1] == e.args[-1] and "gather_log_softmax" in self.b.ops
                and self.uses.get(x, 0) <= 1 and x not in self.memo):
            # log_softmax(z)[i] = z[i] - logsumexp(z): no full-size subtraction, where the
            # backend has it and nothing else reads the whole log_softmax
            z = self.tensor_arg(x.args[0])
            return self.call("gather_log_softmax", x=z, axis=pos, index=index)
        return self.call("take_along_axis", x=self.value(x), axis=pos, index=index)

    def _gather_table(self, e, src_axes) -> tuple[str, int]:
        """A table with axes the label lacks (centers [C, D] at label [N]): its entries read
        flat at ``label * D + arange(D)``, which has the result's canonical layout."""
        x, idx, ax = e.args
        index = self.tensor_arg(idx)  # read twice where the table has other axes: positions' dtype
        flat, stride = "", ""
        own = [a for a in self.prog.axes if a in src_axes]
        for k, a in enumerate(reversed(own)):
            if a == ax.name:
                coord = index
            else:
                coord = self.op("arange", n=self.need(a), like=index)
                shape = canonical_shape((a,), self.prog, self.need)
                if shape:
                    coord = self.op("reshape", x=coord, shape=shape)
            term = f"{coord} * {stride}" if stride else coord
            flat = f"{term} + {flat}" if flat else term
            if k < len(own) - 1:  # the first axis's size is not needed
                stride = f"{stride} * {self.need(a)}" if stride else self.need(a)
        return self.call("lookup", x=self.value(x), index=flat)

    def _lower_TensorOp(self, e) -> tuple[str, int]:
        """A reduction over one axis, or softmax/log_softmax along it."""
        key = functions.op_key(e)
        x = e.args[0]
        ax = e.args[-1].name
        pos = pos_expr(ax, self.prog, self.need)
        if ax not in self.typeof(x).axes and ax not in self.prog.variadic:  # constant along ax (w - k, w's default)
            x = self.with_axes(x, self.typeof(x).axes + (ax,), keep_zero=False)
        if ax in self.prog.variadic:
            # a group of no axes reduces nothing (a reduction over axis=() reduces every axis)
            xs = self.tensor_arg(x)
            return f"{self.op(key, x=xs, axis=pos)} if {self.need(ax)} else {xs}", TERNARY
        xs = self.tensor_arg(x) if analyse(self.b.ops[key]).slots["x"].uses > 1 else self.value(x)
        return self.call(key, x=xs, axis=pos)


def _assigns(stmt: str, var: str) -> bool:
    """`stmt` (a last line, maybe of a nested if/else that assigns on both sides) sets `var`."""
    return stmt.lstrip().startswith(f"{var} = ")


def _split(e: sp.Piecewise, k: int, s) -> sp.Piecewise:
    """`e` with pair `k`'s condition decided on the Python bool `s`: ``Piecewise((e[s:=True],
    s), (e[s:=False], True))``, built unevaluated (SymPy's folding of Piecewise is unbounded)."""
    pairs = [(p.expr, p.cond) for p in e.args]
    c = pairs[k][1]
    return ir.piecewise((_decided(pairs, k, c.xreplace({s: sp.true})), s),
                        (_decided(pairs, k, c.xreplace({s: sp.false})), True))


def _decided(pairs: list, k: int, cond):
    out = []
    for expr, c in pairs[:k] + [(pairs[k][0], cond)] + pairs[k + 1:]:
        if c is sp.false:
            continue
        out.append((expr, c))
        if c is sp.true:
            break
    out = out or [pairs[-1]]  # no pair can hold: the Piecewise is undefined, as its last pair's
    return out[0][0] if out[0][1] is sp.true else ir.piecewise(*out)
