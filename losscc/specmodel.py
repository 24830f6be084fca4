"""The spec model: frozen dataclasses that a loaded spec file becomes (:func:`losscc.spec.load_spec`).

Every value has been checked by the loader; positions (:class:`~losscc.errors.Location`)
are kept where later stages report problems of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import Location


@dataclass(frozen=True)
class Domain:
    """Values an input takes: an interval (bounds may be shape symbols) or a finite set."""

    lo: float | str | None = None  # None = -inf; str = shape symbol
    hi: float | str | None = None  # None = +inf
    lo_closed: bool = False
    hi_closed: bool = False
    values: tuple[float, ...] = ()  # a finite set, e.g. {-1, 1}
    text: str = "real"

    @property
    def is_set(self) -> bool:
        return bool(self.values)


REAL = Domain()


@dataclass(frozen=True)
class Input:
    name: str
    dtype: str                     # "float" or "int"
    shape: tuple[str, ...]         # axis symbols; "*S" is a variadic group
    domain: Domain = REAL
    optional: bool = False         # may be None; then `default` is used
    default: float = 1.0
    ignore: str | None = None      # name of an int parameter: positions equal to it are ignored
    broadcast: str = ""            # "right": any shape that broadcasts to `shape` (NumPy rules);
                                   # "left": missing trailing axes are added first (torch var rule)
    doc: str = ""
    scalar: bool = False           # a number is accepted too: the same value everywhere
    loc: Location = Location()
    sizes: tuple[tuple[str, int], ...] = ()  # axes of a fixed size declared here ("K=4" -> ("K", 4))


@dataclass(frozen=True)
class Param:
    name: str
    kind: str                      # "float", "int" or "bool"
    default: float | int | bool
    min: float | None = None       # a lower bound: inclusive (`min:`), or strict (`gt:`) where min_open
    max: float | None = None       # an upper bound: inclusive (`max:`), or strict (`lt:`) where max_open
    doc: str = ""
    loc: Location = Location()
    min_open: bool = False
    max_open: bool = False

    def bound_words(self) -> list[str]:
        """The bounds as comparisons: ['> 0', '<= 1']."""
        out = []
        if self.min is not None:
            out.append(f"{'>' if self.min_open else '>='} {self.min!r}")
        if self.max is not None:
            out.append(f"{'<' if self.max_open else '<='} {self.max!r}")
        return out

    def admits(self, v) -> bool:
        """Whether the number v lies within the bounds."""
        lo, hi = self.min, self.max
        return ((lo is None or v > lo or (v == lo and not self.min_open))
                and (hi is None or v < hi or (v == hi and not self.max_open)))

    @property
    def positive(self) -> bool:
        """Every admitted value is > 0."""
        return self.kind != "bool" and self.min is not None and (self.min > 0 or (self.min == 0 and self.min_open))

    @property
    def nonnegative(self) -> bool:
        return self.kind != "bool" and self.min is not None and self.min >= 0


@dataclass(frozen=True)
class Learnable:
    name: str
    shape: tuple[int, ...]
    init: float
    doc: str = ""
    loc: Location = Location()


@dataclass(frozen=True)
class Binding:
    name: str
    text: str
    loc: Location                  # where the binding's text starts
    name_loc: Location = Location()  # where its name stands


@dataclass(frozen=True)
class ReductionDef:
    name: str
    denominator: Binding | None    # None: the number of elements of the loss
    doc: str = ""


@dataclass(frozen=True)
class Case:
    inputs: dict
    params: dict
    expected: dict
    id: str = ""
    rtol: float | None = None      # hand-written numbers carry few digits
    loc: Location = Location()
    positions: dict = field(default_factory=dict)  # "inputs.x" -> (line, col) of that entry


@dataclass(frozen=True)
class Reference:
    file: str
    inputs: dict                   # file's input name -> spec input name
    params: dict                   # file's param name -> spec param name
    cases: tuple[str, ...]         # case ids to claim; empty = all
    reference_gradients: tuple[str, ...] = ()  # cases whose gradients come from losscc's reference
    loc: Location = Location()


@dataclass(frozen=True)
class Spec:
    name: str
    summary: str
    description: str
    inputs: tuple[Input, ...]
    params: tuple[Param, ...]
    learnable: tuple[Learnable, ...]
    bindings: tuple[Binding, ...]
    reductions: tuple[ReductionDef, ...]   # none, mean, sum first, then extras
    default_reduction: str
    guards: dict = field(default_factory=dict)
    cases: tuple[Case, ...] = ()
    references: tuple[Reference, ...] = ()
    backward: str = ""              # autograd | custom | auto (losscc.backward); "": the project's default
    path: str = "<spec>"
    source_sha256: str = ""
    folder: str = ""                # the absolute folder the file was read from ("" for text); specs it calls are found there
    composes: tuple[str, ...] = ()  # specs its formula calls (set when its program is built)
    name_loc: Location = Location()
    overrides: tuple[tuple[str, str], ...] = ()   # command-line options that changed the guards
    dropin: tuple = ()             # losscc.dropin.DropIn per backend: the built-ins it stands in for

    @property
    def class_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_") if part)

    def input(self, name: str) -> Input:
        return next(i for i in self.inputs if i.name == name)

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    @property
    def sizes(self) -> dict[str, int]:
        """The axes of a fixed size (``shape: [N, K=4]``) and their sizes."""
        return {a: n for i in self.inputs for a, n in i.sizes}

    def shape_text(self, inp: Input) -> str:
        """`inp`'s shape as written in docs and messages: ``[*B, K=4]``."""
        sizes = self.sizes
        return "[" + ", ".join(f"{a}={sizes[a]}" if a in sizes else a for a in inp.shape) + "]"

    @property
    def reduction_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.reductions)
