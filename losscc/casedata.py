"""One verification case (:class:`CaseData`) and what its inputs say about the axes.

A case holds float64 NumPy inputs (int64 for int inputs; None for an optional input left
out) and, where known, expected values and gradients.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import Diagnostic, Location, SpecError
from .spec import Spec


@dataclass
class CaseData:
    id: str
    source: str                          # "spec", "random" or a file path
    inputs: dict                         # name -> float64/int64 array or None
    params: dict
    learnable: dict = field(default_factory=dict)
    expected: dict = field(default_factory=dict)   # reduction -> value (may be partial)
    grads: dict = field(default_factory=dict)      # name -> expected d(sum)/d(name)
    from_reference: bool = False          # expectations come from the reference evaluator
    rtol: float | None = None             # looser value tolerance for hand-written numbers


def axis_sizes(spec: Spec, inputs: dict) -> dict[str, tuple[int, ...]]:
    """Each axis's sizes (a tuple: a variadic group has several) as the given, non-broadcast
    inputs show them; the first input to show an axis decides."""
    sizes: dict[str, tuple[int, ...]] = {}
    for inp in spec.inputs:
        v = inputs.get(inp.name)
        if v is None or inp.broadcast:
            continue
        nvar = v.ndim - sum(1 for a in inp.shape if not a.startswith("*"))
        k = 0
        for a in inp.shape:
            n = nvar if a.startswith("*") else 1
            sizes.setdefault(a.lstrip("*"), tuple(v.shape[k:k + n]))
            k += n
    return sizes


def declared_shape(spec: Spec, name: str, inputs: dict) -> tuple[int, ...]:
    """The shape the input `name` declares, in the sizes the other inputs show."""
    sizes = axis_sizes(spec, inputs)
    return tuple(n for a in spec.input(name).shape for n in sizes[a.lstrip("*")])


_LOSS_AXES: dict = {}


def _loss_shape(spec: Spec, inputs: dict) -> tuple[int, ...] | None:
    """The shape of the per-element loss for these inputs, or None where it is not known."""
    key = (spec.path, spec.source_sha256)
    if key not in _LOSS_AXES:
        from .parse import build_program

        prog = build_program(spec)
        _LOSS_AXES.clear()  # one spec at a time is enough
        _LOSS_AXES[key] = prog.typeof(prog.loss).axes
    axes = _LOSS_AXES[key]
    sizes = axis_sizes(spec, inputs)
    if not all(a in sizes for a in axes):
        return None
    return tuple(n for a in axes for n in sizes[a])


def check_none_shape(spec: Spec, case: CaseData, loc: Location, code: str, where: str) -> None:
    """An expected per-element value ('none') must have the loss's shape."""
    want = case.expected.get("none")
    if want is None:
        return
    shape = _loss_shape(spec, case.inputs)
    got = np.shape(want)
    if shape is not None and got != shape:
        raise SpecError([Diagnostic(loc, code, f"{where}: expected.none has shape {list(got)}, but the loss "
                                    f"for these inputs has shape {list(shape)}")])
