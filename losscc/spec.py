"""Stage 1: a spec file (YAML, untrusted) into a validated, immutable :class:`Spec`.

YAML is read with the safe loader into a node tree so that every value keeps its
line and column; aliases and anchors are refused (no alias bombs), sizes are
bounded (:mod:`losscc.limits`), and every field is checked.  All problems of a
file are collected and raised together as a :class:`~losscc.errors.SpecError`.
The formula text is *not* interpreted here; :mod:`losscc.parse` does that.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import casecheck, limits
from .errors import Collector, Diagnostic, Location, SpecError, did_you_mean
from .files import read_bounded
from .yamlread import FLOAT as _FLOAT
from .yamlread import Node as _Node
from .yamlread import clip as _clip
from .yamlread import load_yaml

# --------------------------------------------------------------------------- model


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


@dataclass(frozen=True)
class Param:
    name: str
    kind: str                      # "float", "int" or "bool"
    default: float | int | bool
    min: float | None = None
    max: float | None = None
    doc: str = ""
    loc: Location = Location()


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
    path: str = "<spec>"
    source_sha256: str = ""
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
    def reduction_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.reductions)


# --------------------------------------------------------------------------- names

IDENT = re.compile(r"[a-z][a-z0-9_]*\Z")
AXIS = re.compile(r"\*?[A-Z][A-Za-z0-9]*\Z")
# names the generated code itself uses, or that would shadow what it needs
RESERVED = frozenset(
    {
        "ms", "ops", "nn", "paddle", "F", "self",
        "dtype", "reduction", "cls", "super", "tuple", "float", "int", "bool", "len",
        "range", "isinstance", "ValueError", "TypeError", "None", "True", "False", "valid",
        "print", "type", "object", "str", "dict", "list", "getattr", "setattr", "exec", "eval",
        "open", "compile", "globals", "locals", "vars", "import", "builtins", "training",
        "name", "parameters", "construct", "forward",
    }
)
# formula function names; inputs may not shadow them
FUNCTION_NAMES = frozenset(
    {
        "exp", "log", "log1p", "expm1", "sqrt", "abs", "sigmoid", "softplus", "tanh", "cosh", "min",
        "max", "clip", "where", "Piecewise", "sum", "mean", "logsumexp", "softmax",
        "log_softmax", "one_hot", "stop_gradient", "square", "log_sigmoid", "relu",
        "round", "floor", "ceil", "sign", "argmax", "argmin", "sort", "topk",
    }
)
_BUILTINS_OK = frozenset({"input", "format", "filter", "map", "id", "hash", "iter", "next", "all", "any", "round"})


@functools.lru_cache(maxsize=None)
def framework_names() -> frozenset[str]:
    """What any backend's generated module imports (``ms``, ``ops``, ``paddle``, ``F``, ...):
    an input or parameter of that name would hide the framework from the function's body."""
    from .backends import all_backends
    from .lower import import_names

    return frozenset().union(*(import_names(b) for b in all_backends()))


@functools.lru_cache(maxsize=None)
def class_attributes() -> frozenset[str]:
    """Attribute names of any backend's class base (``nn.Layer.half``, ``LossBase.reduce``).
    A learnable is a framework parameter stored on the class under its own name, which the
    framework keeps outside the instance dict, so a method of that name would win; a
    hyperparameter is a plain instance attribute and is not affected."""
    from .backends import all_backends

    return frozenset().union(*(b.attributes for b in all_backends()))


def check_attribute(name: str) -> str | None:
    """The reason a learnable cannot be called `name`, beyond check_identifier."""
    if name in class_attributes():
        return "is an attribute of the generated class's framework base (nn.Layer / nn.LossBase)"
    return None


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


# --------------------------------------------------------------------------- YAML


# --------------------------------------------------------------------------- fields

TOP_FIELDS = ("name", "summary", "description", "inputs", "params", "learnable", "formula",
              "reduction", "reductions", "guards", "cases", "references", "dropin")
