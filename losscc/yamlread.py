"""Untrusted YAML into a tree of positioned values, with bounded work.

The text is first read as a stream of parser events (PyYAML's parser is not
recursive): there the nesting depth of every collection, block or flow, sequence or
mapping, is limited ('yaml_depth'), and so is the number of values ('yaml_nodes');
anchors and aliases are refused.  Only then is the node tree composed (recursive, now
bounded) and converted.  Scalars are resolved strictly: null, true/false, decimal
integers of at most 300 digits, decimal floats (also ``1e-8``, which YAML 1.1 reads as
a string), ``.inf``/``.nan`` (reported as not finite where a number is read) and
strings.  YAML 1.1's other forms -- ``0x1F``, ``017``, ``0o17``, ``1_000``, base 60
``1:30``, ``yes``/``no``/``on``/``off`` -- are errors (E108) asking for a decimal
number or quotes, instead of silently becoming another value.
"""

from __future__ import annotations

import re

import yaml

from . import limits
from .errors import Collector, Diagnostic, Location, SpecError

MAX_YAML_DEPTH = limits.MAX_YAML_DEPTH
MAX_INT_DIGITS = 300

FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\Z")
_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)\Z")
_SPECIAL_FLOATS = {".inf": float("inf"), "+.inf": float("inf"), "-.inf": float("-inf"), ".nan": float("nan")}
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_TAG = "tag:yaml.org,2002:"
PLAIN_TAGS = frozenset(_TAG + t for t in ("map", "seq", "str", "int", "float", "bool", "null"))


class Node:
    """A YAML value with its position: scalars, lists and str-keyed dicts of Node."""

    __slots__ = ("value", "line", "col", "style", "key_line", "key_col")

    def __init__(self, value, line, col, style=None):
        self.value, self.line, self.col, self.style = value, line, col, style
        self.key_line, self.key_col = line, col  # where its mapping key stands, if any

    def plain(self):
        if isinstance(self.value, dict):
            return {k: v.plain() for k, v in self.value.items()}
        if isinstance(self.value, list):
            return [v.plain() for v in self.value]
        return self.value


def clip(text: str, n: int = 40) -> str:
    text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= n else text[: n - 3] + "..."


def _fail(out: Collector, mark, code: str, message: str):
    return SpecError([Diagnostic(Location(out.path, mark.line + 1, mark.column + 1), code, message)])


def _check_events(text: str, out: Collector) -> None:
    """Depth, size, anchors and aliases, from the event stream (no recursion)."""
    depth = count = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _fail(out, event.start_mark, "E102", "YAML anchors and aliases are not allowed in a spec")
        if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
            count += 1
            if count > limits.MAX_YAML_NODES:
                raise _fail(out, event.start_mark, "E104",
                            f"the spec exceeds the limit 'yaml_nodes' ({limits.MAX_YAML_NODES})")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise _fail(out, event.start_mark, "E104",
                            f"YAML nesting exceeds the limit 'yaml_depth' ({MAX_YAML_DEPTH})")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def load_yaml(text: str, out: Collector) -> Node | None:
    """The tree of `text`, or None with errors in `out` (a few fatal ones raise SpecError)."""
    try:
        _check_events(text, out)
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            if root is None:
                out.error(1, 1, "E103", "the spec is empty")
                return None
            return _convert(root, out)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        msg = exc.problem or exc.context
        if exc.context and exc.problem and exc.context_mark:
            msg += f" ({exc.context} at {exc.context_mark.line + 1}:{exc.context_mark.column + 1})"
        out.error(line, col, "E101", f"YAML syntax: {clip(str(msg), 200)}")
        return None
    except yaml.YAMLError as exc:
        out.error(1, 1, "E101", f"YAML syntax: {clip(str(exc), 200)}")
        return None
    except RecursionError:  # not expected after the depth check; kept as a last line
        out.error(1, 1, "E104", "YAML nested too deeply")
        return None


def _convert(node, out: Collector) -> Node | None:
    line, col = node.start_mark.line + 1, node.start_mark.column + 1
    if node.tag not in PLAIN_TAGS:
        out.error(line, col, "E107", f"YAML tag '{clip(node.tag, 80)}' is not allowed in a spec")
        return None
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Node] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                out.error(key_node.start_mark.line + 1, key_node.start_mark.column + 1, "E105",
                          "mapping keys must be plain names")
                continue
            key = key_node.value
            if key in result:
                out.error(key_node.start_mark.line + 1, key_node.start_mark.column + 1, "E106",
                          f"duplicate key '{clip(key)}'")
                continue
            converted = _convert(value_node, out)
            if converted is not None:
                converted.key_line = key_node.start_mark.line + 1
                converted.key_col = key_node.start_mark.column + 1
                result[key] = converted
        return Node(result, line, col)
    if isinstance(node, yaml.SequenceNode):
        items = [_convert(v, out) for v in node.value]
        return Node([v for v in items if v is not None], line, col)
    value, problem = scalar(node.value, node.tag, node.style)
    if problem:
        code, message, hint = problem
        out.error(line, col, code, message, hint)
        return None
    return Node(value, line, col, node.style)


def scalar(text: str, tag: str, style) -> tuple[object, tuple[str, str, str] | None]:
    """(value, None) or (None, (code, message, hint)) for one YAML scalar."""
    if tag == _TAG + "str":
        if style is None and FLOAT.match(text):
            return float(text), None  # YAML 1.1 reads 1e-8 as a string
        return text, None
    if tag == _TAG + "null" and text in _NULLS:
        return None, None
    if tag == _TAG + "bool" and text in _BOOLS:
        return _BOOLS[text], None
    if tag == _TAG + "int" and _INT.match(text):
        if len(text.lstrip("+-")) > MAX_INT_DIGITS:
            return None, ("E104", f"integer of {len(text)} digits exceeds the limit of {MAX_INT_DIGITS} digits", "")
        return int(text), None
    if tag == _TAG + "float":
        if text.lower() in _SPECIAL_FLOATS:
            return _SPECIAL_FLOATS[text.lower()], None
        if FLOAT.match(text):
            return float(text), None
    shown = clip(text)
    if tag == _TAG + "bool":
        return None, ("E108", f"'{shown}' is a YAML 1.1 boolean",
                      "write true or false, or quote the text: \"" + shown + "\"")
    return None, ("E108", f"'{shown}' is not a plain decimal number",
                  "write numbers in decimal (such as 31, 0.5 or 1e-8), or quote the text: \"" + shown + "\"")
