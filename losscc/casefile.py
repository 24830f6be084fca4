"""Cases from files: the conformance schema (``tests/data/conformance/README.md``).

A case file is untrusted: it is read with a size bound, parsed with a nesting bound and
finite numbers only, and every case is checked against the spec (shapes, dtypes, label
domains, parameter kinds and bounds, sizes) before it is evaluated.  The file's names are
mapped onto the spec's by the spec's ``references:`` entry.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import limits
from .casecheck import (CaseProblem, check_inputs, check_param, check_reference_cost, count_numbers, flat,
                        nested_shape)
from .casedata import CaseData, check_none_shape, declared_shape
from .errors import Diagnostic, Location, SpecError
from .files import read_bounded
from .project import resolve_reference
from .spec import Spec


def reference_cases(spec: Spec, root: Path) -> list[CaseData]:
    """The cases of the spec's reference files; each must lie inside `root` (its folders
    may not lead out through a symbolic link, the file itself may not be one)."""
    out = []
    for ref in spec.references:
        path = resolve_reference(root, spec.path, ref.file, ref.loc)
        out += load_case_file(path, spec, ref.inputs, ref.params, ref.cases, ref.loc, ref.reference_gradients)
        if len(out) > limits.MAX_CASES:  # a 1 MiB file holds thousands of small cases
            raise SpecError([Diagnostic(ref.loc, "E181", f"the reference files give more cases than the limit "
                                                         f"'cases' ({limits.MAX_CASES})")])
    return out


def load_case_file(path: str | Path, spec: Spec, input_map: dict | None = None,
                   param_map: dict | None = None, ids: tuple[str, ...] = (),
                   where: Location | None = None, reference_gradients: tuple[str, ...] = ()) -> list[CaseData]:
    """Cases of a conformance-schema file, renamed into the spec's inputs and params.

    The file is untrusted: read with a size bound, parsed with a nesting bound, and every
    case checked against the spec (shapes, dtypes, label domains, parameter kinds and
    bounds, sizes) before it is evaluated; problems are E180/E181, not failures."""
    path = Path(path)
    loc = where or Location(str(path))
    doc = read_case_json(path, loc)
    input_map, param_map = dict(input_map or {}), dict(param_map or {})
    out, problems = [], []
    wanted = set(ids)
    if isinstance(doc.get("cases"), list) and len(doc["cases"]) > limits.MAX_CASES and not ids:
        raise SpecError([Diagnostic(loc, "E181", f"{path.name}: more cases than the limit 'cases' ({limits.MAX_CASES})")])
    for n, case in enumerate(doc.get("cases", [])):
        cid = case.get("id", f"case{n}") if isinstance(case, dict) else f"case{n}"
        if not isinstance(cid, str):
            problems.append(Diagnostic(loc, "E181", f"{path.name}: cases[{n}]: 'id' must be a string"))
            continue
        if wanted and cid not in wanted:
            continue
        try:
            if not isinstance(case, dict):
                raise CaseProblem("expected an object")
            if count_numbers(case) > limits.MAX_CASE_ELEMENTS:
                raise CaseProblem(f"more numbers than the limit 'case_elements' ({limits.MAX_CASE_ELEMENTS})")
            data = _one_case(dict(case, id=cid), spec, input_map, param_map, path, reference_gradients)
            check_none_shape(spec, data, loc, "E181", f"{path.name}: case '{cid[:60]}'")
            out.append(data)
        except SpecError as exc:
            problems += exc.diagnostics
        except (CaseProblem, ValueError, TypeError) as exc:
            problems.append(Diagnostic(loc, "E181", f"{path.name}: case '{cid[:60]}': {exc}"))
        if len(problems) >= 20:
            break
    if wanted - {c.id for c in out} and not problems:
        missing = sorted(wanted - {c.id for c in out})
        problems.append(Diagnostic(loc, "E182", f"{path.name}: no case with id {', '.join(missing)}"))
    if problems:
        raise SpecError(problems)
    return out


# --------------------------------------------------------------------------- reading


def read_case_json(path: Path, loc: Location) -> dict:
    """The parsed case file, bounded in size and nesting, with finite numbers only."""
    try:
        raw = read_bounded(path, limits.MAX_CASE_FILE_BYTES, f"case file {path.name}", str(path), "E180",
                           limit_name="case_file_bytes")
    except SpecError as exc:  # report it where the spec names the file
        d = exc.diagnostics[0]
        raise SpecError([Diagnostic(loc, d.code, f"{path.as_posix()}: {d.message}")]) from None
    try:
        doc = loads_bounded(raw.decode("utf-8"), parse_int=_int, parse_constant=_constant)
    except ValueError as exc:
        raise SpecError([Diagnostic(loc, "E180", f"cannot read case file {path.name}: {exc}")]) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cases", []), list):
        raise SpecError([Diagnostic(loc, "E180", f"case file {path.name}: expected an object with a list 'cases'")])
    return doc


def loads_bounded(text: str | bytes, **kw):
    """``json.loads`` of untrusted text (bytes: UTF-8), refusing nesting past the limit
    'json_depth' first (the parser recurses per level) and duplicate keys; every failure is a
    ValueError."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if _json_depth(text) > limits.MAX_JSON_DEPTH:
        raise ValueError(f"nested more deeply than the limit 'json_depth' ({limits.MAX_JSON_DEPTH})")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, **kw)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _unique_keys(pairs: list) -> dict:
    """An object whose keys are all different: json.loads keeps the last of two, so a reviewer
    reading `"expected": {"mean": 1.0}` would not see the second `"expected"` that counts (a
    YAML spec's duplicate key is E106 for the same reason)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"duplicate key {str(key)[:40]!r}")
    return out


def _json_depth(text: str) -> int:
    """Deepest nesting of [ and { outside strings (json.loads recurses per level)."""
    depth = best = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth -= 1
    return best


def _int(text: str) -> int:
    if len(text.lstrip("-")) > 300:
        raise ValueError(f"integer of {len(text)} digits (at most 300)")
    return int(text)


def _constant(text: str):
    raise ValueError(f"{text} is not allowed; every number must be finite")


# --------------------------------------------------------------------------- one case


def _one_case(case: dict, spec: Spec, input_map: dict, param_map: dict, path: Path,
              reference_gradients: tuple[str, ...]) -> CaseData:
    inputs = _inputs(case, spec, input_map)
    params, tensors, scalars = _params(case, spec, param_map)
    inputs.update(tensors)
    check_inputs(spec, _lists(inputs), params, "inputs", skip=frozenset(scalars))
    for target, v in scalars.items():
        inputs[target] = np.full(declared_shape(spec, target, inputs), v)
    expected = {}
    for k, v in _mapping(case.get("expected"), "expected").items():
        nested_shape(v, f"expected.{k}")
        expected[k] = np.asarray(v, dtype=float) if isinstance(v, list) else float(v)
    grads = _grads(case, spec, input_map, inputs)
    if case["id"] in reference_gradients:
        grads = {}  # the spec explains why these come from losscc's reference evaluator
    check_reference_cost(spec, _lists(inputs), not grads)
    return CaseData(case["id"], path.as_posix(), inputs, params, {}, expected, grads)


def _lists(inputs: dict) -> dict:
    return {k: (None if v is None else v.tolist()) for k, v in inputs.items()}


def _inputs(case: dict, spec: Spec, input_map: dict) -> dict:
    """Every input of the spec: the file's tensor, or None."""
    names = {i.name for i in spec.inputs}
    inputs: dict = {i.name: None for i in spec.inputs}
    for k, v in _mapping(case.get("inputs"), "inputs").items():
        target = input_map.get(k, k)
        if target not in names:
            raise CaseProblem(f"input '{k[:40]}' has no counterpart in the spec (map it under inputs:)")
        inputs[target] = _tensor(v, f"inputs.{k}", spec.input(target))
    return inputs


def _params(case: dict, spec: Spec, param_map: dict) -> tuple[dict, dict, dict]:
    """The file's params: the spec's parameters, tensors for (optional) inputs, and scalars
    that stand for a tensor input, the same for every entry."""
    names = {i.name for i in spec.inputs}
    pnames = {p.name for p in spec.params}
    params: dict = {}
    tensors: dict = {}
    scalars: dict = {}
    for k, v in _mapping(case.get("params"), "params").items():
        target = param_map.get(k, k)
        if isinstance(v, dict):
            if target not in names:
                raise CaseProblem(f"tensor parameter '{k[:40]}' needs an optional input of the spec")
            tensors[target] = _tensor(v, f"params.{k}", spec.input(target))
        elif target in pnames:
            check_param(spec.param(target), v, f"params.{k}")
            params[target] = v
        elif target in names and isinstance(v, (int, float)) and not isinstance(v, bool):
            scalars[target] = float(v)
        elif v is None or target == "":
            continue
        else:
            raise CaseProblem(f"parameter '{k[:40]}' has no counterpart in the spec")
    return params, tensors, scalars


def _grads(case: dict, spec: Spec, input_map: dict, inputs: dict) -> dict:
    """The file's gradients of the summed loss, by the spec's input and learnable names."""
    names = {i.name for i in spec.inputs}
    grads = {}
    for k, v in _mapping(case.get("grad_of_sum"), "grad_of_sum").items():
        nested_shape(v, f"grad_of_sum.{k}")
        target = input_map.get(k, k)
        if target not in names and not any(lr.name == target for lr in spec.learnable):
            raise CaseProblem(f"grad_of_sum.{k[:40]}: no such input in the spec")
        grads[target] = np.asarray(v, dtype=float)
        if inputs.get(target) is not None and grads[target].shape != inputs[target].shape:
            raise CaseProblem(f"grad_of_sum.{k[:40]}: shape {list(grads[target].shape)} is not the input's "
                              f"{list(inputs[target].shape)}")
    return grads


def _tensor(obj, where: str, inp) -> np.ndarray:
    if not isinstance(obj, dict) or "data" not in obj:
        raise CaseProblem(f"{where}: expected a tensor object {{\"dtype\", \"shape\", \"data\"}}")
    dtype = obj.get("dtype", "float64")
    if dtype not in ("float64", "int64"):
        raise CaseProblem(f"{where}: dtype {str(dtype)[:20]!r} is not float64 or int64")
    shape = nested_shape(obj["data"], where)
    declared = obj.get("shape", list(shape))
    if not isinstance(declared, list) or list(shape) != declared:
        raise CaseProblem(f"{where}: data does not have shape {str(declared)[:60]}")
    if inp is not None and (inp.dtype == "int") != (dtype == "int64"):
        raise CaseProblem(f"{where}: dtype {dtype} does not fit the {inp.dtype} input '{inp.name}'")
    if dtype == "int64":  # NumPy truncates 1.5 to 1 and raises OverflowError past int64
        for x in flat(obj["data"]):
            if isinstance(x, float) and not x.is_integer() or not -2**63 <= x < 2**63:
                raise CaseProblem(f"{where}: {str(x)[:40]} is not an int64 value")
    return np.asarray(obj["data"], dtype=np.int64 if dtype == "int64" else float)


def _mapping(v, where: str) -> dict:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise CaseProblem(f"{where}: expected an object")
    return v
