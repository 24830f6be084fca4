"""Shapes in the canonical layout (see :mod:`losscc.lower`): an axis's negative position and
the code for a tensor's canonical and plain shapes, with variadic groups as tuples."""

from __future__ import annotations

from .parse import Program


def pos_expr(axis: str, prog: Program, need) -> str:
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


def span(axes: tuple[str, ...], prog: Program) -> tuple[str, ...]:
    """The canonical axes a tensor with `axes` occupies: from its first axis to the last."""
    if not axes:
        return ()
    return prog.axes[prog.axes.index(axes[0]):]


def canonical_shape(axes: tuple[str, ...], prog: Program, need) -> str | None:
    """Code for the canonical shape of a tensor with `axes`, or None if it is already canonical."""
    axes_span = span(axes, prog)
    if tuple(axes_span) == tuple(axes):
        return None
    parts: list[str] = []
    fixed: list[str] = []
    for a in axes_span:
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


