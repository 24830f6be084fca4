"""Backends, discovered: each module of this package is one target framework.

A backend is a :class:`Backend` value named ``BACKEND`` in a module of this package
whose name is the backend's name.  It holds everything losscc knows about one
framework:

* ``imports``: the import lines of a generated module.  The framework modules they
  import (:attr:`Backend.frameworks`) are what ``verify`` needs installed; the names
  they bind (:attr:`Backend.bound_names`) are reserved: no input, parameter or local of
  the generated code may take one.
* ``ops``: how it spells each operator of :mod:`losscc.backends.operators` (format
  strings over the operator's operands) where the base table there does not serve,
  plus ``helpers``, the functions some spellings call.  The table is checked against
  the operator interface when the module is imported.
* a few flags for differences that are not spelling (``wrap_scalars``, ``where_scalars``).
* ``template``: its module template, ``templates/<name>/module.py.j2``, a small child
  of ``templates/_module.py.j2`` that fills the blocks (the class above all).
* ``exports``: which of a module's names its package ``__init__`` imports.
* ``runner``: how ``verify`` runs the generated code eagerly and compiled and takes
  gradients; the framework is imported inside the runner, never by the module itself.

Adding a backend ``foo``:

1. write ``losscc/backends/foo.py`` with ``BACKEND = Backend(name="foo", ...)``: its
   imports, a spelling for every required key of :mod:`losscc.backends.operators` that
   the base table there does not serve (building the value checks the table), and its
   runner class with ``run`` (a generated module's values and gradients, eager and
   compiled), ``tensor`` and ``gradient`` (the existing backends are the model);
2. write ``templates/foo/module.py.j2``: ``{% extends "_module.py.j2" %}`` and the
   blocks of the class (``class_base``, ``class_doc``, ``learnable``, and where the
   defaults do not serve ``super_init`` and ``call_method``; or the whole ``class``);
3. add the framework to an extra in ``pyproject.toml`` (``frameworks``, or one of its
   own that ``Backend.extra`` names: verify's install hint says which), and run
   ``tests/test_operators.py`` (every operator's convention at ties, in the new backend)
   and ``losscc verify``.

Nothing else names a backend: the CLI's ``--backend`` choices, the project
configuration, ``verify``'s backend list, the reserved names and the tests'
parametrisation all come from :func:`all_backends`.  A backend whose framework is
not installed still generates code; ``verify`` skips it with a note.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType

from .operators import BASE_HELPERS, table

# modules of this package that are not backends
SUPPORT_MODULES = frozenset({"operators"})


def call_inputs(spec, case):
    """A runner's view of a call: (input, its case value or None, whether verify differentiates
    the loss by it) in the generated function's order, required inputs first."""
    order = [i for i in spec.inputs if not i.optional] + [i for i in spec.inputs if i.optional]
    for inp in order:
        v = case.inputs.get(inp.name)
        yield inp, v, v is not None and inp.dtype == "float" and not inp.optional


