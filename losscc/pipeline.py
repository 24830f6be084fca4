"""The pipeline: spec -> program -> prepared IR -> rewrites -> lowering -> source text.

Each stage is a pure function of the previous one's value; :func:`compile_spec`
strings them together for one backend, and :func:`explain` exposes the
intermediate forms.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from . import ir
from .backends import Backend
from .formula import formula_text
from .lower import Block, Lowered, Lowerer, canonical_shape, plain_shape
from .parse import Program, TType, build_program
from .rewrites import (Fired, eps_candidates, guard_branches, guard_eps, guard_gradients, optimize,
                       split_sqrt_products)
from .spec import Spec


@dataclass(frozen=True)
class Prepared:
    """The program with ignore masks applied and stable rewrites done."""

    prog: Program
    loss: sp.Expr                       # rewritten per-element loss (masked)
    denominators: dict                  # reduction -> rewritten per-element denominator or None
    names: dict                         # rewritten node -> user binding name
    masks: tuple[tuple[str, sp.Symbol], ...]  # (input name, mask symbol)
    fired: tuple[Fired, ...]


def prepare(spec: Spec) -> Prepared:
    prog = build_program(spec)
    taken = _taken(spec)
    masks = []
    for inp in spec.inputs:
        if inp.ignore:
            name = "valid" if sum(1 for i in spec.inputs if i.ignore) == 1 else f"valid_{inp.name}"
            while name in taken:
                name += "_"
            taken.add(name)
            sym = sp.Symbol(name)
            prog.types[sym] = TType("bool", prog.types[prog.symbols[inp.name]].axes)
            masks.append((inp.name, sym))
    fired: list[Fired] = []
    memo: dict = {}
    loss = optimize(prog.loss, memo=memo, fired=fired)
    dens = {k: (optimize(v, memo=memo, fired=fired) if v is not None else None)
            for k, v in prog.denominators.items()}
    smemo: dict = {}
    loss = split_sqrt_products(loss, prog, fired, smemo)
    dens = {k: (split_sqrt_products(v, prog, fired, smemo) if v is not None else None) for k, v in dens.items()}
    for old, new in list(memo.items()):
        memo[old] = smemo.get(new, new)
    gmemo: dict = {}
    bmemo: dict = {}
    loss = guard_branches(guard_gradients(loss, prog, fired, gmemo), prog, fired, bmemo)
    dens = {k: (guard_branches(guard_gradients(v, prog, fired, gmemo), prog, fired, bmemo) if v is not None else None)
            for k, v in dens.items()}
    for old, new in list(memo.items()):
        memo[old] = bmemo.get(gmemo.get(new, new), gmemo.get(new, new))
    eps = spec.guards.get("eps")
    if eps:
        emem: dict = {}
        loss = guard_eps(loss, prog, eps, fired, emem)
        dens = {k: (guard_eps(v, prog, eps, fired, emem) if v is not None else None) for k, v in dens.items()}
        for old, new in list(memo.items()):
            memo[old] = emem.get(new, new)
    if masks:
        cond = sp.And(*[m for _, m in masks]) if len(masks) > 1 else masks[0][1]
        loss = sp.Piecewise((loss, cond), (0, True))
        # per-element denominators skip ignored positions; a scalar one (batchmean's N) stays
        dens = {k: (sp.Piecewise((v if v is not None else 1, cond), (0, True))
                    if v is None or prog.typeof(v).axes else v) if k not in ("none", "sum") else None
                for k, v in dens.items()}
    names: dict = {}
    for name, expr in prog.bindings:
        new = memo.get(expr, expr)
        if not new.is_Atom and new not in names:
            names[new] = name
    last_name = prog.bindings[-1][0]
    if masks:
        inner = loss.args[0].expr
        if names.get(inner) == last_name:
            names[inner] = "unmasked"
    names[loss] = last_name
    return Prepared(prog, loss, dens, names, tuple(masks), tuple(fired))


def _taken(spec: Spec) -> set[str]:
    taken = {i.name for i in spec.inputs} | {p.name for p in spec.params}
    taken |= {lr.name for lr in spec.learnable} | {b.name for b in spec.bindings}
    taken |= {a.lstrip("*") for i in spec.inputs for a in i.shape}
    taken |= {"dtype", "in_dtype", "half", "result", "reduction", "ms", "ops", "nn", "paddle", "F", "self"}
    return taken


def _used_symbols(exprs) -> set[sp.Symbol]:
    out: set = set()
    for e in exprs:
        if e is not None:
            out |= e.free_symbols
    return out


def lower(prep: Prepared, backend: Backend) -> Lowered:
    prog, spec = prep.prog, prep.prog.spec
    symbol_vars = {prog.symbols[i.name]: i.name for i in spec.inputs}
    symbol_vars.update({prog.symbols[p.name]: p.name for p in spec.params})
    symbol_vars.update({prog.symbols[lr.name]: lr.name for lr in spec.learnable})
    symbol_vars.update({m: m.name for _, m in prep.masks})
    low = Lowerer(prog, backend, _taken(spec) | {m.name for _, m in prep.masks}, prep.names, symbol_vars)
    low.count(prep.loss)
    for d in prep.denominators.values():
        if d is not None:
            low.count(d)
    loss_var = low.materialize(prep.loss, prep.names.get(prep.loss, "loss"))
    body = list(low.stmts)
    loss_t = prog.typeof(prep.loss)

    reductions: list[tuple[str, Block]] = []
    # none: back from the canonical layout to the loss's own shape
    layout_changed = _changes_layout(prep.loss, prog) or canonical_shape(loss_t.axes, prog, lambda a: None)
    if layout_changed:
        shape = plain_shape(loss_t.axes, prog, low.need)
        reductions.append(("none", Block([], low.op("reshape", x=loss_var, shape=shape))))
    else:
        reductions.append(("none", Block([], loss_var)))
    reductions.append(("sum", Block([], low.op("sum_all", x=loss_var))))
    for red in spec.reductions:
        if red.name in ("none", "sum"):
            continue
        den = prep.denominators.get(red.name)
        start = len(low.stmts)
        if den is None:
            result = low.op("mean_all", x=loss_var)
        else:
            den_t = prog.typeof(den)
            dcode = low.value(den)
            if den_t.axes:
                if den_t.axes != loss_t.axes or _has_broadcast_input(den, spec, prog):
                    dcode = low.op("broadcast_to", x=dcode, shape=f"{loss_var}.shape")
                dcode = low.op("sum_all", x=dcode if dcode.isidentifier() or dcode.endswith(")") else f"({dcode})")
            elif not (dcode.isidentifier() or dcode.replace(".", "").isdigit()):
                dcode = f"({dcode})"
            result = f"{low.op('sum_all', x=loss_var)} / {dcode}"
        reductions.append((red.name, Block(low.stmts[start:], result)))

    used = _used_symbols([prep.loss, *prep.denominators.values()])
    prologue: list[str] = []
    # inputs into the canonical layout; optional inputs get their defaults
    for inp in spec.inputs:
        t = prog.types[prog.symbols[inp.name]]
        shape = None if inp.broadcast else canonical_shape(t.axes, prog, low.need)
        left = None
        if inp.broadcast == "left":
            ref = next(i for i in spec.inputs if not i.broadcast and set(t.axes) <= {a.lstrip("*") for a in i.shape})
            left = (f"{inp.name} = " + low.op("reshape", x=inp.name, shape=f"tuple({inp.name}.shape) + (1,) * "
                    f"({ref.name}.ndim - {inp.name}.ndim)"))
        if inp.optional:
            if inp.broadcast:
                dshape = "()"
            else:
                dshape = plain_shape(tuple(a for a in prog.axes if a in t.axes), prog, low.need) if not shape else _stored_shape(t.axes, prog, low.need)
            default = low.op("full", shape=dshape, value=repr(float(inp.default)), dtype=low.dtype())
            prologue.append(f"if {inp.name} is None:")
            prologue.append(f"    {inp.name} = {default}")
            if shape:
                prologue.append("else:")
                prologue.append(f"    {inp.name} = {low.op('reshape', x=inp.name, shape=shape)}")
            elif left:
                prologue.append("else:")
                prologue.append(f"    {left}")
        elif left:
            prologue.append(left)
        elif shape:
            prologue.append(f"{inp.name} = {low.op('reshape', x=inp.name, shape=shape)}")
    for name, mask in prep.masks:
        inp = spec.input(name)
        prologue.append(f"{mask.name} = {name} != {inp.ignore}")
        prologue.append(f"{name} = {low.op('where', c=mask.name, x=name, y=low.op('zeros_like', x=name))}")
    pre: list[str] = []
    # sizes of the axes the code needs, read before any reshape
    for axis in prog.axes:
        if axis in low.sizes:
            pre.append(f"{axis} = {_size_expr(axis, spec, prog)}")
    if backend.wrap_scalars:
        for p in spec.params:
            if p.kind == "float" and prog.symbols[p.name] in used:
                pre.append(f"{p.name} = {backend.scalar.format(value=p.name, dtype=low.dtype())}")
    for lr in spec.learnable:
        pre.append(f"{lr.name} = {low.op('cast', x=lr.name, dtype=low.dtype())}")
    if low.needs_dtype:
        first = next(i for i in spec.inputs if i.dtype == "float" and not i.optional)
        pre.insert(0, f"dtype = {low.op('dtype_of', x=first.name)}")
    restore = None
    first = next((i for i in spec.inputs if i.dtype == "float" and not i.optional), None)
    if spec.guards.get("upcast", True) and first is not None:
        # float16 / bfloat16 inputs are computed in float32; the result is cast back
        f32 = low.op("float32")
        half = [f"in_dtype = {low.op('dtype_of', x=first.name)}",
                f"half = in_dtype in {low.op('half_dtypes')}",
                "if half:  # computed in float32, returned in the inputs' dtype"]
        for i in spec.inputs:
            if i.dtype != "float":
                continue
            cast = f"{i.name} = {low.op('cast', x=i.name, dtype=f32)}"
            half += [f"    if {i.name} is not None:", f"        {cast}"] if i.optional else [f"    {cast}"]
        pre = half + pre
        restore = f"{low.op('cast', x='result', dtype='in_dtype')} if half else result"

    checks = [
        f"if reduction not in {tuple(spec.reduction_names)!r}:",
        f"    raise ValueError(f\"{spec.name}: reduction must be one of "
        f"{', '.join(repr(r) for r in spec.reduction_names)}; got {{reduction!r}}\")",
    ]
    for p in spec.params:
        if p.min is not None:
            checks.append(f"if not {p.name} >= {p.min!r}:")
            checks.append(f"    raise ValueError(f\"{spec.name}: {p.name} must be >= {p.min!r}; got {{{p.name}!r}}\")")
        if p.max is not None:
            checks.append(f"if not {p.name} <= {p.max!r}:")
            checks.append(f"    raise ValueError(f\"{spec.name}: {p.name} must be <= {p.max!r}; got {{{p.name}!r}}\")")

    signature = [i.name for i in spec.inputs if not i.optional]
    signature += [lr.name for lr in spec.learnable]
    signature += [f"{i.name}=None" for i in spec.inputs if i.optional]
    signature.append("*")
    signature += [f"{p.name}={p.default!r}" for p in spec.params]
    signature.append(f"reduction={spec.default_reduction!r}")

    # the computed form, for the docstring
    names = {}
    lines = []
    for var, expr in low.exprs:
        lines.append(f"{var} = {formula_text(expr, names)}")
        names[expr] = var
    return Lowered(backend, spec, signature, checks, pre + prologue, body, reductions,
                   low.helpers, lines, restore=restore)


def _stored_shape(axes, prog, need) -> str:
    """Shape of a default-filled optional input, already in canonical layout."""
    from .lower import _span

    parts = []
    for a in _span(axes, prog):
        if a in axes:
            need(a)
            parts.append(a if a not in prog.variadic else f"*{a}")
        else:
            parts.append("1" if a not in prog.variadic else f"*((1,) * len({a}))")
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _size_expr(axis: str, spec: Spec, prog: Program) -> str:
    candidates = [i for i in spec.inputs if not i.optional and not i.broadcast] + \
                 [i for i in spec.inputs if i.optional and not i.broadcast]
    for inp in candidates:
        names = [a.lstrip("*") for a in inp.shape]
        if axis not in names:
            continue
        j = names.index(axis)
        var_before = any(a.startswith("*") for a in inp.shape[:j])
        if axis in prog.variadic:
            end = j - len(names) + 1
            return f"tuple({inp.name}.shape[{j}:{end if end else ''}])"
        if var_before:
            return f"{inp.name}.shape[{j - len(names)}]"
        return f"{inp.name}.shape[{j}]"
    raise ValueError(f"no input gives the size of axis {axis}")


def _has_broadcast_input(expr, spec: Spec, prog: Program) -> bool:
    names = {prog.symbols[i.name] for i in spec.inputs if i.broadcast}
    return bool(expr.free_symbols & names)


def _changes_layout(expr: sp.Expr, prog: Program) -> bool:
    return any(isinstance(e, (ir.Gather, *ir.AXIS_REMOVING)) for e in sp.preorder_traversal(expr))


def explain(spec: Spec) -> str:
    prep = prepare(spec)
    lines = [f"spec: {spec.path}", "", "as written:"]
    lines += [f"  {b.name} = {b.text.strip()}" for b in spec.bindings]
    lines += ["", "inlined:", f"  {formula_text(prep.prog.loss)}", "", "rewrites fired:"]
    if not prep.fired:
        lines.append("  (none)")
    seen = set()
    for f in prep.fired:
        key = (f.rule, f.before)
        if key in seen:
            continue
        seen.add(key)
        lines.append(f"  {f.rule}: {formula_text(f.before)}  ->  {formula_text(f.after)}")
    lines += ["", "after rewrites:", f"  {formula_text(prep.loss)}"]
    if not spec.guards.get("eps"):
        reach = list(dict.fromkeys(eps_candidates(prep.loss, prep.prog)))
        if reach:
            lines += ["", "can reach 0 under log or division (no eps guard: set guards.eps or --eps):"]
            lines += [f"  {formula_text(a)}" for a in reach]
    return "\n".join(lines) + "\n"
