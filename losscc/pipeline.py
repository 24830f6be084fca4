"""The pipeline: spec -> program -> prepared IR -> rewrites -> lowering -> source text.

Each stage is a pure function of the previous one's value; :func:`compile_spec`
strings them together for one backend, and :func:`explain` exposes the
intermediate forms.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import sympy as sp

from . import dropin, ir, selects
from .backends import Backend
from .checks import check_lines, clip_order_lines
from .formula import formula_text
from .guards import BRANCH_GUARDS, EPS_GUARDS, GRADIENT_GUARDS, eps_candidates
from .backends import all_backends
from .errors import Diagnostic, SpecError
from .lower import MUL, Block, Locals, Lowered, Lowerer, allocate, canonical_shape, import_names, plain_shape
from .parse import Program, build_program
from .passes import Fired, context, run
from .rewrites import RANGE_REWRITES, RATIO_REWRITES, STABLE
from .specialise import IGNORE_MASKS, NoneVariant, ValueSplit, mask_symbols, specialise_none, specialise_values
from .spec import Spec
from .specinputs import left_reference


@dataclass(frozen=True)
class Prepared:
    """The program with ignore masks applied and stable rewrites done."""

    prog: Program
    loss: sp.Expr                       # rewritten per-element loss (masked)
    denominators: dict                  # reduction -> rewritten per-element denominator or None
    names: dict                         # rewritten node -> user binding name
    masks: tuple[tuple[str, sp.Symbol], ...]  # (input name, mask symbol)
    fired: tuple[Fired, ...]
    none: "NoneVariant | None" = None   # the same with every optional input at its default
    values: "ValueSplit | None" = None  # the loss split on a float hyperparameter at 0


# what prepare does, in order: each a named bundle of rules (losscc.passes), the last one
# at the roots; the call with every optional input None is then specialised from the result
BUNDLES = (STABLE, RANGE_REWRITES, RATIO_REWRITES, GRADIENT_GUARDS, BRANCH_GUARDS, EPS_GUARDS, IGNORE_MASKS)


def prepare(spec: Spec) -> Prepared:
    prog = build_program(spec)
    masks = mask_symbols(prog, _taken(spec))
    ctx = context(prog, spec.guards.get("eps"), masks)
    track = [e for _, e in prog.bindings]
    out = run(BUNDLES, ctx, prog.loss, prog.denominators, track=track)
    loss = out.loss
    names = _binding_names(prog, out)
    last_name = prog.bindings[-1][0]
    split = specialise_values(ctx, out, lambda ranges: run(
        BUNDLES, replace(context(prog, spec.guards.get("eps"), masks), ranges=ranges), prog.loss,
        prog.denominators, track=track))
    values = None
    if split is not None:
        loss, values, variant_names = split
        names = {**variant_names, **names}
        # both sides of the split carry the name of the value they give
        inner = loss.args[0].expr if masks else loss
        for side in inner.args:
            if not side.expr.is_Atom and names.get(side.expr) in (None, last_name):
                names[side.expr] = "unmasked" if masks else last_name
    if masks:
        inner = loss.args[0].expr
        if values is not None or names.get(inner) == last_name:
            names[inner] = "unmasked"
    names[loss] = last_name
    return Prepared(prog, loss, out.denominators, names, masks, out.fired,
                    specialise_none(ctx, loss, out.denominators, names), values)


def _binding_names(prog: Program, out) -> dict:
    """Rewritten node -> the user's binding name, for the bindings that survive as nodes."""
    names: dict = {}
    for name, expr in prog.bindings:
        new = out.origin[expr]
        if not new.is_Atom and new not in names:
            names[new] = name
    return names


def _taken(spec: Spec) -> set[str]:
    """Every name of the spec, and what the generated module imports: the generated code's
    own locals are allocated around these (see lower.Locals)."""
    taken = {spec.name, "reduction", "self"} | {i.name for i in spec.inputs} | {p.name for p in spec.params}
    taken |= {lr.name for lr in spec.learnable} | {b.name for b in spec.bindings}
    taken |= {a.lstrip("*") for i in spec.inputs for a in i.shape}
    taken |= {r.name for r in spec.reductions}
    for b in all_backends():
        taken |= import_names(b)
    return taken


def _used_symbols(exprs) -> set[sp.Symbol]:
    out: set = set()
    for e in exprs:
        if e is not None:
            out |= e.free_symbols
    return out