def class_export(names: Mapping[str, str]) -> tuple[str, ...]:
    """A package ``__init__`` that exports each module's class (functions stay in their
    modules, so ``import <package>.<module>`` is the module)."""
    return (names["class"],)


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
    # attribute names of the generated class's framework base: a parameter or learnable
    # stored under one of them would hide a method or break the base
    attributes: frozenset[str] = frozenset()
    # a module's public names by kind ({"function": ..., "class": ...}) -> what __init__ imports
    exports: Callable[[Mapping[str, str]], tuple[str, ...]] = class_export
    runner: Callable[[], object] | None = None  # verify's runner (imports the framework when built)
    # verify's runs only: framework warnings that say nothing about the code under test, and
    # environment variables set (where unset) before the framework is imported
    quiet_warnings: tuple[str, ...] = ()
    quiet_env: Mapping[str, str] = field(default_factory=dict)
    quiet_loggers: tuple[str, ...] = ()  # Python loggers whose INFO lines are dropped
    # frameworks are imported in ascending load_order (then by name) into one process
    load_order: int = 0
    # the optional-dependency group of losscc's pyproject.toml that installs the framework
    extra: str = "frameworks"
    # fused built-ins (losscc.fusion.Fused records) and how a tensor is tested for needing
    # no gradient ({x}; empty: it cannot be, and no record may ask it)
    fused: tuple = ()
    no_grad: str = ""
    # the symbolic backward (losscc.backward_emit): the element count of {x} as a value of
    # {like}'s dtype; empty: no custom-gradient emission, the backend keeps autograd
    element_count: str = ""
    # reference pages (losscc.docbuiltin): the framework's name in prose, and the series of
    # the built-in a spec's `dropin:` stands in for on a page's sweep (imports the framework
    # when called; None: no built-in curve)
    label: str = ""
    builtin_series: Callable | None = None

    def __post_init__(self):
        # the spellings over the base table, checked against the operator interface
        object.__setattr__(self, "helpers", MappingProxyType({**BASE_HELPERS, **self.helpers}))
        object.__setattr__(self, "ops", table(self.name, self.ops, self.helpers))
        if self.fused:
            from ..fusion import check_records

            check_records(self.name, self.fused, self.no_grad)

    def op(self, key: str, **operands) -> str:
        try:
            fmt = self.ops[key]
        except KeyError:
            raise KeyError(f"backend '{self.name}' has no lowering for operator '{key}'") from None
        return fmt.format(**operands)

    def helper_sources(self, key: str) -> tuple[str, ...]:
        """The helper definitions the spelling of `key` needs: those its helper calls (by
        name, one level), then its own; empty when it has none."""
        src = self.helpers.get(key)
        if not src:
            return ()
        deps = tuple(dict.fromkeys(
            dep for dep in self.helpers.values()
            if dep != src and (m := re.match(r"def (\w+)\(", dep)) and re.search(rf"\b{m.group(1)}\(", src)))
        return deps + (src,)

    @property
    def frameworks(self) -> tuple[str, ...]:
        """The top-level modules the generated code imports, in order of first import; the
        standard library's (a generated module may use it) are no framework."""
        out: list[str] = []
        for node in _import_nodes(self.imports):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            out += [m.split(".")[0] for m in mods
                    if m.split(".")[0] not in out and m.split(".")[0] not in sys.stdlib_module_names]
        return tuple(out)

    @property
    def bound_names(self) -> frozenset[str]:
        """The names the import lines bind in a generated module."""
        return frozenset(a.asname or a.name.split(".")[0] for node in _import_nodes(self.imports)
                         for a in node.names)

    def missing(self) -> tuple[str, ...]:
        """The frameworks that cannot be found here (none imported)."""
        return tuple(m for m in self.frameworks if not _findable(m))


def _import_nodes(lines: tuple[str, ...]):
    for line in lines:
        for node in ast.walk(ast.parse(line)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node


def _findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _freeze(d: dict) -> Mapping[str, str]:
    return MappingProxyType(dict(d))


@cache
def all_backends() -> tuple[Backend, ...]:
    """Every backend module's ``BACKEND``, sorted by name."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.name in SUPPORT_MODULES:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        backend = getattr(module, "BACKEND", None)
        if not isinstance(backend, Backend) or backend.name != info.name:
            raise ImportError(f"losscc.backends.{info.name} must define BACKEND = Backend(name={info.name!r}, ...)")
        found.append(backend)
    return tuple(sorted(found, key=lambda b: b.name))


def names() -> tuple[str, ...]:
    """The backends' names, sorted."""
    return tuple(b.name for b in all_backends())


def get(name: str) -> Backend:
    for b in all_backends():
        if b.name == name:
            return b
    raise KeyError(name)


def reserved_names() -> frozenset[str]:
    """What any backend's generated module imports: no spec name or local may take one."""
    return frozenset().union(*(b.bound_names for b in all_backends()))


def load_frameworks(backends) -> None:
    """Import the frameworks of `backends` (Backend values or names) in their load order."""
    chosen = [get(b) if isinstance(b, str) else b for b in backends]
    for b in sorted(chosen, key=lambda b: (b.load_order, b.name)):
        for mod in b.frameworks:
            importlib.import_module(mod)