INPUT_FIELDS = ("dtype", "shape", "domain", "optional", "default", "ignore", "broadcast", "scalar", "doc")
PARAM_FIELDS = ("default", "min", "max", "doc")
LEARNABLE_FIELDS = ("shape", "init", "doc")
GUARD_FIELDS = ("clip", "eps", "upcast")
BUILTIN_REDUCTIONS = ("none", "mean", "sum")


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OTHER_NUMBER = re.compile(r"[-+]?(0[xXoObB][0-9a-fA-F_]+|[0-9][0-9_]*(\.[0-9_]*)?([eE][-+]?[0-9]+)?)")


class _Reader:
    def __init__(self, out: Collector):
        self.out = out

    def err(self, node: _Node, code: str, msg: str, hint: str = "") -> None:
        self.out.error(node.line, node.col, code, msg, hint)

    def mapping(self, node: _Node, where: str, allowed: tuple[str, ...]) -> dict[str, _Node]:
        if not isinstance(node.value, dict):
            self.err(node, "E110", f"{where}: expected a mapping, got {_kind(node.value)}")
            return {}
        for key, value in node.value.items():
            if key not in allowed:
                hint = did_you_mean(key, allowed)
                if not hint and not _WORD.fullmatch(key):
                    hint = ("is this the rest of a text value? In a { } mapping an unquoted ',' ends a "
                            "value and ': ' starts a key: quote the text, e.g. doc: \"Margin, -1 for dissimilar.\"")
                self.out.error(value.key_line, value.key_col, "E111", f"{where}: unknown field '{_clip(key)}'", hint)
        return node.value

    def string(self, node: _Node, where: str, limit: int = limits.MAX_TEXT_CHARS) -> str | None:
        if not isinstance(node.value, str):
            self.err(node, "E112", f"{where}: expected a string, got {_kind(node.value)}")
            return None
        if len(node.value) > limit:
            self.err(node, "E104", f"{where}: text exceeds the limit of {limit} characters")
            return None
        return node.value

    def number(self, node: _Node, where: str) -> float | None:
        v = node.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            hint = ""
            if isinstance(v, str) and _OTHER_NUMBER.fullmatch(v.strip()):
                hint = "write numbers in decimal, such as 31, 0.5 or 1e-8"
            self.err(node, "E112", f"{where}: expected a number, got {_kind(v)}", hint)
            return None
        if v != v or v in (float("inf"), float("-inf")):
            self.err(node, "E113", f"{where}: must be finite")
            return None
        return v

    def boolean(self, node: _Node, where: str) -> bool | None:
        if not isinstance(node.value, bool):
            self.err(node, "E112", f"{where}: expected true or false, got {_kind(node.value)}")
            return None
        return node.value

    def name(self, node: _Node, where: str, key: str, at_key: bool = True) -> bool:
        reason = check_identifier(key)
        if not reason and where == "learnable":
            reason = check_attribute(key)
        if reason:
            line, col = (node.key_line, node.key_col) if at_key else (node.line, node.col)
            self.out.error(line, col, "E120", f"{where}: name '{_clip(key)}' {reason}")
            return False
        return True


def _kind(v: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
            type(None): "nothing"}.get(type(v), "a number")


_INTERVAL = re.compile(r"\s*([\[\(])\s*([^,\[\]\(\)]+?)\s*,\s*([^,\[\]\(\)]+?)\s*([\]\)])\s*\Z")
_SET = re.compile(r"\s*\{([^{}]*)\}\s*\Z")


def parse_domain(text: str, axes: set[str]) -> Domain | str:
    """A Domain from text such as "[0, C)", "(0, 1)", "[0, inf)", "{-1, 1}", "real"."""
    if text.strip() == "real":
        return REAL
    m = _SET.match(text)
    if m:
        parts = [p.strip() for p in m.group(1).split(",") if p.strip()]
        if not all(_FLOAT.match(p) for p in parts):
            return "set members must be numbers"
        if not all(abs(float(p)) < 1e300 for p in parts):
            return "set members must be finite numbers (below 1e300)"
        values = tuple(sorted({float(p) for p in parts}))
        if not values or len(values) > 64:
            return "a set needs 1 to 64 numbers"
        return Domain(values=values, text=text.strip())
    m = _INTERVAL.match(text)
    if not m:
        return "expected an interval such as '[0, C)' or '(0, 1)', a set such as '{-1, 1}', or 'real'"

    def bound(s: str):
        s = s.strip()
        if s in ("inf", "+inf"):
            return None, "inf"
        if s == "-inf":
            return None, "-inf"
        if s in axes:
            return s, None
        if _FLOAT.match(s):
            if not abs(float(s)) < 1e300:
                return None, f"bound '{_clip(s)}' is too large (write inf for no bound)"
            return float(s), None
        return None, f"bound '{_clip(s)}' is not a number, 'inf' or a shape symbol"

    lo, e1 = bound(m.group(2))
    hi, e2 = bound(m.group(3))
    for e in (e1, e2):
        if e and e not in ("inf", "-inf"):
            return e
    if e1 == "inf" or e2 == "-inf":
        return "interval bounds are reversed"
    if isinstance(lo, float) and isinstance(hi, float) and lo >= hi:
        return "interval is empty"
    return Domain(lo=lo, hi=hi, lo_closed=m.group(1) == "[" and lo is not None,
                  hi_closed=m.group(4) == "]" and hi is not None, text=text.strip())


