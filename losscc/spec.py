"""Stage 1: a spec file (YAML, untrusted) into a validated, immutable :class:`Spec`.

YAML is read with the safe loader into a node tree so that every value keeps its
line and column; aliases and anchors are refused (no alias bombs), sizes are
bounded (:mod:`losscc.limits`), and every field is checked.  All problems of a
file are collected and raised together as a :class:`~losscc.errors.SpecError`.
The formula text is *not* interpreted here; :mod:`losscc.parse` does that.

This module is the loader and the stage's interface; the parts live by concept:
the model (:mod:`losscc.specmodel`), name rules (:mod:`losscc.specnames`), value readers
(:mod:`losscc.specread`) and one module a group of sections: params, inputs and
learnables (:mod:`losscc.specinputs`); formula, reductions and guards
(:mod:`losscc.specformula`); cases and references (:mod:`losscc.speccases`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from pathlib import Path

from . import limits
from .errors import Collector, Diagnostic, Location, SpecError
from .files import read_bounded
from .specnames import (AXIS, FUNCTION_NAMES, IDENT, RESERVED, check_attribute, check_identifier,
                        class_attributes, framework_names)
from .speccases import CASE_FIELDS, REFERENCE_FIELDS, check_cases, read_cases, read_references
from .specformula import (BUILTIN_REDUCTIONS, GUARD_FIELDS, REDUCTION_FIELDS, read_bindings, read_default_reduction,
                          read_guards, read_reductions)
from .specinputs import (INPUT_FIELDS, LEARNABLE_FIELDS, PARAM_FIELDS, parse_domain, read_inputs, read_learnable,
                         read_params)
from .specmodel import REAL, Binding, Case, Domain, Input, Learnable, Param, Reference, ReductionDef, Spec
from .dropin import read_dropin
from .specread import Namespace
from .specread import Reader as _Reader  # the name tests spy on (its field checks)
from .yamlread import Node, load_yaml
from .yamlread import clip as _clip  # noqa: F401  (parse.py's import)

__all__ = [
    "AXIS", "BUILTIN_REDUCTIONS", "CASE_FIELDS", "FUNCTION_NAMES", "GUARD_FIELDS", "IDENT", "INPUT_FIELDS",
    "LEARNABLE_FIELDS", "PARAM_FIELDS", "REAL", "REDUCTION_FIELDS", "REFERENCE_FIELDS", "REQUIRED_FIELDS",
    "RESERVED", "TOP_FIELDS", "Binding", "Case", "Domain", "Input", "Learnable", "Param", "Reference",
    "ReductionDef", "Spec", "check_attribute", "check_identifier", "class_attributes", "framework_names",
    "load_spec", "parse_domain", "spec_from_text",
]

TOP_FIELDS = ("name", "summary", "description", "inputs", "params", "learnable", "formula",
              "reduction", "reductions", "guards", "cases", "references", "dropin", "backward")
REQUIRED_FIELDS = ("name", "summary", "inputs", "formula")


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
    spec = spec_from_text(text, shown, hashlib.sha256(raw).hexdigest())
    return dataclasses.replace(spec, folder=os.path.abspath(path.parent))


_ODD_BREAK = re.compile("\r(?!\n)|[\x85\u2028\u2029]")


def spec_from_text(text: str, path: str = "<spec>", sha256: str | None = None) -> Spec:
    """Validate the text of a spec file (`path` names it in diagnostics); raise SpecError
    with every problem found."""
    out = Collector(path)
    if sha256 is None:
        sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if "\t" in text:
        line = text[: text.index("\t")].count("\n") + 1
        out.error(line, 1, "E101", "YAML syntax: tab characters are not allowed")
        raise SpecError(out.items)
    odd = _ODD_BREAK.search(text)
    if odd:  # YAML breaks a line there, most viewers do not: a key could hide in a comment
        at = odd.start()
        out.error(text[:at].count("\n") + 1, at - text.rfind("\n", 0, at), "E101",
                  f"YAML syntax: line break {ascii(odd.group())[1:-1]} is not allowed (only LF and CRLF)")
        raise SpecError(out.items)
    root = load_yaml(text, out)
    out.raise_if_errors()
    assert root is not None
    spec = _build(root, text, path, sha256, out)
    out.raise_if_errors()
    assert spec is not None
    return spec


def _build(root: Node, text: str, path: str, sha256: str, out: Collector) -> Spec | None:
    """The Spec of a parsed file, every section read in order; None if it is no mapping."""
    r = _Reader(out)
    top = r.mapping(root, "spec", TOP_FIELDS)
    if not isinstance(root.value, dict):
        return None
    for required in REQUIRED_FIELDS:
        if required not in top:
            out.error(root.line, root.col, "E114", f"spec: missing required field '{required}'")
    name, summary, description = _header(r, top)
    names = Namespace(r)
    params = read_params(r, top, names, path)  # first: inputs refer to them (ignore)
    inputs = read_inputs(r, top, names, params, path)
    learnable = read_learnable(r, top, names, path)
    bindings = read_bindings(r, top, text, path)
    reductions = read_reductions(r, top, names, path)
    default_reduction = read_default_reduction(r, top, reductions)
    guards = read_guards(r, top)
    cases = read_cases(r, top, path)
    check_cases(out, cases, inputs, params, reductions, bindings)
    references = read_references(r, top, path)
    dropin = read_dropin(r, top, name, inputs, params, learnable)
    backward = _backward(r, top)
    return Spec(
        name=name, summary=summary, description=description,
        inputs=tuple(inputs), params=tuple(params), learnable=tuple(learnable),
        bindings=tuple(bindings), reductions=tuple(reductions),
        default_reduction=default_reduction, guards=guards, cases=tuple(cases),
        references=tuple(references), backward=backward, path=path, source_sha256=sha256, dropin=dropin,
        name_loc=Location(path, top["name"].line, top["name"].col) if "name" in top else Location(path, 1, 1),
    )


def _backward(r: _Reader, top: dict[str, Node]) -> str:
    """``backward: autograd | custom | auto`` (docs/backward.md); "" when absent (the
    project's default, ``[tool.losscc] backward``, applies)."""
    from .backward import MODES

    if "backward" not in top:
        return ""
    v = r.string(top["backward"], "backward")
    if v is not None and v not in MODES:
        r.err(top["backward"], "E135", f"backward: expected one of {', '.join(MODES)}; got {v!r}")
        return ""
    return v or ""


def _header(r: _Reader, top: dict[str, Node]) -> tuple[str, str, str]:
    """name, summary (one line) and description; "" for each one absent or refused."""
    name = ""
    if "name" in top and r.string(top["name"], "name") is not None:
        if r.name(top["name"], "name", top["name"].value, at_key=False):
            name = top["name"].value
    summary = r.string(top["summary"], "summary") if "summary" in top else ""
    if summary is not None and "\n" in summary.strip():
        r.err(top["summary"], "E115", "summary: must be one line")
    description = (r.string(top["description"], "description") or "") if "description" in top else ""
    return name, (summary or "").strip(), description.strip()
