"""Stage 2: formula text into the symbolic IR, with names, shapes and dtypes checked.

:func:`build_program` converts each binding (``losscc.convert``, calls in
``losscc.calls``, driven by the function registry ``losscc.functions``), inlines the
bindings, applies the clip guard and checks the loss and the reductions' denominators.
:func:`type_of` types the IR nodes that rewrites create.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import sympy as sp

from . import functions, ir, limits
from .convert import Converter
from .errors import Collector, SpecError
from .spec import Spec
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

    def typeof(self, expr: sp.Expr) -> TType:
        return type_of(expr, self)


def global_axes(spec: Spec, out: Collector) -> tuple[tuple[str, ...], frozenset[str]]:
    """The one axis order every input's shape follows: the order of first appearance where
    that is consistent, else the order that puts each axis as early as the inputs allow
    (features [N, D] and a table [C, D] give N, C, D); none is E211."""
    seen: list[str] = []
    before: dict[str, set[str]] = {}
    for inp in spec.inputs:
        names = [a.lstrip("*") for a in inp.shape]
        for k, a in enumerate(names):
            if a not in seen:
                seen.append(a)
            before.setdefault(a, set()).update(names[:k])
    order: list[str] = []
    while len(order) < len(seen):
        ready = next((a for a in seen if a not in order and before[a] <= set(order)), None)
        if ready is None:  # a cycle: first appearance, which the check below refuses
            order += [a for a in seen if a not in order]
            break
        order.append(ready)
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
    conv = Converter(spec, axes, variadic, env, types, out)
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
    size = ir.tree_size(bound[-1][1])
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
    composed = getattr(conv, "composed", ())
    if composed:  # the header's digest covers the called specs too (check notices their change)
        digest = hashlib.sha256(" ".join([spec.source_sha256, *(f"{n}:{h}" for n, h in composed)]).encode())
        spec = replace(spec, source_sha256=digest.hexdigest(),
                       composes=tuple(dict.fromkeys(n for n, _ in composed)))
    return Program(spec, axes, variadic, symbols, tuple(bound), loss, denominators, types)


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