def load_spec(path: str | Path, display: str | None = None) -> Spec:
    """Read and validate one spec file; raise SpecError with every problem found."""
    path = Path(path)
    shown = display or str(path)
    raw = read_bounded(path, limits.MAX_FILE_BYTES, "spec", shown)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecError([Diagnostic(Location(shown, line, col), "E100", f"spec is not UTF-8 ({exc.reason})")])
    return spec_from_text(text, shown, hashlib.sha256(raw).hexdigest())


def spec_from_text(text: str, path: str = "<spec>", sha256: str | None = None) -> Spec:
    out = Collector(path)
    if sha256 is None:
        sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if "\t" in text:
        line = text[: text.index("\t")].count("\n") + 1
        out.error(line, 1, "E101", "YAML syntax: tab characters are not allowed")
        raise SpecError(out.items)
    root = load_yaml(text, out)
    out.raise_if_errors()
    assert root is not None
    spec = _build(root, text, path, sha256, out)
    out.raise_if_errors()
    assert spec is not None
    return spec


def _build(root: _Node, text: str, path: str, sha256: str, out: Collector) -> Spec:
    r = _Reader(out)
    top = r.mapping(root, "spec", TOP_FIELDS)
    if not isinstance(root.value, dict):
        return None
    for required in ("name", "summary", "inputs", "formula"):
        if required not in top:
            out.error(root.line, root.col, "E114", f"spec: missing required field '{required}'")
    name = ""
    if "name" in top and r.string(top["name"], "name") is not None:
        if r.name(top["name"], "name", top["name"].value, at_key=False):
            name = top["name"].value
    summary = r.string(top["summary"], "summary") if "summary" in top else ""
    if summary is not None and "\n" in summary.strip():
        r.err(top["summary"], "E115", "summary: must be one line")
    description = (r.string(top["description"], "description") or "") if "description" in top else ""

    taken: dict[str, str] = {}

    def claim(node: _Node, key: str, what: str) -> bool:
        if key in taken:
            r.err(node, "E121", f"{what} '{key}' has the same name as {taken[key]}")
            return False
        taken[key] = f"{what} '{key}'"
        return True

    # params first: inputs refer to them (ignore)
    params: list[Param] = []
    if "params" in top:
        pm = top["params"].value
        if not isinstance(pm, dict):
            r.err(top["params"], "E110", "params: expected a mapping")
            pm = {}
        if len(pm) > limits.MAX_PARAMS:
            r.err(top["params"], "E104", f"params: more than the limit 'params' ({limits.MAX_PARAMS})")
        for key, node in pm.items():
            where = f"params.{_clip(key)}"
            if not r.name(node, "params", key) or not claim(node, key, "parameter"):
                continue
            p = _param(r, node, key, where)
            if p:
                params.append(Param(**p, loc=Location(path, node.line, node.col)))

    axes_seen: list[str] = []
    inputs: list[Input] = []
    if "inputs" in top:
        im = top["inputs"].value
        if not isinstance(im, dict) or not im:
            r.err(top["inputs"], "E110", "inputs: expected a mapping of at least one input")
            im = {}
        if len(im) > limits.MAX_INPUTS:
            r.err(top["inputs"], "E104", f"inputs: more than the limit 'inputs' ({limits.MAX_INPUTS})")
        for key, node in im.items():
            if not r.name(node, "inputs", key) or not claim(node, key, "input"):
                continue
            i = _input(r, node, key, f"inputs.{key}", axes_seen, params)
            if i:
                inputs.append(Input(**i, loc=Location(path, node.line, node.col)))
        if inputs and all(i.dtype != "float" for i in inputs):
            r.err(top["inputs"], "E122", "inputs: at least one input must be a float tensor")
    for a in axes_seen:
        claim(top["inputs"], a.lstrip("*"), "shape symbol")

    learnable: list[Learnable] = []
    if "learnable" in top:
        lm = top["learnable"].value
        if not isinstance(lm, dict):
            r.err(top["learnable"], "E110", "learnable: expected a mapping")
            lm = {}
        for key, node in lm.items():
            if not r.name(node, "learnable", key) or not claim(node, key, "learnable tensor"):
                continue
            lr = _learnable(r, node, key, f"learnable.{key}")
            if lr:
                learnable.append(Learnable(**lr, loc=Location(path, node.line, node.col)))

    bindings: list[Binding] = []
    if "formula" in top:
        bindings = _bindings(r, top["formula"], text, path)

    reductions = [ReductionDef(n, None) for n in BUILTIN_REDUCTIONS]
    if "reductions" in top:
        rm = top["reductions"].value
        if not isinstance(rm, dict):
            r.err(top["reductions"], "E110", "reductions: expected a mapping")
            rm = {}
        for key, node in rm.items():
            where = f"reductions.{_clip(key)}"
            if key in ("none", "sum"):
                r.err(node, "E130", f"{where}: '{key}' is built in and cannot be redefined")
                continue
            if key != "mean" and (not r.name(node, "reductions", key) or not claim(node, key, "reduction")):
                continue
            fields = r.mapping(node, where, ("denominator", "doc"))
            den = None
            if "denominator" in fields:
                dn = fields["denominator"]
                dtext = dn.value
                if isinstance(dtext, (int, float)) and not isinstance(dtext, bool):
                    dtext = repr(dtext)
                if not isinstance(dtext, str):
                    r.err(dn, "E112", f"{where}.denominator: expected a formula expression")
                else:
                    qcol = dn.col + (1 if dn.style in ("'", '"') else 0)
                    den = Binding(f"_denominator_{key}", dtext, Location(path, dn.line, qcol))
            doc = (r.string(fields["doc"], f"{where}.doc") or "") if "doc" in fields else ""
            rd = ReductionDef(key, den, doc)
            if key == "mean":
                reductions[1] = rd
            else:
                reductions.append(rd)
    default_reduction = "mean"
    if "reduction" in top:
        rv = r.string(top["reduction"], "reduction")
        names = [x.name for x in reductions]
        if rv is not None and rv not in names:
            r.err(top["reduction"], "E131", f"reduction: '{_clip(rv)}' is not one of {', '.join(names)}",
                  did_you_mean(rv, names))
        elif rv:
            default_reduction = rv

    guards: dict = {}
    if "guards" in top:
        gm = r.mapping(top["guards"], "guards", GUARD_FIELDS)
        for key, node in gm.items():
            if key == "upcast":
                b = r.boolean(node, "guards.upcast")
                if b is not None:
                    guards[key] = b
            elif key in GUARD_FIELDS:
                v = r.number(node, f"guards.{key}")
                if v is not None:
                    if not v > 0:
                        r.err(node, "E132", f"guards.{key}: must be positive")
                    elif key == "eps" and v > 0.1:
                        r.err(node, "E132", f"guards.eps: {v!r} is not small (at most 0.1)",
                              "eps only keeps log and division away from 0; typical values are 1e-12 to 1e-6")
                    else:
                        guards[key] = float(v)

    cases = _cases(r, top.get("cases"), path) if "cases" in top else []
    _check_cases(out, cases, inputs, params, reductions)
    references = _references(r, top.get("references"), path) if "references" in top else []
    dropin = ()
    if "dropin" in top:
        from . import backends, dropin as _dropin

        dropin = tuple(_dropin.parse(r, top["dropin"], name, inputs, params, learnable, backends.names()))

    return Spec(
        name=name, summary=(summary or "").strip(), description=description.strip(),
        inputs=tuple(inputs), params=tuple(params), learnable=tuple(learnable),
        bindings=tuple(bindings), reductions=tuple(reductions),
        default_reduction=default_reduction, guards=guards, cases=tuple(cases),
        references=tuple(references), path=path, source_sha256=sha256, dropin=dropin,
        name_loc=Location(path, top["name"].line, top["name"].col) if "name" in top else Location(path, 1, 1),
    )


