"""Backends: one operator table each (this package) plus one template set (templates/<name>/).

A backend is a :class:`Backend` value: the imports its code needs, how it spells
each IR operator (format strings over named operands), the helper functions some
operators need, and a few flags.  Adding a backend means adding one module here
with a ``BACKEND`` value and one template directory; nothing else changes.

A few operators are optional, for instruction selection: ``square`` (used for ``x**2``
instead of ``**``) and ``gather_log_softmax`` (``log_softmax(z)[i]`` computed as
``z[i] - logsumexp(z)``). A table without them gets the general lowering.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class Backend:
    name: str
    imports: tuple[str, ...]
    ops: Mapping[str, str]
    helpers: Mapping[str, str] = field(default_factory=dict)  # op name -> helper source
    # scalars that float32 cannot hold exactly must become tensors of the computation dtype
    wrap_scalars: bool = False
    scalar: str = "{value}"          # how a wrapped scalar is written
    where_scalars: bool = True       # where(c, x, 1.0) accepts a Python number (else full_like)
    template: str = "module.py.j2"
    # attribute names of the generated class's framework base (nn.Layer, nn.LossBase): a
    # parameter or learnable stored under one of them would hide a method or break the base
    attributes: frozenset[str] = frozenset()

    def op(self, key: str, **operands) -> str:
        try:
            fmt = self.ops[key]
        except KeyError:
            raise KeyError(f"backend '{self.name}' has no lowering for operator '{key}'") from None
        return fmt.format(**operands)


def _freeze(d: dict) -> Mapping[str, str]:
    return MappingProxyType(dict(d))


def all_backends() -> tuple[Backend, ...]:
    from . import mindspore, paddle

    return (mindspore.BACKEND, paddle.BACKEND)


def names() -> tuple[str, ...]:
    """The backends' names, in order (also the names of the frameworks they import)."""
    return tuple(b.name for b in all_backends())


def get(name: str) -> Backend:
    for b in all_backends():
        if b.name == name:
            return b
    raise KeyError(name)