def _lower_body(prog: Program, backend: Backend, taken: set, names: dict, symbol_vars: dict,
                loss: sp.Expr, dens: dict, layout_from: list, general_dens: dict | None = None,
                locals_: Locals | None = None, flags: dict | None = None, values: dict | None = None):
    """Statements for the per-element loss and one Block per reduction."""
    spec = prog.spec
    low = Lowerer(prog, backend, taken, names, symbol_vars, locals_, flags, values)
    low.count(loss)
    for d in dens.values():
        if d is not None:
            low.count(d)
    low.fuse_over(loss, *dens.values())
    # a select's 0 branch stays a number only as a term of a sum with a tensor term (selects.py)
    low.zero_terms = selects.zero_terms([loss, *dens.values()], prog.typeof, low.is_flag)
    loss_var = low.materialize(loss, names.get(loss, "loss"))
    body = list(low.stmts)
    loss_t = prog.typeof(loss)

    reductions: list[tuple[str, Block]] = []
    # none: back from the canonical layout to the loss's own shape
    layout_changed = any(_changes_layout(e, prog) for e in layout_from) or \
        canonical_shape(loss_t.axes, prog, str) is not None
    if layout_changed:
        shape = plain_shape(loss_t.axes, prog, low.need)
        reductions.append(("none", Block([], low.op("reshape", x=loss_var, shape=shape))))
    else:
        reductions.append(("none", Block([], loss_var)))
    reductions.append(("sum", Block([], low.op("sum_all", x=loss_var))))
    for red in spec.reductions:
        if red.name in ("none", "sum"):
            continue
        den = dens.get(red.name)
        start = len(low.stmts)
        general = (general_dens or {}).get(red.name)
        if den is None:
            result = low.op("mean_all", x=loss_var)
        elif den.is_number and general is not None and prog.typeof(general).axes:
            # a per-element denominator that became a constant c: sum(c) is c times the count
            result = f"{low.op('mean_all', x=loss_var)} / {low.wrap(den, MUL + 1)}"
        else:
            den_t = prog.typeof(den)
            dcode = low.value(den)
            if den_t.axes:
                if den_t.axes != loss_t.axes or _has_broadcast_input(den, spec, prog):
                    dcode = low.op("broadcast_to", x=dcode, shape=low.op("shape", x=loss_var))
                dcode = low.op("sum_all", x=dcode if dcode.isidentifier() or dcode.endswith(")") else f"({dcode})")
            elif not (dcode.isidentifier() or dcode.replace(".", "").isdigit()):
                dcode = f"({dcode})"
            result = f"{low.op('sum_all', x=loss_var)} / {dcode}"
        reductions.append((red.name, Block(low.stmts[start:], result)))
    return low, body, reductions