def _param(r: _Reader, node: _Node, key: str, where: str) -> dict | None:
    if not isinstance(node.value, dict):
        # shorthand: `alpha: 0.25`
        node = _Node({"default": node}, node.line, node.col)
    fields = r.mapping(node, where, PARAM_FIELDS)
    if "default" not in fields:
        r.err(node, "E114", f"{where}: missing required field 'default'")
        return None
    dv = fields["default"].value
    if isinstance(dv, bool):
        kind = "bool"
    elif isinstance(dv, int):
        kind = "int"
    elif isinstance(dv, float):
        kind = "float"
    else:
        r.err(fields["default"], "E112", f"{where}.default: expected a number or true/false, got {_kind(dv)}")
        return None
    if kind != "bool" and r.number(fields["default"], f"{where}.default") is None:
        return None
    lo = r.number(fields["min"], f"{where}.min") if "min" in fields else None
    hi = r.number(fields["max"], f"{where}.max") if "max" in fields else None
    if kind == "bool" and (lo is not None or hi is not None):
        r.err(node, "E133", f"{where}: a boolean parameter has no bounds")
    if lo is not None and hi is not None and lo > hi:
        r.err(fields["min"], "E133", f"{where}: min {lo} is greater than max {hi}")
    elif kind != "bool":
        if lo is not None and dv < lo:
            r.err(fields["default"], "E134", f"{where}.default: {dv} is below min {lo}")
        if hi is not None and dv > hi:
            r.err(fields["default"], "E134", f"{where}.default: {dv} is above max {hi}")
    doc = (r.string(fields["doc"], f"{where}.doc") or "") if "doc" in fields else ""
    return dict(name=key, kind=kind, default=dv, min=lo, max=hi, doc=doc.strip())


