"""The spec's ``params``, ``inputs`` and ``learnable`` sections, and input domains.

Parameters are read first: an int input's ``ignore`` names an int parameter.  Each
section's names are claimed in the spec's one :class:`~losscc.specread.Namespace`; so are
the shape symbols of the inputs, after the last input.
"""

from __future__ import annotations

import keyword
import math
import re
from functools import partial

from . import limits
from .errors import Location, did_you_mean
from .specnames import AXIS
from .specmodel import REAL, Domain, Input, Learnable, Param
from .specread import Namespace, Reader, kind_of
from .yamlread import FLOAT, Node, clip

INPUT_FIELDS = ("dtype", "shape", "domain", "optional", "default", "ignore", "broadcast", "scalar", "doc")
PARAM_FIELDS = ("default", "min", "max", "gt", "lt", "doc")
LEARNABLE_FIELDS = ("shape", "init", "doc")

# --------------------------------------------------------------------------- params


def read_params(r: Reader, top: dict[str, Node], names: Namespace, path: str) -> list[Param]:
    if "params" not in top:
        return []
    pm = r.entries(top["params"], "params")
    if len(pm) > limits.MAX_PARAMS:
        r.err(top["params"], "E104", f"params: more than the limit 'params' ({limits.MAX_PARAMS})")
    return names.read_each(pm, "params", "parameter", partial(_param, r, path))


def _param(r: Reader, path: str, key: str, node: Node) -> Param | None:
    where, loc = f"params.{clip(key)}", Location(path, node.line, node.col)
    if not isinstance(node.value, dict):
        # shorthand: `alpha: 0.25`
        node = Node({"default": node}, node.line, node.col)
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
        r.err(fields["default"], "E112", f"{where}.default: expected a number or true/false, got {kind_of(dv)}")
        return None
    if kind != "bool" and r.number(fields["default"], f"{where}.default") is None:
        return None
    if kind == "int" and not -2**63 <= dv < 2**63:
        r.err(fields["default"], "E113", f"{where}.default: an int parameter must fit in int64 "
              "(from -9223372036854775808 to 9223372036854775807)")
        return None
    lo, lo_key = _bound(r, fields, where, ("min", "gt"))
    hi, hi_key = _bound(r, fields, where, ("max", "lt"))
    if kind == "bool" and (lo is not None or hi is not None):
        r.err(node, "E133", f"{where}: a boolean parameter has no bounds")
    draft = Param(name=key, kind=kind, default=dv, min=lo, max=hi, min_open=lo_key == "gt", max_open=hi_key == "lt")
    if lo is not None and hi is not None and (lo > hi or (lo == hi and (draft.min_open or draft.max_open))):
        r.err(fields[lo_key], "E133", f"{where}: the bounds admit no value ({' and '.join(draft.bound_words())})")
    elif kind != "bool" and not draft.admits(dv):
        r.err(fields["default"], "E134", f"{where}.default: {dv} is outside the bounds ({' and '.join(draft.bound_words())})")
    doc = r.doc(fields, where).strip()
    return Param(name=key, kind=kind, default=dv, min=lo, max=hi, doc=doc, loc=loc,
                 min_open=draft.min_open, max_open=draft.max_open)


def _bound(r: Reader, fields: dict[str, Node], where: str, keys: tuple[str, str]) -> tuple[float | None, str]:
    """One side's bound and the field that gave it: inclusive (min, max) or strict (gt, lt)."""
    given = [k for k in keys if k in fields]
    if len(given) > 1:
        r.err(fields[given[1]], "E133", f"{where}: '{given[0]}' and '{given[1]}' both bound one side; keep one")
    if not given:
        return None, ""
    return r.number(fields[given[0]], f"{where}.{given[0]}"), given[0]


# --------------------------------------------------------------------------- inputs


