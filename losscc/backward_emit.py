"""Lowering of the symbolic backward (:mod:`losscc.backward`) through the operator tables.

:func:`custom_context` gives the templates what a custom-gradient class needs: the source
of a private function ``_<name>_grad(dout, <inputs>, reduction, <params>)`` that returns
the gradient of the reduced loss with respect to every input (None for an input that is
None) times the upstream gradient ``dout``, and the names the framework's wrapper passes
(the framework's custom-gradient mechanism; templates/<backend>/module.py.j2).

Each path of the call (every optional input given, or all None) is one
:class:`losscc.lower.Lowerer` over the derivatives, the per-element loss and denominators
it reads: a subexpression the loss and its derivatives share is computed once.  A
reduction by a mean over a per-element denominator D (``sum(l) / sum(D)``) differentiates
as ``(dl/dx - R * dD/dx) / sum(D)`` with R the reduced loss.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import backward, dagwalk, dropin
from .backends import Backend, get
from .lower import Locals, Lowerer, canonical_shape, import_names
from .localnames import allocate



@dataclass(frozen=True)
class Custom:
    grad_name: str                 # the module-level gradient function
    class_name: str                # the PyLayer / bprop Cell
    grad_source: str               # its source text
    inputs: tuple[str, ...]        # every input, in the spec's order
    params: tuple[str, ...]        # hyperparameters, then reduction
    alias_lines: tuple[str, ...]   # the class call's own keyword aliases, resolved first
    sum_to: bool = False           # a broadcast input: the module defines _sum_to
    # the wrapper's own names (templates/<backend>/module.py.j2), none a spec name: the
    # context, the upstream gradient, the forward's output, the list of gradients
    ctx: str = "ctx"
    dout: str = "dout"
    out: str = "out"
    grads: str = "grads"
    targets: tuple[str, ...] = ()  # one variable per input for its gradient

    @property
    def grad_targets(self) -> str:
        """The left-hand side that unpacks the gradient function's result."""
        return ", ".join(self.targets) if len(self.targets) != 1 else f"({self.targets[0]},)"  # as black has it

    @property
    def inputs_targets(self) -> tuple:
        """(input, its gradient's variable) pairs."""
        return tuple(zip(self.inputs, self.targets))

    @staticmethod
    def param_attr(p: str) -> str:
        """The attribute holding hyperparameter p on the context or cell: prefixed, so that
        no spec name can hide one of the framework's own (``saved_tensor``, ``bprop``)."""
        return f"_losscc_param_{p}"

    @staticmethod
    def need_attr(n: str) -> str:
        """The context's flag that input n takes a gradient."""
        return f"_losscc_need_{n}"


def custom_context(prep, backend: Backend, existing=()) -> Custom | None:
    """What the templates need for a custom backward, or None (autograd) where the spec or
    the plan does not give one; `existing`: helpers the module already defines."""
    spec = prep.prog.spec
    if not backward.chosen(spec, backend.name) or not backend.element_count:
        return None
    plan = backward.plan(prep)
    if isinstance(plan, str):
        return None
    try:
        return _custom(prep, plan, backend, tuple(existing))
    except backward.NoRule:
        return None


def fallback_reason(prep, backend: Backend) -> str | None:
    """Why a spec that asks for the custom backward keeps autograd in `backend` (None: it does not)."""
    spec = prep.prog.spec
    if not backward.chosen(spec, backend.name):
        return None
    if not backend.element_count:
        return f"no custom-gradient emission for {backend.name}"
    plan = backward.plan(prep)
    if isinstance(plan, str):
        return plan
    try:
        _custom(prep, plan, backend, ())
    except backward.NoRule as exc:
        return str(exc)
    return None


