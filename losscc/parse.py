"""Stage 2: formula text into the symbolic IR, with names, shapes and dtypes checked.

:func:`build_program` converts each binding (``losscc.convert``, calls in
``losscc.calls``, driven by the function registry ``losscc.functions``), inlines the
bindings, applies the clip guard and checks the loss and the reductions' denominators.
:func:`type_of` types the IR nodes that rewrites create.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field, replace

import sympy as sp

from . import bounded, functions, ir, limits
from .convert import Converter
from .errors import Collector, SpecError
from .spec import Spec
from .specnames import AXIS
from .ttype import TType, union


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
    aliases: dict[str, str] = field(default_factory=dict)  # axis made by rename(x, N=M) -> N

    def typeof(self, expr: sp.Expr) -> TType:
        return type_of(expr, self)


def _merged_order(shapes: list[list[str]]) -> list[str] | None:
    """One order of the axes that keeps each shape's order (the first-seen free axis first),
    or None where two shapes order two axes differently."""
    seen: list[str] = []
    after: dict[str, set[str]] = {}
    for names in shapes:
        for k, a in enumerate(names):
            if a not in seen:
                seen.append(a)
            after.setdefault(a, set()).update(names[k + 1:])
    order: list[str] = []
    left = list(seen)
    while left:  # Kahn's algorithm
        free = next((a for a in left if not any(a in after[b] for b in left if b != a)), None)
        if free is None:
            return None
        order.append(free)
        left.remove(free)
    return order


def global_axes(spec: Spec, out: Collector) -> tuple[tuple[str, ...], frozenset[str]]:
    """The global axis order: every input's axes in its own order, merged (inputs [N, D] and
    [M, D] give N, M, D); where several orders fit, an axis seen first comes first. The first
    input whose order contradicts those before it is E211."""
    shapes: list[list[str]] = []
    order: list[str] = []
    for inp in spec.inputs:
        names = [a.lstrip("*") for a in inp.shape]
        merged = _merged_order(shapes + [names])
        if merged is None:
            out.error(inp.loc.line, inp.loc.col, "E211",
                      f"inputs.{inp.name}.shape: axes must appear in the same order in every input "
                      f"(the inputs before it give the order {', '.join(order)})")
            break
        shapes.append(names)
        order = merged
    variadic = frozenset(a.lstrip("*") for i in spec.inputs for a in i.shape if a.startswith("*"))
    return tuple(order), variadic


def renamed_axes(spec: Spec, axes: tuple[str, ...], variadic: frozenset[str]) -> dict[str, str]:
    """The new axes the formula's ``rename(x, N=M)`` calls make: M -> N, for N a fixed axis of
    the inputs and M an upper-case name that no input, parameter or binding has (the call's
    typing rule reports every other use, with its position). Text that does not parse is
    left to the converter."""
    names = {i.name for i in spec.inputs} | {p.name for p in spec.params} | {b.name for b in spec.bindings}
    out: dict[str, str] = {}
    for b in spec.bindings:
        if "rename" not in b.text:
            continue
        try:
            tree = ast.parse("(" + b.text + "\n)", mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        calls = [n for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "rename"]
        for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):  # in the order written
            for kw in node.keywords:
                new = kw.value.id if isinstance(kw.value, ast.Name) else None
                if (kw.arg in axes and kw.arg not in variadic and new and AXIS.match(new)
                        and new not in axes and new not in names and new not in out):
                    out[new] = kw.arg
    return out


def with_renamed(axes: tuple[str, ...], aliases: dict[str, str]) -> tuple[str, ...]:
    """The global order with each renamed axis right after its source (and its earlier aliases):
    a tensor on N then moves to M by a reshape, with no transpose."""
    order = list(axes)
    for new, old in aliases.items():
        k = order.index(old) + 1
        while k < len(order) and aliases.get(order[k]) == old:
            k += 1
        order.insert(k, new)
    return tuple(order)


def build_program(spec: Spec) -> Program:
    out = Collector(spec.path)
    axes, variadic = global_axes(spec, out)
    out.raise_if_errors()
    aliases = renamed_axes(spec, axes, variadic)
    axes = with_renamed(axes, aliases)
    symbols: dict[str, sp.Symbol] = {}
    env: dict[str, tuple[sp.Expr, TType]] = {}
    for a in axes:
        symbols[a] = sp.Symbol(a)
    for inp in spec.inputs:
        s = sp.Symbol(inp.name)
        symbols[inp.name] = s
        index_of = None
        # a label of axis C lies in [0, C): a closed end "[0, C]" allows C, past the axis
        if inp.dtype == "int" and isinstance(inp.domain.hi, str) and inp.domain.lo == 0 and not inp.domain.hi_closed:
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
    conv = Converter(spec, axes, variadic, env, types, out)
    conv.aliases = aliases
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
        if res is not None and ir.tree_size(res[0]) > limits.MAX_TREE:
            # checked per binding, not at the end: bindings that use the one before several
            # times triple the tree each time, and SymPy walks trees (not DAGs) in places
            out.error(b.loc.line, b.loc.col, "E104",
                      f"formula exceeds the limit 'tree' ({limits.MAX_TREE} nodes after inlining the bindings)")
            out.raise_if_errors()
        if res is not None and _tree_depth(res[0]) > limits.MAX_TREE_DEPTH:
            # bindings nest: each one may add the limit 'depth', and the compiler's stages walk
            # the inlined loss recursively
            out.error(b.loc.line, b.loc.col, "E104", f"formula exceeds the limit 'tree_depth' "
                      f"({limits.MAX_TREE_DEPTH} levels of nesting after inlining the bindings)")
            out.raise_if_errors()
        bad = None if res is None else bounded.non_real(res[0])
        if bad is not None:  # SymPy folds 1 / where(c, t, 0) into where(c, 1 / t, zoo)
            out.error(b.loc.line, b.loc.col, "E207" if bad is sp.zoo else "E203",
                      "division by zero in a branch of a where (1 / 0 folded to complex infinity)" if bad is sp.zoo
                      else f"a part of the formula folds to {bad}, which is not a real number" if not bad.is_Float
                      else "a part of the formula folds to a constant beyond 1e300 (a power of a where "
                           "distributes into its branches)")
            out.raise_if_errors()
        if res is not None:
            env[b.name] = res
            bound.append((b.name, res[0]))
        else:
            conv.failed.add(b.name)
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
        scratch = Program(spec, axes, variadic, symbols, (), bound[-1][1], {}, types, aliases)
        for _, e in bound:
            type_of(e, scratch)
    loss_name, loss = bound[-1]
    last = spec.bindings[-1]
    lt = types.get(loss) or env[loss_name][1]  # a constant is not memoised (Converter._t)
    if ir.is_constant(loss):
        out.error(last.loc.line, last.loc.col, "E251",
                  f"the loss '{loss_name}' simplifies to the constant {loss}: it does not depend on any "
                  "float input or learnable tensor")
    elif lt.dtype != "float":
        out.error(last.loc.line, last.loc.col, "E250",
                  f"the loss '{loss_name}' must be a float expression, not {lt.dtype}")
    elif lt.literal:
        out.error(last.loc.line, last.loc.col, "E250",
                  f"the loss '{loss_name}' still has the literal axis of a learnable tensor")
    elif not lt.grad:
        out.error(last.loc.line, last.loc.col, "E251",
                  f"the loss '{loss_name}' does not depend on any float input or learnable tensor")
    if lt.dtype == "float":
        _check_ignored(spec, symbols, types, loss, loss_name, lt, last, out)
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
    for b in spec.bindings[:-1]:  # a denominator's use counts (a count of positives, say)
        if b.name not in used:
            out.error(b.name_loc.line, b.name_loc.col, "E142", f"binding '{b.name}' is never used")
    out.raise_if_errors()
    composed = getattr(conv, "composed", ())
    if composed:  # the header's digest covers the called specs too (check notices their change)
        digest = hashlib.sha256(" ".join([spec.source_sha256, *(f"{n}:{h}" for n, h in composed)]).encode())
        spec = replace(spec, source_sha256=digest.hexdigest(),
                       composes=tuple(dict.fromkeys(n for n, _ in composed)))
    return Program(spec, axes, variadic, symbols, tuple(bound), loss, denominators, types, aliases)


def _check_ignored(spec, symbols, types, loss, loss_name, lt, last, out) -> None:
    """`ignore:` masks the loss per element, after the formula: the loss must keep the
    label's axes, and nothing in the formula may reduce the label over them (the masked
    label reads as 0 there, so an ignored position would count as class 0)."""
    for inp in spec.inputs:
        if not inp.ignore:
            continue
        axes = types[symbols[inp.name]].axes
        lacking = [a for a in axes if a not in lt.axes]
        label = symbols[inp.name]
        over = next((n for n in sp.preorder_traversal(loss) if isinstance(n, ir.TensorOp)
                     and isinstance(n.args[-1], sp.Symbol) and n.args[-1].name in axes
                     and type(n) not in (ir.Size, ir.Index) and n.args[0].has(label)), None)
        if lacking or over is not None:
            why = (f"the loss '{loss_name}' lacks its axes [{', '.join(lacking)}]" if lacking else
                   f"the formula reduces it over axis {over.args[-1].name}")
            out.error(last.loc.line, last.loc.col, "E254",
                      f"input '{inp.name}' declares ignore: {inp.ignore}, but {why}: ignored positions are "
                      "masked per element of the loss, after the formula",
                      "keep the label's axes in the loss and reduce with `reductions:`, or ignore inside the "
                      f"formula (where({inp.name} != {inp.ignore}, ..., 0), a called spec's ignore_index) "
                      "without `ignore:`")


def _tree_depth(expr: sp.Expr) -> int:
    """Nodes on the longest path from `expr` to a leaf (iterative, linear time)."""
    depth: dict = {}
    stack = [(expr, False)]
    while stack:
        e, ready = stack.pop()
        if ready:
            depth[e] = 1 + max((depth[a] for a in e.args), default=0)
        elif e not in depth:
            stack.append((e, True))
            stack.extend((a, False) for a in e.args)
    return depth[expr]


def type_of(expr: sp.Expr, prog: Program) -> TType:
    """The type of an IR expression built by rewrites (memoised in prog.types)."""
    t = prog.types.get(expr)
    if t is None:
        t = _infer(expr, prog)
        prog.types[expr] = t
    return t


def _infer(expr: sp.Expr, prog: Program) -> TType:
    """Types for nodes that rewrites create; mirrors the converter's rules (a function's node by
    its registry record's typing rule)."""
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
    f = functions.of_node(expr)
    rule = f.rule if f is not None else ""  # a function's node: typed by its record's rule
    if rule in ("stop_gradient", "piecewise_constant"):
        return TType("float", args[0].axes)
    if rule == "arg_extremum":
        ax = expr.args[1].name
        return TType("int", tuple(a for a in args[0].axes if a != ax), index_of=ax)
    if rule == "reduce":
        ax = expr.args[1].name
        return TType("float", tuple(a for a in args[0].axes if a != ax), grad=grad)
    if rule == "keep":
        return TType("float", args[0].axes, grad=grad)
    if rule == "index":
        return TType("float", (expr.args[0].name,))
    if rule == "rename":
        old, new = expr.args[1].name, expr.args[2].name
        return TType(args[0].dtype, union([[new if a == old else a for a in args[0].axes]], prog.axes), grad=grad,
                     index_of=args[0].index_of)
    if rule == "one_hot":
        return TType("float", union([args[0].axes, (expr.args[1].name,)], prog.axes))
    if isinstance(expr, ir.Size):
        return TType("float")
    if isinstance(expr, ir.Gather):
        ax = expr.args[-1].name
        rest = tuple(a for a in args[0].axes if a != ax)
        return TType("float", union([rest, args[1].axes], prog.axes), grad=args[0].grad)
    if isinstance(expr, ir.Item):
        return TType("float", (), grad=True)
    if isinstance(expr, ir.Component):
        ax = expr.args[-1].name
        return TType("float", tuple(a for a in args[0].axes if a != ax), grad=grad)
    if isinstance(expr, (sp.Rel, sp.And, sp.Or, sp.Not, sp.ITE)):
        return TType("bool", union([a.axes for a in args], prog.axes))
    if isinstance(expr, sp.Piecewise):
        vals = [type_of(e, prog) for e, _ in expr.args]
        conds = [type_of(c, prog) for _, c in expr.args]
        dtype = "int" if all(v.dtype == "int" for v in vals) else "float"
        return TType(dtype, union([v.axes for v in vals] + [c.axes for c in conds], prog.axes),
                     grad=any(v.grad for v in vals))
    return TType("float", union([a.axes for a in args], prog.axes), grad=grad)


__all__ = ["Program", "SpecError", "TType", "build_program", "type_of"]