def read_inputs(r: Reader, top: dict[str, Node], names: Namespace, params: list[Param],
                path: str) -> list[Input]:
    if "inputs" not in top:
        return []
    im = top["inputs"].value
    if not isinstance(im, dict) or not im:
        r.err(top["inputs"], "E110", "inputs: expected a mapping of at least one input")
        im = {}
    if len(im) > limits.MAX_INPUTS:
        r.err(top["inputs"], "E104", f"inputs: more than the limit 'inputs' ({limits.MAX_INPUTS})")
    axes_seen: list[str] = []  # every input's shape symbols, in order ("*S" for a group)
    sizes: dict[str, int] = {}  # axes of a fixed size, as declared
    named = _shape_symbols(im)  # a label's domain may name an axis of a later input ([0, C))
    inputs = names.read_each(im, "inputs", "input", partial(_input, r, path, axes_seen, sizes, named, params))
    if inputs and all(i.dtype != "float" for i in inputs):
        r.err(top["inputs"], "E122", "inputs: at least one input must be a float tensor")
    for a in axes_seen:
        names.claim(top["inputs"], a.lstrip("*"), "shape symbol")
    for inp in inputs:
        if inp.broadcast == "left" and left_reference(inputs, inp) is None:
            r.err(im[inp.name], "E124", f"inputs.{inp.name}: broadcast 'left' adds trailing axes, so its shape "
                  f"{list(inp.shape)} must start the shape of a required input that does not broadcast "
                  "(as var starts input's in a Gaussian NLL); use broadcast: true to align trailing axes")
        if inp.scalar and any(not any(not i.optional and a in i.shape for i in inputs) for a in inp.shape):
            r.err(im[inp.name], "E128", f"inputs.{inp.name}.scalar: a number fills the input's shape, so each "
                  f"of its axes {list(inp.shape)} must be an axis of a required input")
    return inputs


def left_reference(inputs, inp):
    """The input a `broadcast: left` input is padded against: the first required one that
    does not broadcast and holds its axes, where its shape starts with the input's (the
    padding adds trailing axes only); None otherwise."""
    ref = next((i for i in inputs if not i.broadcast and not i.optional and set(inp.shape) <= set(i.shape)), None)
    if ref is None or tuple(ref.shape[:len(inp.shape)]) != tuple(inp.shape):
        return None
    return ref


def _shape_symbols(im: dict) -> set[str]:
    """The shape symbols every input's shape names (unchecked: only domains look them up)."""
    out: set[str] = set()
    for node in im.values():
        shape = node.value.get("shape") if isinstance(node.value, dict) else None
        for item in shape.value if shape is not None and isinstance(shape.value, list) else ():
            s = item.value
            if isinstance(s, str) and len(s) <= limits.MAX_NAME_CHARS + 8:
                m = _FIXED.match(s)
                out.add(m.group(1) if m else s.lstrip("*"))
    return out


def _input(r: Reader, path: str, axes_seen: list[str], sizes: dict[str, int], named: set[str],
           params: list[Param], key: str, node: Node) -> Input | None:
    where, loc = f"inputs.{key}", Location(path, node.line, node.col)
    fields = r.mapping(node, where, INPUT_FIELDS)
    missing = [f for f in ("dtype", "shape") if f not in fields]
    for required in missing:
        r.err(node, "E114", f"{where}: missing required field '{required}'")
    if missing:
        return None
    dtype = _dtype(r, fields["dtype"], where)
    shape = _shape(r, fields["shape"], where, axes_seen, sizes) if dtype else None
    if shape is None:
        return None
    shape, own_sizes = shape
    domain = _domain(r, node, fields, where, dtype, {a.lstrip("*") for a in axes_seen} | named)
    if domain is None:
        return None
    flags = _flags(r, node, fields, where, dtype)
    ignore = _ignore(r, fields["ignore"], where, dtype, params) if "ignore" in fields else None
    return Input(name=key, dtype=dtype, shape=shape, domain=domain, **flags, ignore=ignore,
                 doc=r.doc(fields, where).strip(), loc=loc, sizes=own_sizes)


