"""Program-level rules: masks for ignored positions and the call with every optional input None.

Both are root bundles (``losscc.passes``): their rules run once on the loss and on each
reduction's denominator, after the node bundles, and explain shows them in sections of
their own rather than among the rules fired.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from . import bounded, ir
from .parse import TType
from .passes import Bundle, Context, Rule, run

# --------------------------------------------------------------------------- ignored positions


def mask_symbols(prog, taken: set[str]) -> tuple[tuple[str, sp.Symbol], ...]:
    """(input name, mask symbol) for each int input that declares `ignore`; the symbols get
    bool types in `prog` and names outside `taken` (which grows by them)."""
    spec = prog.spec
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
    return tuple(masks)


def _mask(e, ctx: Context):
    """The loss is 0 at ignored positions; a per-element denominator (or a mean's element
    count, the root None) skips them; a scalar one (batchmean's N) stays."""
    cond = sp.And(*[m for _, m in ctx.masks]) if len(ctx.masks) > 1 else ctx.masks[0][1]
    if ctx.root == "loss":
        return sp.Piecewise((e, cond), (0, True))
    if ctx.root in ("none", "sum") or (e is not None and not ctx.prog.typeof(e).axes):
        return None
    return sp.Piecewise((e if e is not None else 1, cond), (0, True))


IGNORE_MASKS = Bundle("ignore-masks", (
    Rule("mask-ignored", "positions whose index is the ignore value contribute 0 to the loss and "
         "nothing to the mean's denominator", _mask, record=False),
), at="root", when=lambda ctx: bool(ctx.masks))

# --------------------------------------------------------------------------- all optional inputs None


@dataclass(frozen=True)
class NoneVariant:
    """The prepared IR specialised to the call where every optional input is None: each one
    replaced by its declared default, then folded only trivially (``1*x -> x``, a gather or
    reduction of a constant)."""

    inputs: tuple[str, ...]             # the optional inputs, all None on this path
    loss: sp.Expr
    denominators: dict                  # as Prepared.denominators
    names: dict


def _default_value(value: float) -> sp.Expr:
    return sp.Integer(int(value)) if float(value).is_integer() else sp.Float(float(value))


def _defaults(prog) -> dict:
    return {prog.symbols[i.name]: _default_value(i.default) for i in prog.spec.inputs if i.optional}


def _substitute_defaults(e, ctx: Context):
    if e is None:
        return None
    if bounded.substitute(e, _defaults(ctx.prog)) is None:
        return None  # a default makes a number beyond 1e300 (sin(exp(exp(20)))): not folded
    try:  # the IR folds operators of constants
        out = ir.real_parts(e.xreplace(_defaults(ctx.prog)))
    except (TypeError, ValueError, ArithmeticError):  # a comparison SymPy cannot build (NaN)
        return None
    return None if bounded.non_real(out) is not None else out  # 1 / 0: the general code serves


OPTIONAL_DEFAULTS = Bundle("optional-defaults", (
    Rule("substitute-defaults", "with every optional input None, each is its declared default",
         _substitute_defaults, record=False),
), at="root")


def specialise_none(ctx: Context, loss: sp.Expr, dens: dict, names: dict) -> NoneVariant | None:
    """`loss` and `dens` with every optional input replaced by its default, or None where that
    changes nothing or would change the loss's axes (then the general code serves None too)."""
    prog = ctx.prog
    opt = [i for i in prog.spec.inputs if i.optional]
    if not opt:
        return None
    subs = _defaults(prog)
    out = run((OPTIONAL_DEFAULTS,), ctx, loss, dens)
    new_loss, new_dens = out.loss, dict(out.denominators)
    if new_loss == loss and new_dens == dens:
        return None
    if prog.typeof(new_loss).axes != prog.typeof(loss).axes:
        return None
    for e in [new_loss, *new_dens.values()]:
        if e is not None and (e.free_symbols & set(subs) or any(
                isinstance(n, ir.TensorOp) and n.args and n.args[0].is_number and not isinstance(n, (ir.Size, ir.OneHot))
                for n in sp.preorder_traversal(e))):
            return None
    for k, v in new_dens.items():
        # a per-element denominator that became 1 counts the elements: the plain mean
        if v == 1 and dens[k] is not None and prog.typeof(dens[k]).axes:
            new_dens[k] = None
        elif v is not None and dens[k] is not None and prog.typeof(v).axes != prog.typeof(dens[k]).axes:
            # a per-element denominator that lost its axes (where(sum(m, axis=L) > 0, 1, 0) at
            # m = 1 is one number) would divide once instead of being summed over the elements
            return None
    new_names: dict = {}
    for node, name in names.items():
        new = _substitute_defaults(node, ctx)
        if not new.is_Atom and new not in new_names:
            new_names[new] = name
    new_names[new_loss] = names[loss]
    return NoneVariant(tuple(i.name for i in opt), new_loss, new_dens, new_names)

# --------------------------------------------------------------------------- float hyperparameters at a bound


@dataclass(frozen=True)
class ValueSplit:
    """The loss split on a float hyperparameter `param` at its lower bound 0: `cond` is
    ``param == 0`` or ``param > 0`` (the bound check makes the other branch the rest), the
    condition the generated code tests in Python before the value is wrapped in a tensor."""

    param: str
    cond: sp.Basic
    hint: str                           # the name of the Python bool in the generated code


def _cost(e: sp.Expr) -> int:
    """Distinct compound nodes: what the lowering computes once each."""
    return len({n for n in sp.preorder_traversal(e) if not n.is_Atom})


def _strip_mask(e, masks):
    return e.args[0].expr if masks and isinstance(e, sp.Piecewise) else e


def _at_zero(loss, p: sp.Symbol):
    """loss at p = 0, or None where SymPy cannot build it (log(p) > 0 is a comparison of zoo)."""
    try:
        out = ir.real_parts(loss.xreplace({p: sp.Integer(0)}))
    except (TypeError, ValueError, ArithmeticError):
        return None
    return None if bounded.non_real(out) is not None else out


MAX_RERUNS = 4  # parameters whose positive side is prepared again, at most (each runs every pass)


def specialise_values(ctx: Context, general, rerun):
    """Where a float hyperparameter with ``min: 0`` selects structure, the loss split on it.

    Two programs are tried for each such parameter p: the general loss with p = 0
    substituted (``label_smoothing == 0`` drops the smoothing term), and the program prepared
    again with p known positive (``beta > 0``: a divisor needs no guard). Each one that is
    smaller than the general program serves its side of ``p == 0``; the general program
    serves the other side where only one is. A split is made only where the side of the
    parameter's default is smaller, and the best single one is kept (fewest nodes there). `general` is the prepared Result; ``rerun(ranges)``
    prepares the program again under other range facts. Returns (loss, names of the
    variants' nodes, ValueSplit) or None."""
    from .ranges import Ranges, facts

    prog, masks = ctx.prog, ctx.masks
    base = _strip_mask(general.loss, masks)
    best, reruns = None, 0
    for par in prog.spec.params:
        if par.kind != "float" or par.min != 0 or par.min_open:
            continue
        p = prog.symbols[par.name]
        if p not in base.free_symbols:
            continue
        zero = _at_zero(base, p)
        # a substitution SymPy evaluates to zoo or nan (log(0**1.5) is zoo, not -inf) has no
        # lowering: that side keeps the general program
        finite = zero is not None and not zero.has(sp.zoo, sp.nan, sp.oo, -sp.oo)
        zero = zero if finite and _cost(zero) < _cost(base) and p not in zero.free_symbols else None
        if (par.default == 0 and zero is None) or reruns >= MAX_RERUNS:
            continue  # the default's side would keep the general program; or the passes ran enough
        reruns += 1
        ranges = Ranges(prog)
        ranges._symbols = {**ranges._symbols, par.name: facts(True, True)}
        out = rerun(ranges)
        pos = _strip_mask(out.loss, masks)
        pos = pos if _cost(pos) < _cost(base) else None
        default_side = zero if par.default == 0 else pos
        if default_side is None:  # the common call would still run the general program
            continue
        score = _cost(default_side)
        if best is not None and score >= best[0]:
            continue
        if zero is not None:
            split = sp.Piecewise((zero, sp.Eq(p, 0)), (pos if pos is not None else base, True), evaluate=False)
            cond, hint = sp.Eq(p, 0), f"{par.name}_zero"
        else:
            split = sp.Piecewise((pos, sp.Gt(p, 0)), (base, True), evaluate=False)
            cond, hint = sp.Gt(p, 0), f"{par.name}_positive"
        best = (score, split, ValueSplit(par.name, cond, hint), p, out if pos is not None else None)
    if best is None:
        return None
    _, split, vs, p, pos_out = best
    names: dict = {}
    for name, expr in prog.bindings:  # the user's names on both sides, as in the general program
        for out in ([pos_out] if pos_out is not None else []) + [general]:
            node = out.origin[expr]
            if out is general and vs.cond.func is sp.Eq:
                node = _at_zero(node, p)
            if not node.is_Atom and node not in names:
                names[node] = name
    if masks:
        split = general.loss.func((split, general.loss.args[0].cond), *general.loss.args[1:], evaluate=False)
    return split, vs, names