def _custom(prep, plan, backend: Backend, existing: tuple) -> Custom:
    from .pipeline import _size_expr, _taken, lower

    prog, spec = prep.prog, prep.prog.spec
    fwd = lower(prep, backend)  # its prologue: half precision, sizes, hyperparameters, layout
    taken = _taken(spec) | {m.name for _, m in prep.masks}  # as the forward's lowering
    loc = Locals.allocate(prog, taken, import_names(backend))
    dout = allocate("dout", taken)
    grad_name = allocate(f"_{spec.name}_grad", taken)
    class_name = allocate(f"_{spec.class_name}Backward", taken)
    inputs = tuple(i.name for i in spec.inputs)
    params = tuple(p.name for p in spec.params) + ("reduction",)
    symbol_vars = {prog.symbols[i.name]: i.name for i in spec.inputs}
    symbol_vars.update({prog.symbols[p.name]: p.name for p in spec.params})
    symbol_vars.update({m: m.name for _, m in prep.masks})  # set by the forward's prologue
    symbol_vars[backward.DOUT] = dout  # the upstream gradient of reduction none
    floats = [i.name for i in spec.inputs if i.dtype == "float"]
    gvars = {n: allocate(f"d_{n}", taken) for n in inputs}
    shapes = {}  # input -> the variable holding its shape before the canonical layout
    for i in spec.inputs:
        if i.dtype == "float" and (i.broadcast == "left" or not i.broadcast and canonical_shape(
                prog.types[prog.symbols[i.name]].axes, prog, lambda a: loc.sizes[a])):  # left: trailing 1s added
            shapes[i.name] = allocate(f"{i.name}_shape", taken)

    def defined(var: str) -> bool:
        return any(ln.startswith(f"{var} = ") for ln in fwd.prologue)

    paths, sizes, needs_dtype = [], set(), False
    for gr, absent in ((plan.none, set(plan.none_inputs)), (plan.general, set())):
        if gr is None:
            continue
        low = Lowerer(prog, backend, taken | set(gvars.values()) | {dout}, {}, symbol_vars, loc)
        low.user_names |= set(gvars.values())  # a gradient's own expression is stored in its variable
        lines = _path(low, prog, spec, gr, absent, gvars, dout,
                      dict(plan.general.denominators) if absent else None)
        if not absent and fwd.branch_prologue:
            lines = list(fwd.branch_prologue) + lines
        sizes |= low.sizes
        needs_dtype |= low.needs_dtype
        paths.append((absent, lines, low.helpers))

    body = []
    # several optional inputs: the general path fills a None one with its default (the forward's
    # prologue); its gradient is None, as on the path with all of them None
    filled = {i.name: allocate(f"{i.name}_none", taken) for i in spec.inputs
              if i.optional and i.dtype == "float" and len(plan.none_inputs) > 1}
    body += [f"{flag} = {n} is None" for n, flag in filled.items()]
    for n in shapes:
        shape = backend.op("shape", x=n)
        body.append(f"{shapes[n]} = {shape} if {n} is not None else None" if spec.input(n).optional
                    else f"{shapes[n]} = {shape}")
    for axis in prog.axes:  # sizes the backward reads and the forward does not (a fixed size is its number)
        if axis in sizes and axis not in spec.sizes and not defined(loc.sizes[axis]):
            code, carriers = _size_expr(axis, spec, prog, low)
            if carriers:
                raise backward.NoRule(f"the size of axis {axis} comes from an optional input")
            body.append(f"{loc.sizes[axis]} = {code}")
    body += list(fwd.prologue)
    half = defined(loc.half)
    if half:
        f32 = backend.op("float32")
        body += [f"if {loc.half}:", f"    {dout} = {backend.op('cast', x=dout, dtype=f32)}"]
    if needs_dtype and not defined(loc.dtype):
        body.append(f"{loc.dtype} = {backend.op('dtype_of', x=floats[0])}")
    if len(paths) == 2:
        (absent, none_lines, _), (_, general_lines, _) = paths
        body.append(f"if {' and '.join(f'{n} is None' for n in plan.none_inputs)}:")
        body += ["    " + ln if ln else "" for ln in none_lines]
        body.append("else:")
        body += ["    " + ln if ln else "" for ln in general_lines]
    else:
        body += paths[0][1]
    for n, flag in filled.items():
        body += [f"if {flag}:", f"    {gvars[n]} = None"]
    for n, var in shapes.items():  # back from the canonical layout
        reshape = f"{gvars[n]} = {backend.op('reshape', x=gvars[n], shape=var)}"
        body += [f"if {gvars[n]} is not None:", f"    {reshape}"] if spec.input(n).optional else [reshape]
    if half:
        body.append(f"if {loc.half}:  # back to the inputs' dtype")
        for i in spec.inputs:
            if i.dtype != "float":
                continue
            cast = f"{gvars[i.name]} = {backend.op('cast', x=gvars[i.name], dtype=loc.in_dtype)}"
            body += [f"    if {gvars[i.name]} is not None:", f"        {cast}"] if i.optional else [f"    {cast}"]
    unbatched = dropin.unbatched_lines(spec, backend)  # a 0-D call: computed as [1], as the forward
    if unbatched:
        body = unbatched + body
        flag = dropin.unbatched_flag(spec)
        body.append(f"if {flag}:  # back to the 0-D inputs")
        for i in dropin.unbatched_inputs(spec, backend):
            if i.dtype == "float":
                back = f"{gvars[i.name]} = {backend.op('reshape', x=gvars[i.name], shape='()')}"
                body += [f"    if {gvars[i.name]} is not None:", f"        {back}"] if i.optional else [f"    {back}"]
    body.append(f"return {', '.join(gvars[n] for n in inputs)}" if len(inputs) != 1 else f"return ({gvars[inputs[0]]},)")
    helpers: list = []
    for _, _, hs in paths:
        helpers += [h for h in hs if h not in helpers and h not in existing]
    head = (f"def {grad_name}({dout}, {', '.join(inputs + params)}):\n"
            f'    """The gradient of {spec.name} with respect to {", ".join(inputs)} (None for an input\n'
            f"    that is None or not a float tensor), times {dout}: derived from the formula by losscc\n"
            f'    (docs/backward.md)."""\n')
    source = "\n\n\n".join(helpers + [head + "\n".join("    " + ln if ln else "" for ln in body)])
    # the wrapper's locals: clear of every spec name and the module-level names it calls
    wrap = _taken(spec) | {grad_name, class_name, fwd.entry or spec.name}
    names = [allocate(hint, wrap) for hint in ("ctx", "dout", "out", "grads")]
    targets = tuple(allocate(f"d_{n}", wrap) for n in inputs)
    return Custom(grad_name, class_name, source, inputs, params,
                  _alias_lines(spec, backend.name), "_sum_to(" in source, *names, targets)