def lower(prep: Prepared, backend: Backend) -> Lowered:
    prog, spec = prep.prog, prep.prog.spec
    symbol_vars = {prog.symbols[i.name]: i.name for i in spec.inputs}
    symbol_vars.update({prog.symbols[p.name]: p.name for p in spec.params})
    symbol_vars.update({prog.symbols[lr.name]: lr.name for lr in spec.learnable})
    symbol_vars.update({m: m.name for _, m in prep.masks})
    taken = _taken(spec) | {m.name for _, m in prep.masks}
    loc = Locals.allocate(prog, taken, import_names(backend))
    # a split on a float hyperparameter tests its Python value, before it is wrapped in a tensor
    flags, flag_lines = {}, []
    if prep.values is not None:
        v = prep.values
        flags[v.cond] = allocate(v.hint, taken)
        flag_lines.append(f"{flags[v.cond]} = {v.param} {'==' if isinstance(v.cond, sp.Eq) else '>'} 0")
    # the Python number of a float hyperparameter a fused built-in takes, kept before the wrap
    values = {prog.symbols[p.name]: allocate(f"{p.name}_value", taken) for p in spec.params
              if p.kind == "float" and backend.wrap_scalars and backend.fused}
    none = prep.none
    layout_from = [prep.loss] + ([none.loss] if none else [])
    low, body, reductions = _lower_body(prog, backend, taken, prep.names, symbol_vars, prep.loss,
                                        prep.denominators, layout_from, locals_=loc, flags=flags,
                                        values=values)
    used = _used_symbols([prep.loss, *prep.denominators.values()])
    none_sizes: set[str] = set()
    if none is not None:
        # the None path: its own statements, the same names where they mean the same
        nlow, none_body, none_reductions = _lower_body(prog, backend, taken, none.names, symbol_vars, none.loss,
                                                       none.denominators, layout_from, prep.denominators, loc,
                                                       flags, values)
        none_sizes = set(nlow.sizes)
        low.sizes |= nlow.sizes
        low.needs_dtype |= nlow.needs_dtype
        low.helpers += [h for h in nlow.helpers if h not in low.helpers]
        low.values_used |= nlow.values_used
        used |= _used_symbols([none.loss, *none.denominators.values()])
    prologue: list[str] = []
    branch: list[str] = []          # only on the general path when the None path is split off
    # with one optional input the general path has it; with several, any may still be None
    fill = none is None or len(none.inputs) > 1
    # inputs into the canonical layout; optional inputs get their defaults
    for inp in spec.inputs:
        out = branch if none is not None and inp.optional else prologue
        t = prog.types[prog.symbols[inp.name]]
        shape = None if inp.broadcast == "left" else canonical_shape(t.axes, prog, low.need)
        placed = None
        if shape:
            # a broadcastable input reaches its declared shape first, then the layout's
            declared = plain_shape(tuple(a for a in prog.axes if a in t.axes), prog, low.need)
            src = low.op("broadcast_to", x=inp.name, shape=declared) if inp.broadcast else inp.name
            placed = low.op("reshape", x=src, shape=shape)
        left = None
        if inp.broadcast == "left":
            ref = left_reference(spec.inputs, inp)  # checked when the spec is read
            left = (f"{inp.name} = " + low.op("reshape", x=inp.name, shape=f"tuple({inp.name}.shape) + (1,) * "
                    f"({ref.name}.ndim - {inp.name}.ndim)"))
        if inp.optional and fill:
            if inp.broadcast:
                dshape = "()"
            else:
                dshape = plain_shape(tuple(a for a in prog.axes if a in t.axes), prog, low.need) if not shape else _stored_shape(t.axes, prog, low.need)
            default = low.op("full", shape=dshape, value=repr(float(inp.default)), dtype=low.dtype())
            out.append(f"if {inp.name} is None:")
            out.append(f"    {inp.name} = {default}")
            if shape:
                out.append("else:")
                out.append(f"    {inp.name} = {placed}")
            elif left:
                out.append("else:")
                out.append(f"    {left}")
        elif left:
            out.append(left)
        elif shape:
            out.append(f"{inp.name} = {placed}")
    for name, mask in prep.masks:
        inp = spec.input(name)
        prologue.append(f"{mask.name} = {name} != {inp.ignore}")
        prologue.append(f"{name} = {low.op('where', c=mask.name, x=name, y=low.op('zeros_like', x=name))}")
    pre: list[str] = []
    # sizes of the axes the code needs, read before any reshape; one that only optional inputs
    # give is read from one that is not None, on the path where one is sure not to be
    opt_sizes: list[str] = []
    optional = {i.name for i in spec.inputs if i.optional}
    for axis in prog.axes:
        if axis not in low.sizes or axis in spec.sizes:  # a fixed size is a number (checked on entry)
            continue
        code, carriers = _size_expr(axis, spec, prog, low)
        if carriers:
            unsafe = none is None or axis in none_sizes or (fill and set(carriers) != optional)
            if unsafe:
                raise SpecError([_optional_size_error(spec, axis, carriers)])
        (opt_sizes if carriers and none is not None else pre).append(f"{loc.sizes[axis]} = {code}")
    branch[:0] = opt_sizes
    pre += flag_lines
    pre += [f"{values[s]} = {s.name}" for s in sorted(low.values_used, key=str) if s in values]
    if backend.wrap_scalars:
        for p in spec.params:
            if p.kind == "float" and prog.symbols[p.name] in used:
                pre.append(f"{p.name} = {backend.scalar.format(value=p.name, dtype=low.dtype())}")
    for lr in spec.learnable:
        pre.append(f"{lr.name} = {low.op('cast', x=lr.name, dtype=low.dtype())}")
    if low.needs_dtype:
        first = next(i for i in spec.inputs if i.dtype == "float" and not i.optional)
        pre.insert(0, f"{loc.dtype} = {low.op('dtype_of', x=first.name)}")
    restore = None
    first = next((i for i in spec.inputs if i.dtype == "float" and not i.optional), None)
    if spec.guards.get("upcast", True) and first is not None:
        # float16 / bfloat16 inputs are computed in float32; the result is cast back
        f32 = low.op("float32")
        half = [f"{loc.in_dtype} = {low.op('dtype_of', x=first.name)}",
                f"{loc.half} = {loc.in_dtype} in {low.op('half_dtypes')}",
                f"if {loc.half}:  # computed in float32, returned in the inputs' dtype"]
        for i in spec.inputs:
            if i.dtype != "float":
                continue
            cast = f"{i.name} = {low.op('cast', x=i.name, dtype=f32)}"
            half += [f"    if {i.name} is not None:", f"        {cast}"] if i.optional else [f"    {cast}"]
        pre = half + pre
        restore = f"{low.op('cast', x=loc.result, dtype=loc.in_dtype)} if {loc.half} else {loc.result}"

    checks = check_lines(spec) + clip_order_lines(spec, prog.loss)

    signature = dropin.signature(spec, backend.name)
    restore = dropin.unbatched_restore(spec, backend, restore, loc.result)

    # the computed form, for the docstring
    names = {}
    lines = []
    for var, expr in low.exprs:
        if names.get(expr) == var:  # the same value computed on both sides of an `if`
            continue
        lines.append(f"{var} = {formula_text(expr, names)}")
        names[expr] = var
    # the class calls the function through a private alias when an input or a library
    # keyword of its call (a drop-in alias) shadows the function's name
    shadowed = spec.name in {i.name for i in spec.inputs} | {a for _, a in dropin.of(spec, backend.name).aliases}
    module_names = {"_check"} | {n for h in low.helpers for n in _defined_names(h)}
    extra = dict(restore=restore, result_var=loc.result,
                 entry=allocate(f"_{spec.name}", module_names) if shadowed else None)
    if none is None:
        return Lowered(backend, spec, signature, checks, pre + prologue, body, reductions,
                       low.helpers, lines, **extra)
    loss_name = none.names.get(none.loss, "loss")
    lines += ["", f"with {', '.join(none.inputs)} None: {loss_name} = {formula_text(none.loss, names)}"]
    return Lowered(backend, spec, signature, checks, pre + prologue, body, reductions,
                   low.helpers, lines, **extra,
                   none_test=" and ".join(f"{n} is None" for n in none.inputs),
                   none_body=none_body, none_reductions=none_reductions, branch_prologue=branch)


