"""Reading positioned YAML values (:class:`~losscc.yamlread.Node`) into checked Python values.

A :class:`Reader` reports every problem to a :class:`~losscc.errors.Collector` at the
value's line and column and returns None for a value it refuses, so that a loader reads
on and reports all problems of a file together.  :class:`Namespace` holds the one
namespace that a spec's parameters, inputs, shape symbols, learnables and reductions share.
"""

from __future__ import annotations

import re
from typing import Any, Callable, TypeVar

from . import limits
from .errors import Collector, did_you_mean
from .specnames import check_attribute, check_identifier, check_param_attribute, check_spec_name
from .yamlread import Node, clip

_T = TypeVar("_T")

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OTHER_NUMBER = re.compile(r"[-+]?(0[xXoObB][0-9a-fA-F_]+|[0-9][0-9_]*(\.[0-9_]*)?([eE][-+]?[0-9]+)?)")


class Reader:
    """Reads the values of one file; each method reports what it refuses to ``out``."""

    def __init__(self, out: Collector):
        self.out = out

    def err(self, node: Node, code: str, msg: str, hint: str = "") -> None:
        self.out.error(node.line, node.col, code, msg, hint)

    def mapping(self, node: Node, where: str, allowed: tuple[str, ...]) -> dict[str, Node]:
        if not isinstance(node.value, dict):
            self.err(node, "E110", f"{where}: expected a mapping, got {kind_of(node.value)}")
            return {}
        for key, value in node.value.items():
            if key not in allowed:
                hint = did_you_mean(key, allowed)
                if not hint and not _WORD.fullmatch(key):
                    hint = ("is this the rest of a text value? In a { } mapping an unquoted ',' ends a "
                            "value and ': ' starts a key: quote the text, e.g. doc: \"Margin, -1 for dissimilar.\"")
                self.out.error(value.key_line, value.key_col, "E111", f"{where}: unknown field '{clip(key)}'", hint)
        return node.value

    def string(self, node: Node, where: str, limit: int = limits.MAX_TEXT_CHARS) -> str | None:
        if not isinstance(node.value, str):
            self.err(node, "E112", f"{where}: expected a string, got {kind_of(node.value)}")
            return None
        if len(node.value) > limit:
            self.err(node, "E104", f"{where}: text exceeds the limit of {limit} characters")
            return None
        return node.value

    def entries(self, node: Node, where: str) -> dict[str, Node]:
        """A section whose keys are names (params, learnable, reductions); {} if it is no mapping."""
        if not isinstance(node.value, dict):
            self.err(node, "E110", f"{where}: expected a mapping")
            return {}
        return node.value

    def doc(self, fields: dict[str, Node], where: str) -> str:
        """The optional text field ``doc`` of a mapping's fields, "" where absent or refused."""
        if "doc" not in fields:
            return ""
        return self.string(fields["doc"], f"{where}.doc") or ""

    def number(self, node: Node, where: str) -> float | None:
        v = node.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            hint = ""
            if isinstance(v, str) and _OTHER_NUMBER.fullmatch(v.strip()):
                hint = "write numbers in decimal, such as 31, 0.5 or 1e-8"
            self.err(node, "E112", f"{where}: expected a number, got {kind_of(v)}", hint)
            return None
        if v != v or v in (float("inf"), float("-inf")):
            self.err(node, "E113", f"{where}: must be finite")
            return None
        return v

    def boolean(self, node: Node, where: str) -> bool | None:
        if not isinstance(node.value, bool):
            self.err(node, "E112", f"{where}: expected true or false, got {kind_of(node.value)}")
            return None
        return node.value

    def name(self, node: Node, where: str, key: str, at_key: bool = True) -> bool:
        reason = check_identifier(key)
        if not reason and where == "learnable":
            reason = check_attribute(key)
        if not reason and where == "params":
            reason = check_param_attribute(key)
        if not reason and where == "name":
            reason = check_spec_name(key)
        if reason:
            line, col = (node.key_line, node.key_col) if at_key else (node.line, node.col)
            self.out.error(line, col, "E120", f"{where}: name '{clip(key)}' {reason}")
            return False
        return True


def kind_of(v: Any) -> str:
    """How a message names the type of a YAML value: "a mapping", "a list", "nothing", ..."""
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
            type(None): "nothing"}.get(type(v), "a number")


class Namespace:
    """Names claimed so far; a second claim of one name is E121 at the second place."""

    def __init__(self, r: Reader):
        self.r = r
        self.taken: dict[str, str] = {}

    def claim(self, node: Node, key: str, what: str) -> bool:
        if key in self.taken:
            self.r.err(node, "E121", f"{what} '{key}' has the same name as {self.taken[key]}")
            return False
        self.taken[key] = f"{what} '{key}'"
        return True

    def read_each(self, entries: dict[str, Node], section: str, what: str,
                  read_one: Callable[[str, Node], _T | None]) -> list[_T]:
        """`read_one(key, node)` of each entry whose key is a valid name not claimed before;
        the values it does not refuse (None), in order."""
        out = []
        for key, node in entries.items():
            if self.r.name(node, section, key) and self.claim(node, key, what):
                item = read_one(key, node)
                if item is not None:
                    out.append(item)
        return out