def _dtype(r: Reader, node: Node, where: str) -> str | None:
    dtype = r.string(node, f"{where}.dtype")
    if dtype in ("float", "int"):
        return dtype
    if dtype is not None:
        r.err(node, "E123", f"{where}.dtype: '{clip(dtype)}' is not 'float' or 'int'",
              did_you_mean(dtype, ["float", "int"]))
    return None


_FIXED = re.compile(r"([A-Z][A-Za-z0-9]*) *= *([0-9]+)\Z")


def _fixed(r: Reader, item: Node, where: str, sizes: dict[str, int]) -> tuple[str, int] | None:
    """`K=4`: axis K of size 4 (the same size wherever it is declared)."""
    m = _FIXED.match(item.value)
    name, n = m.group(1), int(m.group(2)[:6])
    if not 1 <= n <= limits.MAX_FIXED_SIZE:
        r.err(item, "E124", f"{where}.shape: the size of axis {name} must be 1 to {limits.MAX_FIXED_SIZE}, "
              f"got {clip(m.group(2))}")
        return None
    if sizes.setdefault(name, n) != n:
        r.err(item, "E124", f"{where}.shape: axis {name} has size {sizes[name]} in another input, here {n}")
        return None
    if math.prod(sizes.values()) > limits.MAX_FIXED_ELEMENTS:
        # the generated tests and verify's random cases hold every fixed axis at once
        r.err(item, "E104", f"{where}.shape: the axes of a fixed size ({', '.join(f'{a}={k}' for a, k in sizes.items())}) "
              f"multiply to more than the limit 'fixed_elements' ({limits.MAX_FIXED_ELEMENTS})")
        return None
    return name, n