def _input(r: _Reader, node: _Node, key: str, where: str, axes_seen: list[str],
           params: list[Param]) -> dict | None:
    fields = r.mapping(node, where, INPUT_FIELDS)
    ok = True
    for required in ("dtype", "shape"):
        if required not in fields:
            r.err(node, "E114", f"{where}: missing required field '{required}'")
            ok = False
    if not ok:
        return None
    dtype = r.string(fields["dtype"], f"{where}.dtype")
    if dtype not in ("float", "int"):
        if dtype is not None:
            r.err(fields["dtype"], "E123", f"{where}.dtype: '{_clip(dtype)}' is not 'float' or 'int'",
                  did_you_mean(dtype, ["float", "int"]))
        return None
    sn = fields["shape"]
    if not isinstance(sn.value, list):
        r.err(sn, "E112", f"{where}.shape: expected a list of shape symbols such as [N, C]")
        return None
    if len(sn.value) > limits.MAX_RANK:
        r.err(sn, "E104", f"{where}.shape: rank exceeds the limit 'rank' ({limits.MAX_RANK})")
        return None
    shape: list[str] = []
    for item in sn.value:
        s = item.value
        if not isinstance(s, str) or not AXIS.match(s) or len(s) > limits.MAX_NAME_CHARS:
            r.err(item, "E124", f"{where}.shape: '{_clip(str(s))}' is not a shape symbol "
                  "(an upper-case name such as N or C, or *S for any number of axes)")
            return None
        if keyword.iskeyword(s.lstrip("*")):
            r.err(item, "E124", f"{where}.shape: '{s}' is a Python keyword, not a shape symbol")
            return None
        if s in shape:
            r.err(item, "E124", f"{where}.shape: axis '{s}' appears twice")
            return None
        shape.append(s)
    if sum(s.startswith("*") for s in shape) > 1:
        r.err(sn, "E124", f"{where}.shape: at most one variadic group (*S)")
        return None
    for s in shape:
        plain = s.lstrip("*")
        clash = [a for a in axes_seen if a.lstrip("*") == plain and a != s]
        if clash:
            r.err(sn, "E124", f"{where}.shape: '{s}' is used elsewhere as '{clash[0]}'")
            return None
        if s not in axes_seen:
            axes_seen.append(s)
    result: dict = dict(name=key, dtype=dtype, shape=tuple(shape))
    axis_names = {a.lstrip("*") for a in axes_seen}
    if "domain" in fields:
        text = r.string(fields["domain"], f"{where}.domain", 200)
        if text is not None:
            dom = parse_domain(text, axis_names)
            if isinstance(dom, str):
                r.err(fields["domain"], "E125", f"{where}.domain: {dom}")
                return None
            if dtype == "float" and (isinstance(dom.lo, str) or isinstance(dom.hi, str)):
                r.err(fields["domain"], "E125", f"{where}.domain: a float input cannot be bounded by a shape symbol")
                return None
            result["domain"] = dom
    elif dtype == "int":
        r.err(node, "E114", f"{where}: an int input needs a 'domain', such as \"[0, C)\"")
        return None
    if "optional" in fields:
        v = r.boolean(fields["optional"], f"{where}.optional")
        if v is not None:
            result["optional"] = v
    if "broadcast" in fields:
        v = fields["broadcast"].value
        if v is True or v == "right":
            result["broadcast"] = "right"
        elif v == "left":
            result["broadcast"] = "left"
        elif v is not False:
            r.err(fields["broadcast"], "E112", f"{where}.broadcast: expected true, false, 'right' or 'left'")
    if "default" in fields:
        v = r.number(fields["default"], f"{where}.default")
        if v is not None:
            if not result.get("optional"):
                r.err(fields["default"], "E126", f"{where}.default: only an optional input has a default")
            result["default"] = float(v)
    if result.get("optional") and dtype != "float":
        r.err(node, "E126", f"{where}: only float inputs can be optional")
    if "ignore" in fields:
        v = r.string(fields["ignore"], f"{where}.ignore")
        if v is not None:
            ints = [p.name for p in params if p.kind == "int"]
            if dtype != "int":
                r.err(fields["ignore"], "E127", f"{where}.ignore: only an int input can have ignored positions")
            elif v not in ints:
                r.err(fields["ignore"], "E127", f"{where}.ignore: '{_clip(v)}' is not an int parameter",
                      did_you_mean(v, ints))
            else:
                result["ignore"] = v
    if "scalar" in fields:
        v = r.boolean(fields["scalar"], f"{where}.scalar")
        if v and not (result.get("optional") and dtype == "float"):
            r.err(fields["scalar"], "E128", f"{where}.scalar: only an optional float input can accept a number")
        elif v is not None:
            result["scalar"] = v
    if "doc" in fields:
        result["doc"] = (r.string(fields["doc"], f"{where}.doc") or "").strip()
    return result


