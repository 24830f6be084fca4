"""Program-level rules: masks for ignored positions and the call with every optional input None.

Both are root bundles (``losscc.passes``): their rules run once on the loss and on each
reduction's denominator, after the node bundles, and explain shows them in sections of
their own rather than among the rules fired.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from . import ir
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


# a tensor operator applied to a constant (a substituted default) is a constant
_CONSTANT_FOLDS = {
    ir.Gather: lambda c, e: c,
    ir.StopGradient: lambda c, e: c,
    ir.ReduceMean: lambda c, e: c,
    ir.ReduceMax: lambda c, e: c,
    ir.ReduceSum: lambda c, e: c * ir.Size(e.args[-1]),
}


def _fold_constants(expr: sp.Expr) -> sp.Expr:
    return expr.replace(
        lambda e: type(e) in _CONSTANT_FOLDS and e.args[0].is_number and not e.args[0].has(ir.TensorOp),
        lambda e: _CONSTANT_FOLDS[type(e)](e.args[0], e))


def _defaults(prog) -> dict:
    return {prog.symbols[i.name]: _default_value(i.default) for i in prog.spec.inputs if i.optional}


def _substitute_defaults(e, ctx: Context):
    if e is None:
        return None
    return ir.real_parts(_fold_constants(e.xreplace(_defaults(ctx.prog))))


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
    new_names: dict = {}
    for node, name in names.items():
        new = _substitute_defaults(node, ctx)
        if not new.is_Atom and new not in new_names:
            new_names[new] = name
    new_names[new_loss] = names[loss]
    return NoneVariant(tuple(i.name for i in opt), new_loss, new_dens, new_names)