def _alias_lines(spec, backend: str) -> tuple[str, ...]:
    """The class call's library keywords for inputs (``label=``) and its late-required checks."""
    d = dropin.of(spec, backend)
    inputs = {i.name for i in spec.inputs}
    out: list[str] = []
    for arg, alias in d.aliases:
        if arg in inputs:
            out += [f"if {alias} is not None:", f"    {arg} = {alias}"]
    for n in dropin.late_required(spec, d):
        out += [f"if {n} is None:", f"    raise TypeError(\"{spec.name}() missing required argument '{n}'\")"]
    return tuple(out + dropin.scalar_lines(spec, get(backend)))  # a number: a tensor without a gradient


def _exprs(gr):
    out = [gr.loss] + [g for _, g in gr.grads] + [d for _, d in gr.denominators if d is not None]
    return out + [g for _, gs in gr.den_grads for _, g in gs]


def _path(low: Lowerer, prog, spec, gr, absent: set, gvars: dict, dout: str,
          general_dens: dict | None = None) -> list[str]:
    """Statements computing every gradient variable on one path, reduction included
    (`general_dens`: the other path's denominators, on the path with every optional input None)."""
    b = low.b
    grads = {n: g for n, g in gr.grads if n not in absent}
    if not grads:
        raise backward.NoRule("no float input to differentiate")
    dens = {r: d for r, d in gr.denominators if d is not None}
    den_grads = {r: dict(gs) for r, gs in gr.den_grads}
    loss_axes = prog.typeof(gr.loss).axes
    broadcast = {prog.symbols[i.name] for i in spec.inputs if i.broadcast}
    for g in grads.values():
        low.count(g)
    if dens:
        low.count(gr.loss)
        for r, d in dens.items():
            low.count(d)
            for g in den_grads[r].values():
                low.count(g)

    names = {i.name for i in spec.inputs}
    # a tensor of the loss's shape: an input of its axes, else the loss itself
    ref = next((i.name for i in spec.inputs if i.name not in absent and not i.broadcast
                and prog.typeof(prog.symbols[i.name]).axes == loss_axes), None)
    if ref is None:
        low.count(gr.loss)
        ref = low.materialize(gr.loss, "loss")
    like = next(n for n in grads if not spec.input(n).broadcast) if any(
        not spec.input(n).broadcast for n in grads) else None

    summed: set = set()
    symbols_memo: dict = {}  # free symbols of the gradients' nodes (shared subtrees walked once)

    def full(e, hint, n=None) -> str:
        """e's value over the shape of input n (the loss's for a broadcast input, or n None)."""
        target = n if n is not None and not spec.input(n).broadcast else ref
        own = prog.typeof(prog.symbols[target]).axes if target in names else loss_axes
        if e == 0:
            return low.op("zeros_like", x=n)
        if e.is_number:
            code = low.op("full_like", x=n, value=repr(float(e)))
            return code if target == n else low.op("broadcast_to", x=code, shape=low.op("shape", x=ref))
        code = low.materialize(e, hint)
        axes = set(prog.typeof(e).axes)
        if n is not None and target == n and (axes > set(own) or (axes == set(own) and len(own) < len(prog.axes))):
            summed.add(n)  # summed over the axes n lacks (or the leading 1s of row sums), at the end
            return code
        if not axes <= set(own):
            raise backward.NoRule(f"the gradient of {n} has axes the input lacks")
        if prog.typeof(e).axes != own or dagwalk.free_symbols(e, symbols_memo) & broadcast:
            return low.op("broadcast_to", x=code, shape=low.op("shape", x=target))
        return code

    out: dict[str, str] = {}
    for n, g in grads.items():
        # d/d target of f(input - target) is -d/d input: a negation, not the expression again
        twin = next((m for m, h in grads.items() if m in out and g != 0 and h == -g), None)
        out[n] = f"-{gvars[twin]}" if twin is not None and out[twin] == gvars[twin] else full(g, gvars[n], n)
    lines = list(low.stmts)
    for n, code in out.items():
        if code != gvars[n]:
            lines.append(f"{gvars[n]} = {code}")
    layout = canonical_shape(loss_axes, prog, low.need)

    def scaled() -> list[str]:
        """`none` and `sum`: times dout (none's in the canonical layout, where that differs); where
        the loss couples its elements, none's gradients are the ones seeded with dout. A gradient
        that is 0 (an input read only under stop_gradient) stays zeros of its input's shape."""
        out_lines = [f"{gvars[n]} = {gvars[n]} * {dout}" for n in out if grads[n] != 0]
        reshape = [f"{dout} = {low.op('reshape', x=dout, shape=layout)}"] if layout else []
        if gr.seeded is not None and any(r.name == "none" for r in spec.reductions):
            low.stmts, low.memo = list(reshape), dict(low.memo)
            seeded = dict(gr.seeded)
            codes = {n: full(seeded[n], gvars[n], n) for n in out}
            low.stmts += [f"{gvars[n]} = {code}" for n, code in codes.items() if code != gvars[n]]
            return (['if reduction == "none":'] + (["    " + ln for ln in low.stmts] or ["    pass"])
                    + (["else:"] + ["    " + ln for ln in out_lines] if out_lines else []))
        if reshape:
            return ['if reduction == "none":', "    " + reshape[0]] + out_lines
        return out_lines

    # the reduction: `none` and `sum` scale by dout; a mean by dout over its denominator
    means = [r.name for r in spec.reductions if r.name not in ("none", "sum")]
    if means:
        chain = "if"
        memo = dict(low.memo)
        for r in means:
            low.stmts, low.memo = [], dict(memo)  # what one branch computes is not seen by the next
            lines.append(f"{chain} reduction == {r!r}:")
            if r in dens:
                den, general = dens[r], (general_dens or {}).get(r)
                if den.is_number and general is not None and prog.typeof(general).axes:
                    # a per-element denominator that became a constant c: c times the count
                    count = f"{b.element_count.format(x=ref, like=gvars[like or next(iter(out))])} * {float(den)!r}"
                elif prog.typeof(den).axes:
                    count = low.op("sum_all", x=full(den, "den"))
                else:  # a scalar: the forward divides the sum by it
                    count = low.value(den)
                total = low.materialize_code(count)
                scale = low.materialize_code(f"{dout} / {total}")
                # d(sum(l) / S) = (dl - sum(l) / S * dS) / S
                if any(den_grads[r].get(n, 0) != 0 for n in out):
                    loss_code = low.materialize(gr.loss, "loss")
                    rv = low.materialize_code(f"{low.op('sum_all', x=loss_code)} / {total} * {scale}")
                for n in out:
                    dd = den_grads[r].get(n, 0)
                    if dd != 0 and dd.is_number:
                        term = rv if dd == 1 else f"{rv} * {float(dd)!r}"
                        low.stmts.append(f"{gvars[n]} = {gvars[n]} * {scale} - {term}")
                    elif dd != 0:
                        low.stmts.append(f"{gvars[n]} = {gvars[n]} * {scale} - {rv} * {full(dd, 'dden', n)}")
                    else:
                        low.stmts.append(f"{gvars[n]} = {gvars[n]} * {scale}")
            else:
                count = b.element_count.format(x=ref, like=gvars[like or next(iter(out))])
                scale = low.materialize_code(f"{dout} / {count}")
                low.stmts += [f"{gvars[n]} = {gvars[n]} * {scale}" for n in out]
            lines += ["    " + s for s in low.stmts]
            chain = "elif"
        lines.append("else:")
        lines += [f"    {ln}" for ln in scaled()]
    else:
        lines += scaled()
    for i in spec.inputs:
        if i.name in absent or i.dtype != "float":
            lines.append(f"{gvars[i.name]} = None")
        elif i.broadcast or i.name in summed:
            lines.append(f"{gvars[i.name]} = _sum_to({gvars[i.name]}, {i.name})")
    return lines


def fallback_warnings(specs, backends, prepared: dict | None = None) -> list:
    """W310 for each spec that asks for ``backward: custom`` (its own field or the project's
    default) and keeps autograd in a backend, with the reason (docs/backward.md).
    `prepared`: spec name -> its pipeline.Prepared, where the caller has it already."""
    from .errors import Diagnostic
    from .pipeline import prepare

    out = []
    for spec in specs:
        if spec.backward != "custom":
            continue
        prep = (prepared or {}).get(spec.name) or prepare(spec)
        for b in backends:
            why = fallback_reason(prep, b)
            if why is not None:
                out.append(Diagnostic(spec.name_loc, "W310", f"backward: custom keeps autograd in {b.name}: {why}",
                                      "warning"))
    return out


__all__ = ["Custom", "custom_context", "fallback_reason", "fallback_warnings"]