def _learnable(r: _Reader, node: _Node, key: str, where: str) -> dict | None:
    fields = r.mapping(node, where, LEARNABLE_FIELDS)
    shape: list[int] = []
    if "shape" in fields:
        sn = fields["shape"]
        if not isinstance(sn.value, list) or len(sn.value) > 1:
            r.err(sn, "E112", f"{where}.shape: expected [] or [K] with K a positive integer")
            return None
        for item in sn.value:
            v = item.value
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                r.err(item, "E112", f"{where}.shape: '{_clip(str(v))}' is not a positive integer")
                return None
            shape.append(v)
        if shape and shape[0] > limits.MAX_LEARNABLE_ELEMENTS:
            r.err(sn, "E104", f"{where}.shape: exceeds the limit 'learnable_elements'")
            return None
    init = 0.0
    if "init" in fields:
        v = r.number(fields["init"], f"{where}.init")
        if v is None:
            return None
        init = float(v)
    doc = (r.string(fields["doc"], f"{where}.doc") or "").strip() if "doc" in fields else ""
    return dict(name=key, shape=tuple(shape), init=init, doc=doc)


_BINDING = re.compile(r"([ ]*)([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)\s*(.*)\Z", re.S)


def _bindings(r: _Reader, node: _Node, text: str, path: str) -> list[Binding]:
    ftext = r.string(node, "formula", limits.MAX_FORMULA_CHARS)
    if ftext is None:
        return []
    if node.style == ">":
        r.err(node, "E140", "formula: use a literal block ('|'), not a folded one ('>'): "
              "each binding needs its own line")
        return []
    # Where does the formula's first content line sit in the file?
    if node.style in ("|", ">"):
        first_line = node.line + 1
        lines = text.splitlines()
        indent = 0
        for ln in lines[first_line - 1:]:
            if ln.strip():
                indent = len(ln) - len(ln.lstrip(" "))
                break
        col0 = indent + 1
    else:
        first_line, col0 = node.line, node.col + (1 if node.style in ("'", '"') else 0)
    out: list[Binding] = []
    logical: list[tuple[int, str]] = []
    for k, ln in enumerate(ftext.split("\n")):
        if not ln.strip() or ln.strip().startswith("#"):
            continue
        if logical and (ln.startswith((" ", ")")) or _open_parens(logical[-1][1]) > 0):
            logical[-1] = (logical[-1][0], logical[-1][1] + "\n" + ln)
        else:
            logical.append((k, ln))
    if len(logical) > limits.MAX_BINDINGS:
        r.err(node, "E104", f"formula: more than the limit 'bindings' ({limits.MAX_BINDINGS})")
        return []
    for k, ln in logical:
        line = first_line + k
        m = _BINDING.match(ln)
        if not m:
            r.out.error(line, col0, "E140", "formula: each line must be a binding 'name = expression'")
            continue
        name, expr = m.group(2), m.group(3)
        col = col0 + len(m.group(1))
        reason = check_identifier(name)
        if reason:
            r.out.error(line, col, "E120", f"formula: binding name '{_clip(name)}' {reason}")
            continue
        if any(b.name == name for b in out):
            r.out.error(line, col, "E141", f"formula: '{name}' is bound twice")
            continue
        ecol = col + ln.index(expr, len(m.group(1)) + len(name)) - len(m.group(1))
        out.append(Binding(name, expr, Location(path, line, ecol), Location(path, line, col)))
    if not out and not r.out.errors:
        r.err(node, "E140", "formula: no bindings; the last binding is the per-element loss")
    return out