def _stored_shape(axes, prog, need) -> str:
    """Shape of a default-filled optional input, already in canonical layout."""
    from .lower import _span

    parts = []
    for a in _span(axes, prog):
        if a in axes:
            n = need(a)
            parts.append(n if a not in prog.variadic else f"*{n}")
        else:
            parts.append("1" if a not in prog.variadic else f"*((1,) * len({need(a)}))")
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _size_expr(axis: str, spec: Spec, prog: Program, low: Lowerer) -> tuple[str, tuple[str, ...]]:
    """Code reading the size of `axis` (a tuple for a variadic group) through the backend's
    ``shape`` operator (right also where the size is unknown until run time), and the
    optional inputs it depends on: () when a required input gives it, else the optional
    inputs that carry the axis, read from the first that is not None."""
    axis = prog.aliases.get(axis, axis)  # rename(x, N=M): M is N's size
    def read(inp) -> str:
        names = [a.lstrip("*") for a in inp.shape]
        j = names.index(axis)
        shape = low.op("shape", x=inp.name)
        if axis in prog.variadic:
            end = j - len(names) + 1
            return f"tuple({shape}[{j}:{end if end else ''}])"
        if any(a.startswith("*") for a in inp.shape[:j]):
            return f"{shape}[{j - len(names)}]"
        return f"{shape}[{j}]"

    def carries(inp) -> bool:
        return not inp.broadcast and axis in [a.lstrip("*") for a in inp.shape]

    for inp in spec.inputs:
        if not inp.optional and carries(inp):
            return read(inp), ()
    carriers = [i for i in spec.inputs if i.optional and carries(i)]
    if not carriers:
        raise ValueError(f"no input gives the size of axis {axis}")
    code = read(carriers[-1])
    for inp in reversed(carriers[:-1]):
        code = f"{read(inp)} if {inp.name} is not None else {code}"
    return code, tuple(i.name for i in carriers)


def _optional_size_error(spec: Spec, axis: str, carriers: tuple[str, ...]) -> Diagnostic:
    inp = spec.input(carriers[0])
    which = f"input{'s' if len(carriers) > 1 else ''} {', '.join(carriers)}"
    return Diagnostic(inp.loc, "E253", f"inputs.{inp.name}: the size of axis {axis} is given only by the "
                      f"optional {which}, and the loss needs it when {'they are' if len(carriers) > 1 else 'it is'} None",
                      hint=f"declare {axis} on a required input too")


def _defined_names(source: str) -> set[str]:
    """Top-level functions a helper's source defines."""
    import re

    return set(re.findall(r"^def (\w+)", source, flags=re.M))


def _has_broadcast_input(expr, spec: Spec, prog: Program) -> bool:
    names = {prog.symbols[i.name] for i in spec.inputs if i.broadcast}
    return bool(expr.free_symbols & names)


def _changes_layout(expr: sp.Expr, prog: Program) -> bool:
    return any(isinstance(e, (ir.Gather, ir.Component, *ir.AXIS_REMOVING)) for e in sp.preorder_traversal(expr))


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
    if prep.none is not None:
        lines += ["", f"with {', '.join(prep.none.inputs)} None (defaults substituted):",
                  f"  {formula_text(prep.none.loss)}"]
    if not spec.guards.get("eps"):
        reach = list(dict.fromkeys(eps_candidates(prep.loss, prep.prog)))
        if reach:
            lines += ["", "can reach 0 under log or division (no eps guard: set guards.eps or --eps):"]
            lines += [f"  {formula_text(a)}" for a in reach]
    return "\n".join(lines) + "\n"
