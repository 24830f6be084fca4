"""Files losscc reads at run time: the templates, the spec catalogue, the JSON Schema.

They are package data.  In a source checkout the top-level ``templates/`` and
``specs/`` directories are the single source; a built wheel carries them as
``losscc/templates`` and ``losscc/catalogue`` (``[tool.setuptools] package-dir`` in
``pyproject.toml``).  Both are reached through :mod:`importlib.resources`
Traversables, so the same code serves a checkout, an editable install and a wheel.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importlib.resources.abc from Python 3.11 on
    from importlib.abc import Traversable

_PACKAGE = "losscc"
# package-data directory -> the checkout directory it is built from
_CHECKOUT_DIRS = {"templates": "templates", "catalogue": "specs"}


def _checkout_root() -> Path | None:
    """The source checkout this package runs from, if it does (PYTHONPATH or editable)."""
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "templates" / "init.py.j2").is_file():
        return root
    return None


def data_dir(name: str) -> Traversable:
    """The package-data directory `name` ("templates" or "catalogue")."""
    root = _checkout_root()
    if root is not None:
        return root / _CHECKOUT_DIRS[name]
    return resources.files(_PACKAGE) / name


def package_file(name: str) -> Traversable:
    """A file that lives inside the ``losscc`` package itself (the JSON Schema)."""
    return resources.files(_PACKAGE) / name


def catalogue() -> dict[str, Traversable]:
    """The specs shipped with losscc, by name (file stem)."""
    return {f.name[: -len(".yaml")]: f for f in data_dir("catalogue").iterdir()
            if f.name.endswith(".yaml") and f.is_file()}
