"""The spec's ``formula`` (one binding a line), ``reductions``, ``reduction`` and ``guards``.

The formula's text is split into bindings, each with the position of its name and of its
expression in the file, and not interpreted here (:mod:`losscc.parse` does that); so are
the denominators of extra reductions.
"""

from __future__ import annotations

import re

from . import limits
from .errors import Location, did_you_mean
from .specnames import check_identifier
from .specmodel import Binding, ReductionDef
from .specread import Namespace, Reader
from .yamlread import Node, clip

GUARD_FIELDS = ("clip", "eps", "upcast")
BUILTIN_REDUCTIONS = ("none", "mean", "sum")
REDUCTION_FIELDS = ("denominator", "doc")

# --------------------------------------------------------------------------- formula

_BINDING = re.compile(r"([ ]*)([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)\s*(.*)\Z", re.S)


def read_bindings(r: Reader, top: dict[str, Node], text: str, path: str) -> list[Binding]:
    """The formula's bindings; `text` is the whole file (block scalars lose their indent)."""
    if "formula" not in top:
        return []
    node = top["formula"]
    ftext = r.string(node, "formula", limits.MAX_FORMULA_CHARS)
    if ftext is None:
        return []
    if node.style == ">":
        r.err(node, "E140", "formula: use a literal block ('|'), not a folded one ('>'): "
              "each binding needs its own line")
        return []
    first_line, col0 = _formula_start(node, text)
    logical = _logical_lines(ftext)
    if len(logical) > limits.MAX_BINDINGS:
        r.err(node, "E104", f"formula: more than the limit 'bindings' ({limits.MAX_BINDINGS})")
        return []
    out: list[Binding] = []
    for k, ln in logical:
        b = _binding(r, ln, first_line + k, col0, path, out)
        if b:
            out.append(b)
    if not out and not r.out.errors:
        r.err(node, "E140", "formula: no bindings; the last binding is the per-element loss")
    return out


def _formula_start(node: Node, text: str) -> tuple[int, int]:
    """Line and column in the file of the formula's first content line."""
    if node.style not in ("|", ">"):
        return node.line, node.col + (1 if node.style in ("'", '"') else 0)
    first_line = node.line + 1
    indent = 0
    for ln in text.splitlines()[first_line - 1:]:
        if ln.strip():
            indent = len(ln) - len(ln.lstrip(" "))
            break
    return first_line, indent + 1


def _logical_lines(ftext: str) -> list[tuple[int, str]]:
    """(index of its first line, text) of each binding: a line that starts with a space or
    ')', or follows an unclosed bracket, continues the one before; blank and '#' lines go."""
    logical: list[tuple[int, str]] = []
    for k, ln in enumerate(ftext.split("\n")):
        if not ln.strip() or ln.strip().startswith("#"):
            continue
        if logical and (ln.startswith((" ", ")")) or _open_parens(logical[-1][1]) > 0):
            logical[-1] = (logical[-1][0], logical[-1][1] + "\n" + ln)
        else:
            logical.append((k, ln))
    return logical


def _open_parens(s: str) -> int:
    return s.count("(") + s.count("[") - s.count(")") - s.count("]")


def _binding(r: Reader, ln: str, line: int, col0: int, path: str, before: list[Binding]) -> Binding | None:
    m = _BINDING.match(ln)
    if not m:
        r.out.error(line, col0, "E140", "formula: each line must be a binding 'name = expression'")
        return None
    name, expr = m.group(2), m.group(3)
    col = col0 + len(m.group(1))
    reason = check_identifier(name)
    if reason:
        r.out.error(line, col, "E120", f"formula: binding name '{clip(name)}' {reason}")
        return None
    if any(b.name == name for b in before):
        r.out.error(line, col, "E141", f"formula: '{name}' is bound twice")
        return None
    ecol = col + ln.index(expr, len(m.group(1)) + len(name)) - len(m.group(1))
    return Binding(name, expr, Location(path, line, ecol), Location(path, line, col))


# --------------------------------------------------------------------------- reductions


def read_reductions(r: Reader, top: dict[str, Node], names: Namespace, path: str) -> list[ReductionDef]:
    """none, mean, sum (mean's denominator may be redefined), then the spec's extras."""
    reductions = [ReductionDef(n, None) for n in BUILTIN_REDUCTIONS]
    if "reductions" not in top:
        return reductions
    entries = r.entries(top["reductions"], "reductions")
    if len(entries) > limits.MAX_REDUCTIONS:
        r.err(top["reductions"], "E104", f"reductions: more than the limit 'reductions' ({limits.MAX_REDUCTIONS})")
        return reductions
    for key, node in entries.items():
        rd = _reduction(r, node, key, names, path)
        if rd is None:
            continue
        if key == "mean":
            reductions[1] = rd
        else:
            reductions.append(rd)
    return reductions


def _reduction(r: Reader, node: Node, key: str, names: Namespace, path: str) -> ReductionDef | None:
    where = f"reductions.{clip(key)}"
    if key in ("none", "sum"):
        r.err(node, "E130", f"{where}: '{key}' is built in and cannot be redefined")
        return None
    if key != "mean" and (not r.name(node, "reductions", key) or not names.claim(node, key, "reduction")):
        return None
    fields = r.mapping(node, where, REDUCTION_FIELDS)
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
    return ReductionDef(key, den, r.doc(fields, where))


def read_default_reduction(r: Reader, top: dict[str, Node], reductions: list[ReductionDef]) -> str:
    if "reduction" not in top:
        return "mean"
    rv = r.string(top["reduction"], "reduction")
    names = [x.name for x in reductions]
    if rv is not None and rv not in names:
        r.err(top["reduction"], "E131", f"reduction: '{clip(rv)}' is not one of {', '.join(names)}",
              did_you_mean(rv, names))
    elif rv:
        return rv
    return "mean"


# --------------------------------------------------------------------------- guards


def read_guards(r: Reader, top: dict[str, Node]) -> dict:
    """The readable entries of ``guards``: upcast a bool, clip and eps positive floats."""
    guards: dict = {}
    if "guards" not in top:
        return guards
    for key, node in r.mapping(top["guards"], "guards", GUARD_FIELDS).items():
        if key == "upcast":
            b = r.boolean(node, "guards.upcast")
            if b is not None:
                guards[key] = b
        elif key in GUARD_FIELDS:
            v = r.number(node, f"guards.{key}")
            if v is None:
                continue
            if not v > 0:
                r.err(node, "E132", f"guards.{key}: must be positive")
            elif key == "eps" and v > 0.1:
                r.err(node, "E132", f"guards.eps: {v!r} is not small (at most 0.1)",
                      "eps only keeps log and division away from 0; typical values are 1e-12 to 1e-6")
            else:
                guards[key] = float(v)
    return guards
