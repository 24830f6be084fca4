"""The spec's ``cases`` (hand-written examples) and ``references`` (case files to check).

Cases are read as plain values, then checked against the inputs, parameters and
reductions read before them (:func:`check_cases`): names, then values (shapes, int
labels, parameter kinds and bounds, E117) and what the reference evaluator would spend on
them (E104), before anything evaluates a case.  Reference files are only named here; they
are read, bounded, when a spec is verified (:mod:`losscc.cases`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import casecheck, limits
from .errors import Collector, Location, did_you_mean
from .specmodel import Case, Input, Param, ReductionDef, Reference
from .specread import Reader
from .yamlread import Node, clip

CASE_FIELDS = ("id", "inputs", "params", "expected", "rtol")
REFERENCE_FIELDS = ("file", "inputs", "params", "cases", "reference_gradients")
_CASE_PARTS = ("inputs", "params", "expected")

# --------------------------------------------------------------------------- cases


def read_cases(r: Reader, top: dict[str, Node], path: str) -> list[Case]:
    if "cases" not in top:
        return []
    node = top["cases"]
    if not isinstance(node.value, list):
        r.err(node, "E112", "cases: expected a list")
        return []
    if len(node.value) > limits.MAX_CASES:
        r.err(node, "E104", f"cases: more than the limit 'cases' ({limits.MAX_CASES})")
        return []
    cases = []
    for k, item in enumerate(node.value):
        c = _case(r, item, f"cases[{k}]", f"case{k}", path)
        if c:
            cases.append(c)
    return cases


def _case(r: Reader, item: Node, where: str, default_id: str, path: str) -> Case | None:
    fields = r.mapping(item, where, CASE_FIELDS)
    if "inputs" not in fields or "expected" not in fields:
        r.err(item, "E114", f"{where}: needs 'inputs' and 'expected'")
        return None
    plain = {key: v.plain() for key, v in fields.items()}
    if casecheck.count_numbers(plain) > limits.MAX_CASE_ELEMENTS:
        r.err(item, "E104", f"{where}: more numbers than the limit 'case_elements'")
        return None
    rtol = None
    if "rtol" in fields:
        rtol = r.number(fields["rtol"], f"{where}.rtol")
        if rtol is not None and not 0 < rtol < 1:
            r.err(fields["rtol"], "E112", f"{where}.rtol: must be between 0 and 1")
    for part in _CASE_PARTS:
        if part in plain and not isinstance(plain[part], dict):
            r.err(fields[part], "E110", f"{where}.{part}: expected a mapping")
            return None
    positions = {}
    for part in _CASE_PARTS:
        if part in fields and isinstance(fields[part].value, dict):
            for key, sub in fields[part].value.items():
                positions[f"{part}.{key}"] = (sub.key_line, sub.key_col)
    return Case(positions=positions, inputs=plain["inputs"], params=plain.get("params", {}),
                expected=plain["expected"], id=str(plain.get("id", default_id)),
                rtol=rtol, loc=Location(path, item.line, item.col))


@dataclass(frozen=True)
class _SpecView:
    """The parts of a spec that case checks read, before the Spec itself exists."""

    inputs: tuple
    params: tuple
    bindings: tuple
    reductions: tuple

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    @property
    def sizes(self) -> dict[str, int]:
        return {a: n for i in self.inputs for a, n in i.sizes}


def check_cases(out: Collector, cases: list[Case], inputs: list[Input], params: list[Param],
                reductions: list[ReductionDef], bindings: list) -> None:
    """Names, then values: shapes against the declared shapes, int labels against their
    domains, parameter kinds and bounds (E117), before anything evaluates a case."""
    view = _SpecView(tuple(inputs), tuple(params), tuple(bindings), tuple(reductions))
    names = {i.name for i in inputs}
    for n, c in enumerate(cases):
        where = f"cases[{n}]"
        ok = _check_input_names(out, c, where, names)
        ok = _check_params(out, c, where, view) and ok
        ok = _check_expected(out, c, where, [r.name for r in reductions]) and ok
        if ok and len(inputs) == len(names):
            _check_values(out, c, where, view)


def _at(c: Case, key: str) -> tuple[int, int]:
    """Where the case's entry `key` ("inputs.x") stands; the case's own place if unknown."""
    return c.positions.get(key, (c.loc.line, c.loc.col))


def _check_input_names(out: Collector, c: Case, where: str, names: set[str]) -> bool:
    ok = True
    for k in c.inputs:
        if k not in names:
            line, col = _at(c, f"inputs.{k}")
            out.error(line, col, "E116", f"{where}.inputs: unknown input '{clip(str(k))}'",
                      did_you_mean(str(k), sorted(names)))
            ok = False
    return ok


def _check_params(out: Collector, c: Case, where: str, view: _SpecView) -> bool:
    pnames = {p.name for p in view.params}
    ok = True
    for k, v in c.params.items():
        line, col = _at(c, f"params.{k}")
        if k not in pnames:
            out.error(line, col, "E116", f"{where}.params: unknown parameter '{clip(str(k))}'",
                      did_you_mean(str(k), sorted(pnames)))
            ok = False
            continue
        try:
            casecheck.check_param(view.param(k), v, f"{where}.params.{k}")
        except casecheck.CaseProblem as exc:
            out.error(line, col, "E117", str(exc))
            ok = False
    return ok


def _check_expected(out: Collector, c: Case, where: str, rnames: list[str]) -> bool:
    ok = True
    for k, v in c.expected.items():
        line, col = _at(c, f"expected.{k}")
        if k not in rnames:
            out.error(line, col, "E116", f"{where}.expected: '{clip(str(k))}' is not a reduction "
                      f"({', '.join(rnames)})", did_you_mean(str(k), rnames))
            ok = False
            continue
        try:
            casecheck.check_expected(k, v, f"{where}.expected")
        except casecheck.CaseProblem as exc:
            out.error(line, col, "E117", str(exc))
            ok = False
    return ok


def _check_values(out: Collector, c: Case, where: str, view: _SpecView) -> None:
    try:
        casecheck.check_inputs(view, c.inputs, c.params, f"{where}.inputs")
    except casecheck.CaseProblem as exc:
        name = str(exc).split(":", 1)[0].rsplit(".", 1)[-1]
        line, col = _at(c, f"inputs.{name}")
        out.error(line, col, "E117", str(exc))
        return
    try:  # the reference evaluator computes every spec case's gradients
        casecheck.check_reference_cost(view, c.inputs, needs_gradients=True)
    except casecheck.CaseProblem as exc:
        out.error(c.loc.line, c.loc.col, "E104", f"{where} ('{clip(c.id)}'): {exc}")


# --------------------------------------------------------------------------- references


def read_references(r: Reader, top: dict[str, Node], path: str) -> list[Reference]:
    if "references" not in top:
        return []
    node = top["references"]
    if not isinstance(node.value, list):
        r.err(node, "E112", "references: expected a list")
        return []
    if len(node.value) > limits.MAX_REFERENCES:  # each may name a 1 MiB file, the same one each time
        r.err(node, "E104", f"references: more than the limit 'references' ({limits.MAX_REFERENCES})")
        return []
    refs = []
    for k, item in enumerate(node.value):
        ref = _reference(r, item, f"references[{k}]", path)
        if ref:
            refs.append(ref)
    return refs


def _reference(r: Reader, item: Node, where: str, path: str) -> Reference | None:
    fields = r.mapping(item, where, REFERENCE_FIELDS)
    if "file" not in fields:
        r.err(item, "E114", f"{where}: missing required field 'file'")
        return None
    f = r.string(fields["file"], f"{where}.file", 300)
    if f is None:
        return None
    if f.startswith("/") or ".." in Path(f).parts or "\\" in f:
        r.err(fields["file"], "E150", f"{where}.file: must be a relative path inside the project")
        return None
    inputs = _name_map(r, fields, "inputs", where)
    params = _name_map(r, fields, "params", where)
    ids = _id_list(r, fields, "cases", where)
    rg = _id_list(r, fields, "reference_gradients", where)
    return Reference(f, inputs, params, ids, rg, Location(path, item.line, item.col))


def _name_map(r: Reader, fields: dict[str, Node], part: str, where: str) -> dict:
    m = fields[part].plain() if part in fields else {}
    if not isinstance(m, dict) or not all(isinstance(a, str) and isinstance(b, str) for a, b in m.items()):
        r.err(fields[part], "E112", f"{where}.{part}: expected a mapping of names")
        return {}
    return m


def _id_list(r: Reader, fields: dict[str, Node], part: str, where: str) -> tuple[str, ...]:
    ids = fields[part].plain() if part in fields else []
    if not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
        r.err(fields[part], "E112", f"{where}.{part}: expected a list of case ids")
        return ()
    return tuple(ids)