def _open_parens(s: str) -> int:
    return s.count("(") + s.count("[") - s.count(")") - s.count("]")


def _count_numbers(v) -> int:
    if isinstance(v, list):
        return sum(_count_numbers(x) for x in v)
    if isinstance(v, dict):
        return sum(_count_numbers(x) for x in v.values())
    return 1


def _cases(r: _Reader, node: _Node, path: str) -> list[Case]:
    if not isinstance(node.value, list):
        r.err(node, "E112", "cases: expected a list")
        return []
    if len(node.value) > limits.MAX_CASES:
        r.err(node, "E104", f"cases: more than the limit 'cases' ({limits.MAX_CASES})")
        return []
    cases = []
    for k, item in enumerate(node.value):
        where = f"cases[{k}]"
        fields = r.mapping(item, where, ("id", "inputs", "params", "expected", "rtol"))
        if "inputs" not in fields or "expected" not in fields:
            r.err(item, "E114", f"{where}: needs 'inputs' and 'expected'")
            continue
        plain = {k2: v.plain() for k2, v in fields.items()}
        if _count_numbers(plain) > limits.MAX_CASE_ELEMENTS:
            r.err(item, "E104", f"{where}: more numbers than the limit 'case_elements'")
            continue
        rtol = None
        if "rtol" in fields:
            rtol = r.number(fields["rtol"], f"{where}.rtol")
            if rtol is not None and not 0 < rtol < 1:
                r.err(fields["rtol"], "E112", f"{where}.rtol: must be between 0 and 1")
        for part in ("inputs", "params", "expected"):
            if part in plain and not isinstance(plain[part], dict):
                r.err(fields[part], "E110", f"{where}.{part}: expected a mapping")
                break
        else:
            positions = {}
            for part in ("inputs", "params", "expected"):
                if part in fields and isinstance(fields[part].value, dict):
                    for key, sub in fields[part].value.items():
                        positions[f"{part}.{key}"] = (sub.key_line, sub.key_col)
            cases.append(Case(positions=positions, inputs=plain["inputs"], params=plain.get("params", {}),
                              expected=plain["expected"], id=str(plain.get("id", f"case{k}")),
                              rtol=rtol, loc=Location(path, item.line, item.col)))
    return cases