def _shape(r: Reader, sn: Node, where: str, axes_seen: list[str],
           sizes: dict[str, int]) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]] | None:
    """The input's shape symbols and the fixed sizes it declares (``K=4``); new symbols are
    added to `axes_seen`, new sizes to `sizes`."""
    if not isinstance(sn.value, list):
        r.err(sn, "E112", f"{where}.shape: expected a list of shape symbols such as [N, C]")
        return None
    if len(sn.value) > limits.MAX_RANK:
        r.err(sn, "E104", f"{where}.shape: rank exceeds the limit 'rank' ({limits.MAX_RANK})")
        return None
    shape: list[str] = []
    own: list[tuple[str, int]] = []
    for item in sn.value:
        s = item.value
        if isinstance(s, str) and len(s) <= limits.MAX_NAME_CHARS + 8 and _FIXED.match(s):
            got = _fixed(r, item, where, sizes)
            if got is None:
                return None
            own.append(got)
            s = got[0]
        if not isinstance(s, str) or not AXIS.match(s) or len(s) > limits.MAX_NAME_CHARS:
            r.err(item, "E124", f"{where}.shape: '{clip(str(s))}' is not a shape symbol "
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
    return tuple(shape), tuple(own)


def _domain(r: Reader, node: Node, fields: dict[str, Node], where: str, dtype: str,
            axis_names: set[str]) -> Domain | None:
    """The input's domain (real where unreadable); None where the input cannot be used."""
    if "domain" not in fields:
        if dtype == "int":
            r.err(node, "E114", f"{where}: an int input needs a 'domain', such as \"[0, C)\"")
            return None
        return REAL
    text = r.string(fields["domain"], f"{where}.domain", 200)
    if text is None:
        return REAL
    dom = parse_domain(text, axis_names)
    if isinstance(dom, str):
        r.err(fields["domain"], "E125", f"{where}.domain: {dom}")
        return None
    if dtype == "float" and (isinstance(dom.lo, str) or isinstance(dom.hi, str)):
        r.err(fields["domain"], "E125", f"{where}.domain: a float input cannot be bounded by a shape symbol")
        return None
    numbers = [v for v in (dom.values or ()) + (dom.lo, dom.hi) if isinstance(v, float)]
    if dtype == "int" and any(not v.is_integer() or abs(v) > 2**53 for v in numbers):
        # an int label's values are exact int64 numbers in every framework and in the reference
        r.err(fields["domain"], "E125", f"{where}.domain: an int input's bounds and members must be whole "
              "numbers of at most 2**53 in size")
        return None
    return dom


def _flags(r: Reader, node: Node, fields: dict[str, Node], where: str, dtype: str) -> dict:
    """``optional``, ``default``, ``broadcast`` and ``scalar``, those given and readable."""
    flags: dict = {}
    if "optional" in fields:
        v = r.boolean(fields["optional"], f"{where}.optional")
        if v is not None:
            flags["optional"] = v
    if "broadcast" in fields:
        v = fields["broadcast"].value
        if v is True or v == "right":
            flags["broadcast"] = "right"
        elif v == "left":
            flags["broadcast"] = "left"
        elif v is not False:
            r.err(fields["broadcast"], "E112", f"{where}.broadcast: expected true, false, 'right' or 'left'")
    if "default" in fields:
        v = r.number(fields["default"], f"{where}.default")
        if v is not None:
            if not flags.get("optional"):
                r.err(fields["default"], "E126", f"{where}.default: only an optional input has a default")
            flags["default"] = float(v)
    if flags.get("optional") and dtype != "float":
        r.err(node, "E126", f"{where}: only float inputs can be optional")
    if "scalar" in fields:
        v = r.boolean(fields["scalar"], f"{where}.scalar")
        if v and not (flags.get("optional") and dtype == "float"):
            r.err(fields["scalar"], "E128", f"{where}.scalar: only an optional float input can accept a number")
        elif v is not None:
            flags["scalar"] = v
    return flags


def _ignore(r: Reader, node: Node, where: str, dtype: str, params: list[Param]) -> str | None:
    v = r.string(node, f"{where}.ignore")
    if v is None:
        return None
    ints = [p.name for p in params if p.kind == "int"]
    if dtype != "int":
        r.err(node, "E127", f"{where}.ignore: only an int input can have ignored positions")
    elif v not in ints:
        r.err(node, "E127", f"{where}.ignore: '{clip(v)}' is not an int parameter", did_you_mean(v, ints))
    else:
        return v
    return None


_INTERVAL = re.compile(r"\s*([\[\(])\s*([^,\[\]\(\)]+?)\s*,\s*([^,\[\]\(\)]+?)\s*([\]\)])\s*\Z")
_SET = re.compile(r"\s*\{([^{}]*)\}\s*\Z")


def parse_domain(text: str, axes: set[str]) -> Domain | str:
    """A Domain from text such as "[0, C)", "(0, 1)", "[0, inf)", "{-1, 1}", "real"."""
    if text.strip() == "real":
        return REAL
    m = _SET.match(text)
    if m:
        parts = [p.strip() for p in m.group(1).split(",") if p.strip()]
        if not all(FLOAT.match(p) for p in parts):
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
        if FLOAT.match(s):
            if not abs(float(s)) < 1e300:
                return None, f"bound '{clip(s)}' is too large (write inf for no bound)"
            return float(s), None
        if AXIS.match(s):  # a shape symbol, but of no input's axes: its size is unknown
            return None, (f"bound '{clip(s)}' is no input's axis; a label's bound names an axis of "
                          "an input (\"[0, C)\" with logits [N, C]) or is a number (\"[0, 3)\")")
        return None, f"bound '{clip(s)}' is not a number, 'inf' or a shape symbol"

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


# --------------------------------------------------------------------------- learnable


def read_learnable(r: Reader, top: dict[str, Node], names: Namespace, path: str) -> list[Learnable]:
    if "learnable" not in top:
        return []
    lm = r.entries(top["learnable"], "learnable")
    return names.read_each(lm, "learnable", "learnable tensor", partial(_learnable, r, path))


def _learnable(r: Reader, path: str, key: str, node: Node) -> Learnable | None:
    where, loc = f"learnable.{key}", Location(path, node.line, node.col)
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
                r.err(item, "E112", f"{where}.shape: '{clip(str(v))}' is not a positive integer")
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
    return Learnable(name=key, shape=tuple(shape), init=init, doc=r.doc(fields, where).strip(), loc=loc)
