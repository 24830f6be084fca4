"""Name rules of the spec format: what an input, parameter, learnable, binding or reduction
may be called, and what a shape symbol looks like.

Names become Python identifiers in generated code, so they must be snake_case and may not
be keywords, builtins, names the generated modules use themselves (``RESERVED``), framework
aliases their import lines bind, or formula functions (``FUNCTION_NAMES``).
"""

from __future__ import annotations

import builtins
import functools
import keyword
import re
from typing import Any

from . import limits
from .backends import reserved_names
from .functions import NAMES as FUNCTION_NAMES

# FUNCTION_NAMES: the formula functions of the registry (losscc/functions.py)

IDENT = re.compile(r"[a-z][a-z0-9_]*\Z")
AXIS = re.compile(r"\*?[A-Z][A-Za-z0-9]*\Z")
# names the generated code itself uses, or that would shadow what it needs (the names
# the backends' import lines bind among them)
RESERVED = reserved_names() | frozenset(
    {
        "self",
        "dtype", "reduction", "cls", "super", "tuple", "float", "int", "bool", "len",
        "range", "isinstance", "ValueError", "TypeError", "None", "True", "False", "valid",
        "print", "type", "object", "str", "dict", "list", "getattr", "setattr", "exec", "eval",
        "open", "compile", "globals", "locals", "vars", "import", "builtins", "training",
        "name", "parameters", "construct", "forward",
    }
)
_BUILTINS_OK = frozenset({"input", "format", "filter", "map", "id", "hash", "iter", "next", "all", "any", "round"})


@functools.lru_cache(maxsize=None)
def framework_names() -> frozenset[str]:
    """What any backend's generated module imports (``ops``, ``nn``, ``F``, ...): an input or
    parameter of that name would hide the framework from the function's body."""
    return reserved_names()


@functools.lru_cache(maxsize=None)
def class_attributes() -> frozenset[str]:
    """Attribute names of any backend's class base (``nn.Layer.half``, ``LossBase.reduce``).
    A learnable is a framework parameter stored on the class under its own name, which the
    framework keeps outside the instance dict, so a method of that name would win; a
    hyperparameter is an instance attribute: see :func:`check_param_attribute`."""
    from .backends import all_backends

    return frozenset().union(*(b.attributes for b in all_backends()))


# what each generated package's ``__init__`` defines beside the loss modules it imports
PACKAGE_NAMES = frozenset({"get_loss", "LOSSES"})
# the builtins its get_loss reads (templates/init.py.j2; tests/test_hostile_pr_round8.py checks)
PACKAGE_READS = frozenset({"isinstance", "str", "map", "repr", "list", "ValueError", "len", "sorted"})


def check_spec_name(name: str) -> str | None:
    """The reason a spec cannot be called `name`, beyond check_identifier: its module and
    function are imported into the package's ``__init__``, which defines these itself."""
    if name in PACKAGE_NAMES:
        return "is defined by the generated package's __init__ (the loss registry)"
    if name in PACKAGE_READS:  # the package's __init__ imports the function by this name
        return "is a Python builtin that the generated package's __init__ uses (get_loss)"
    cls = "".join(part.capitalize() for part in name.split("_") if part)  # Spec.class_name
    if cls in PACKAGE_NAMES:  # `l_o_s_s_e_s`: the registry would replace the class in the package
        return f"gives the class '{cls}', which the generated package's __init__ defines (the loss registry)"
    if hasattr(builtins, cls) or cls in framework_names() or cls in RESERVED:
        # `class ValueError` would turn the module's own input checks, and get_loss's, into
        # calls of the loss class; `class F` would hide a backend's framework alias
        return (f"gives the class '{cls}', a name the generated modules use (a Python builtin or "
                "a framework import)")
    return None


def check_attribute(name: str) -> str | None:
    """The reason a learnable cannot be called `name`, beyond check_identifier."""
    if name in class_attributes():
        return "is an attribute of the generated class's framework base (nn.Layer / nn.LossBase)"
    return None


# methods of the generated classes that their own code or a training script calls: a
# hyperparameter is an instance attribute of that name and would hide the method (a base's
# create_parameter for a learnable, a dataclass backend's init, a state dict or the training switch)
CALLED_METHODS = frozenset({
    "create_parameter", "init", "custom_backward", "parameters", "named_parameters", "state_dict",
    "set_state_dict", "load_state_dict", "trainable_params", "get_parameters", "train", "eval", "apply", "to",
    "set_train", "set_grad", "sublayers", "cells", "replace",
})


def check_param_attribute(name: str) -> str | None:
    """The reason a hyperparameter cannot be called `name`, beyond check_identifier."""
    if name in CALLED_METHODS:
        return "is a method of the generated class that its code or a training script calls"
    return None


def attribute(name: str, backend: str) -> str:
    """The instance attribute holding hyperparameter (or constructor input) `name`: the name
    itself, or ``_losscc_param_<name>`` where the class's framework base has an attribute of
    that name (one framework reads ``is_top_cell`` and types ``phase``, another calls ``buffers``)."""
    from .backends import get

    return f"_losscc_param_{name}" if name in get(backend).attributes else name


def check_identifier(name: Any) -> str | None:
    """The reason `name` can't be used in generated code, or None when it can."""
    if not isinstance(name, str):
        return "must be a string"
    if len(name) > limits.MAX_NAME_CHARS:
        return f"is longer than the limit 'name_chars' ({limits.MAX_NAME_CHARS})"
    if not IDENT.match(name):
        return "must be snake_case: a lower-case letter, then letters, digits or '_'"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return "is a Python keyword"
    if name in RESERVED:
        return "is reserved for the generated code"
    if name in framework_names():
        return "is a name the generated code imports (a framework alias)"
    if name in FUNCTION_NAMES:
        return "is the name of a formula function"
    if hasattr(builtins, name) and name not in _BUILTINS_OK:
        return "is a Python builtin"
    return None