def _check_cases(out: Collector, cases, inputs, params, reductions) -> None:
    """Names, then values: shapes against the declared shapes, int labels against their
    domains, parameter kinds and bounds (E117), before anything evaluates a case."""
    names = {i.name for i in inputs}
    pnames = {p.name for p in params}
    rnames = [r.name for r in reductions]
    view = _SpecView(tuple(inputs), tuple(params))
    for n, c in enumerate(cases):
        where = f"cases[{n}]"

        def at(key):
            return c.positions.get(key, (c.loc.line, c.loc.col))

        ok = True
        for k in c.inputs:
            if k not in names:
                line, col = at(f"inputs.{k}")
                out.error(line, col, "E116", f"{where}.inputs: unknown input '{_clip(str(k))}'",
                          did_you_mean(str(k), sorted(names)))
                ok = False
        for k, v in c.params.items():
            line, col = at(f"params.{k}")
            if k not in pnames:
                out.error(line, col, "E116", f"{where}.params: unknown parameter '{_clip(str(k))}'",
                          did_you_mean(str(k), sorted(pnames)))
                ok = False
                continue
            try:
                casecheck.check_param(view.param(k), v, f"{where}.params.{k}")
            except casecheck.CaseProblem as exc:
                out.error(line, col, "E117", str(exc))
                ok = False
        for k, v in c.expected.items():
            line, col = at(f"expected.{k}")
            if k not in rnames:
                out.error(line, col, "E116", f"{where}.expected: '{_clip(str(k))}' is not a reduction "
                          f"({', '.join(rnames)})", did_you_mean(str(k), rnames))
                ok = False
                continue
            try:
                casecheck.check_expected(k, v, f"{where}.expected")
            except casecheck.CaseProblem as exc:
                out.error(line, col, "E117", str(exc))
                ok = False
        if not ok or len(inputs) != len(names):
            continue
        try:
            casecheck.check_inputs(view, c.inputs, c.params, f"{where}.inputs")
        except casecheck.CaseProblem as exc:
            name = str(exc).split(":", 1)[0].rsplit(".", 1)[-1]
            line, col = at(f"inputs.{name}")
            out.error(line, col, "E117", str(exc))
            continue
        try:  # the reference evaluator computes every spec case's gradients
            casecheck.check_reference_cost(view, c.inputs, needs_gradients=True)
        except casecheck.CaseProblem as exc:
            out.error(c.loc.line, c.loc.col, "E104", f"{where} ('{_clip(c.id)}'): {exc}")


@dataclass(frozen=True)
class _SpecView:
    """The parts of a spec that case checks read, before the Spec itself exists."""

    inputs: tuple
    params: tuple

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)


def _references(r: _Reader, node: _Node, path: str) -> list[Reference]:
    if not isinstance(node.value, list):
        r.err(node, "E112", "references: expected a list")
        return []
    refs = []
    for k, item in enumerate(node.value):
        where = f"references[{k}]"
        fields = r.mapping(item, where, ("file", "inputs", "params", "cases", "reference_gradients"))
        if "file" not in fields:
            r.err(item, "E114", f"{where}: missing required field 'file'")
            continue
        f = r.string(fields["file"], f"{where}.file", 300)
        if f is None:
            continue
        if f.startswith("/") or ".." in Path(f).parts or "\\" in f:
            r.err(fields["file"], "E150", f"{where}.file: must be a relative path inside the project")
            continue
        maps = {}
        for part in ("inputs", "params"):
            m = fields[part].plain() if part in fields else {}
            if not isinstance(m, dict) or not all(isinstance(a, str) and isinstance(b, str) for a, b in m.items()):
                r.err(fields[part], "E112", f"{where}.{part}: expected a mapping of names")
                m = {}
            maps[part] = m
        ids = fields["cases"].plain() if "cases" in fields else []
        if not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
            r.err(fields["cases"], "E112", f"{where}.cases: expected a list of case ids")
            ids = []
        rg = fields["reference_gradients"].plain() if "reference_gradients" in fields else []
        if not isinstance(rg, list) or not all(isinstance(x, str) for x in rg):
            r.err(fields["reference_gradients"], "E112", f"{where}.reference_gradients: expected a list of case ids")
            rg = []
        refs.append(Reference(f, maps["inputs"], maps["params"], tuple(ids), tuple(rg),
                              Location(path, item.line, item.col)))
    return refs
