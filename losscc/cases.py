"""Verification cases from three sources: the spec's own, random draws, and case files.

A :class:`CaseData` holds float64 NumPy inputs and, where known, expected values
and gradients.  Random cases are drawn from each input's declared domain with a
seeded generator, so a run is reproducible.  External files use the schema of the
conformance suite (``tests/data/conformance/README.md``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import limits
from .casecheck import CaseProblem, check_inputs, check_param, check_reference_cost, nested_shape
from .project import resolve_reference
from .errors import Diagnostic, Location, SpecError
from .files import read_bounded
from .spec import Input, Spec

SMALL_SIZES = (3, 4, 2)


@dataclass
class CaseData:
    id: str
    source: str                          # "spec", "random" or a file path
    inputs: dict                         # name -> float64/int64 array or None
    params: dict
    learnable: dict = field(default_factory=dict)
    expected: dict = field(default_factory=dict)   # reduction -> value (may be partial)
    grads: dict = field(default_factory=dict)      # name -> expected d(sum)/d(name)
    from_reference: bool = False          # expectations come from the reference evaluator
    rtol: float | None = None             # looser value tolerance for hand-written numbers


def _draw(inp: Input, shape, rng: np.random.Generator, sizes) -> np.ndarray:
    d = inp.domain
    if inp.dtype == "int":
        hi = d.hi if not isinstance(d.hi, str) else sizes[d.hi][0]
        lo = 0 if d.lo is None else d.lo
        if d.is_set:
            return rng.choice(np.array(d.values, dtype=np.int64), size=shape)
        return rng.integers(int(lo), int(hi), size=shape, dtype=np.int64)
    if d.is_set:
        return rng.choice(np.array(d.values, dtype=float), size=shape)
    lo, hi = d.lo, d.hi
    if lo is None and hi is None:
        x = rng.normal(0.0, 1.5, size=shape)
    elif lo is not None and hi is not None:
        span = hi - lo
        x = rng.uniform(lo + 0.02 * span, hi - 0.02 * span, size=shape)
    elif lo is not None:
        x = lo + np.exp(rng.normal(0.0, 1.0, size=shape))
    else:
        x = hi - np.exp(rng.normal(0.0, 1.0, size=shape))
    # a few decimals: exact in float32 as well, and readable in reports
    return np.round(x, 3)


def random_cases(spec: Spec, count: int, seed: int) -> list[CaseData]:
    out = []
    for k in range(count):
        rng = np.random.default_rng([seed, k, len(spec.name)] + [ord(c) for c in spec.name])
        sizes: dict[str, tuple[int, ...]] = {}
        for inp in spec.inputs:
            for a in inp.shape:
                if a.lstrip("*") not in sizes:
                    if a.startswith("*"):
                        rank = 1 + (k % 2)
                        sizes[a.lstrip("*")] = tuple(int(rng.integers(2, 5)) for _ in range(rank))
                    else:
                        sizes[a] = (int(rng.integers(2, 5)),)
        inputs = {}
        for inp in spec.inputs:
            shape = tuple(n for a in inp.shape for n in sizes[a.lstrip("*")])
            if inp.optional and k % 2 == 0:
                inputs[inp.name] = None
                continue
            if inp.optional:
                inputs[inp.name] = np.round(rng.uniform(0.5, 2.0, size=shape), 3)
                continue
            inputs[inp.name] = _draw(inp, shape, rng, sizes)
        params = {}
        for p in spec.params:
            if k == 0:
                params[p.name] = p.default
            elif p.kind == "bool":
                params[p.name] = bool((k % 2) ^ int(p.default))
            elif p.kind == "int":
                params[p.name] = p.default
            else:
                v = p.default + (0.5 if k % 2 else 0.25)
                if p.max is not None:
                    v = min(v, p.max)
                params[p.name] = float(v)
        for inp in spec.inputs:
            if inp.ignore and inputs.get(inp.name) is not None:
                arr = inputs[inp.name]
                mask = rng.random(arr.shape) < 0.3
                mask.reshape(-1)[0] = False  # at least one position counts
                arr[mask] = params[inp.ignore]
        learn = {lr.name: np.round(rng.normal(0.0, 0.5, size=lr.shape), 3) for lr in spec.learnable}
        out.append(CaseData(f"random{k}", "random", inputs, params, learn, from_reference=True))
    return out


_LOSS_AXES: dict = {}


def _loss_shape(spec: Spec, inputs: dict) -> tuple[int, ...] | None:
    """The shape of the per-element loss for these inputs, or None where it is not known."""
    key = (spec.path, spec.source_sha256)
    if key not in _LOSS_AXES:
        from .parse import build_program

        prog = build_program(spec)
        _LOSS_AXES.clear()  # one spec at a time is enough
        _LOSS_AXES[key] = prog.typeof(prog.loss).axes
    axes = _LOSS_AXES[key]
    sizes = axis_sizes(spec, inputs)
    if not all(a in sizes for a in axes):
        return None
    return tuple(n for a in axes for n in sizes[a])


def check_none_shape(spec: Spec, case: CaseData, loc: Location, code: str, where: str) -> None:
    """An expected per-element value ('none') must have the loss's shape."""
    want = case.expected.get("none")
    if want is None:
        return
    shape = _loss_shape(spec, case.inputs)
    got = np.shape(want)
    if shape is not None and got != shape:
        raise SpecError([Diagnostic(loc, code, f"{where}: expected.none has shape {list(got)}, but the loss "
                                    f"for these inputs has shape {list(shape)}")])


def spec_cases(spec: Spec) -> list[CaseData]:
    """The spec's own cases (checked against the spec when it was loaded)."""
    out = []
    for n, c in enumerate(spec.cases):
        inputs = {}
        for inp in spec.inputs:
            v = c.inputs.get(inp.name)
            inputs[inp.name] = None if v is None else np.asarray(v, dtype=np.int64 if inp.dtype == "int" else float)
        expected = {k: (np.asarray(v, dtype=float) if isinstance(v, list) else float(v)) for k, v in c.expected.items()}
        learn = {lr.name: np.full(lr.shape, lr.init) for lr in spec.learnable}
        case = CaseData(c.id, spec.path, inputs, dict(c.params), learn, expected, rtol=c.rtol)
        line, col = c.positions.get("expected.none", (c.loc.line, c.loc.col))
        check_none_shape(spec, case, Location(spec.path, line, col), "E117", f"cases[{n}]")
        out.append(case)
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


def read_case_json(path: Path, loc: Location) -> dict:
    """The parsed case file, bounded in size and nesting, with finite numbers only."""
    try:
        raw = read_bounded(path, limits.MAX_CASE_FILE_BYTES, f"case file {path.name}", str(path), "E180",
                           limit_name="case_file_bytes")
    except SpecError as exc:  # report it where the spec names the file
        d = exc.diagnostics[0]
        raise SpecError([Diagnostic(loc, d.code, f"{path.as_posix()}: {d.message}")]) from None
    try:
        text = raw.decode("utf-8")
        if _json_depth(text) > limits.MAX_JSON_DEPTH:
            raise ValueError(f"nested more deeply than the limit 'json_depth' ({limits.MAX_JSON_DEPTH})")
        doc = json.loads(text, parse_int=_int, parse_constant=_constant)
    except (ValueError, RecursionError) as exc:
        raise SpecError([Diagnostic(loc, "E180", f"cannot read case file {path.name}: {exc}")]) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cases", []), list):
        raise SpecError([Diagnostic(loc, "E180", f"case file {path.name}: expected an object with a list 'cases'")])
    return doc


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
    return np.asarray(obj["data"], dtype=np.int64 if dtype == "int64" else float)


def _mapping(v, where: str) -> dict:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise CaseProblem(f"{where}: expected an object")
    return v


def _one_case(case, spec: Spec, input_map: dict, param_map: dict, path: Path,
              reference_gradients: tuple[str, ...]) -> CaseData:
    cid = case["id"]
    names = {i.name for i in spec.inputs}
    pnames = {p.name for p in spec.params}
    inputs: dict = {i.name: None for i in spec.inputs}
    params: dict = {}
    scalars: dict = {}
    for k, v in _mapping(case.get("inputs"), "inputs").items():
        target = input_map.get(k, k)
        if target not in names:
            raise CaseProblem(f"input '{k[:40]}' has no counterpart in the spec (map it under inputs:)")
        inputs[target] = _tensor(v, f"inputs.{k}", spec.input(target))
    for k, v in _mapping(case.get("params"), "params").items():
        target = param_map.get(k, k)
        if isinstance(v, dict):
            if target not in names:
                raise CaseProblem(f"tensor parameter '{k[:40]}' needs an optional input of the spec")
            inputs[target] = _tensor(v, f"params.{k}", spec.input(target))
        elif target in pnames:
            check_param(spec.param(target), v, f"params.{k}")
            params[target] = v
        elif target in names and isinstance(v, (int, float)) and not isinstance(v, bool):
            scalars[target] = float(v)  # a scalar for a tensor input: the same for every entry
        elif v is None or target == "":
            continue
        else:
            raise CaseProblem(f"parameter '{k[:40]}' has no counterpart in the spec")
    check_inputs(spec, {k: (None if v is None else v.tolist()) for k, v in inputs.items()}, params,
                 "inputs", skip=frozenset(scalars))
    for target, v in scalars.items():
        inputs[target] = np.full(_declared_shape(spec, target, inputs), v)
    expected = {}
    for k, v in _mapping(case.get("expected"), "expected").items():
        nested_shape(v, f"expected.{k}")
        expected[k] = np.asarray(v, dtype=float) if isinstance(v, list) else float(v)
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
    if cid in reference_gradients:
        grads = {}  # the spec explains why these come from losscc's reference evaluator
    check_reference_cost(spec, {k: (None if v is None else v.tolist()) for k, v in inputs.items()}, not grads)
    return CaseData(cid, path.as_posix(), inputs, params, {}, expected, grads)


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
    for n, case in enumerate(doc.get("cases", [])):
        cid = case.get("id", f"case{n}") if isinstance(case, dict) else f"case{n}"
        if not isinstance(cid, str):
            cid = f"case{n}"
            problems.append(Diagnostic(loc, "E181", f"{path.name}: cases[{n}]: 'id' must be a string"))
            continue
        if wanted and cid not in wanted:
            continue
        try:
            if not isinstance(case, dict):
                raise CaseProblem("expected an object")
            if _count(case) > limits.MAX_CASE_ELEMENTS:
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


def _count(v) -> int:
    if isinstance(v, list):
        return sum(_count(x) for x in v)
    if isinstance(v, dict):
        return sum(_count(x) for x in v.values())
    return 1


def axis_sizes(spec: Spec, inputs: dict) -> dict[str, tuple[int, ...]]:
    """Each axis's sizes (a tuple: a variadic group has several) as the given, non-broadcast
    inputs show them; the first input to show an axis decides."""
    sizes: dict[str, tuple[int, ...]] = {}
    for inp in spec.inputs:
        v = inputs.get(inp.name)
        if v is None or inp.broadcast:
            continue
        nvar = v.ndim - sum(1 for a in inp.shape if not a.startswith("*"))
        k = 0
        for a in inp.shape:
            n = nvar if a.startswith("*") else 1
            sizes.setdefault(a.lstrip("*"), tuple(v.shape[k:k + n]))
            k += n
    return sizes


def _declared_shape(spec: Spec, name: str, inputs: dict) -> tuple[int, ...]:
    sizes = axis_sizes(spec, inputs)
    return tuple(n for a in spec.input(name).shape for n in sizes[a.lstrip("*")])


def reference_cases(spec: Spec, root: Path) -> list[CaseData]:
    """The cases of the spec's reference files; each must lie inside `root` (its folders
    may not lead out through a symbolic link, the file itself may not be one)."""
    out = []
    for ref in spec.references:
        path = resolve_reference(root, spec.path, ref.file, ref.loc)
        out += load_case_file(path, spec, ref.inputs, ref.params, ref.cases, ref.loc, ref.reference_gradients)
    return out


EXTREME_SCALES = (1e2, 1e4, 1e18)  # 1e18: squares still fit in float32
TINY_DIFFERENCES = (1e-8, 1e-20)    # relative to entries of size 1; 1e-20 is below float64's eps


def extreme_cases(spec: Spec, seed: int = 0) -> list[CaseData]:
    """Inputs where hand-written losses overflow, cancel or lose their gradient.

    Per float input with an unbounded domain: entries of magnitude 1e2, 1e4 and 1e18 (the
    others stay ordinary); probabilities exactly 0 and 1 where the domain is closed there;
    tiny (1e-30) and huge (1e30) values where the domain is (0, inf) or [0, inf).  Per pair of
    same-shaped real inputs a, b: equal (difference exactly 0), one ulp apart, and differences
    of 1e-8 and 1e-20 (b = a + 1e-8 on entries of size 1; a = +-1e-20, b = 0), where a loss
    of the difference must keep its relative accuracy (log(cosh(d)) ~ d**2 / 2).  Per
    comparison, clip bound and max/min of the formula whose sides depend elementwise on the
    inputs: a draw that puts half the entries exactly on the boundary (ties)."""
    base = random_cases(spec, 1, seed + 1000)[0]
    base.params = {p.name: p.default for p in spec.params}
    out = []

    def variant(tag, changes):
        inputs = {k: (None if v is None else v.copy()) for k, v in base.inputs.items()}
        inputs.update(changes)
        out.append(CaseData(f"extreme_{tag}", "extreme", inputs, dict(base.params), dict(base.learnable),
                            from_reference=True))

    floats = [i for i in spec.inputs if i.dtype == "float" and not i.optional and base.inputs.get(i.name) is not None]
    for inp in floats:
        v = base.inputs[inp.name]
        d = inp.domain
        rng = np.random.default_rng([seed, len(inp.name)])
        sign = np.where(rng.random(v.shape) < 0.5, -1.0, 1.0)
        if not d.is_set and d.lo is None and d.hi is None:
            for s in EXTREME_SCALES:
                variant(f"{inp.name}_{s:.0e}", {inp.name: sign * s * np.abs(np.round(rng.uniform(0.5, 1.0, v.shape), 3))})
        if isinstance(d.lo, float) and d.lo_closed and isinstance(d.hi, float) and d.hi_closed:
            variant(f"{inp.name}_ends", {inp.name: np.where(rng.random(v.shape) < 0.5, d.lo, d.hi)})
        if d.lo == 0.0 and d.hi is None:
            variant(f"{inp.name}_tiny", {inp.name: np.full(v.shape, 1e-30)})
            variant(f"{inp.name}_huge", {inp.name: np.full(v.shape, 1e30)})
            if d.lo_closed:
                variant(f"{inp.name}_zero", {inp.name: np.zeros(v.shape)})
    real = [i for i in floats if not i.domain.is_set and i.domain.lo is None and i.domain.hi is None]
    for a, b in zip(real, real[1:]):
        va = base.inputs[a.name]
        if va.shape != base.inputs[b.name].shape:
            continue
        variant(f"{a.name}_eq_{b.name}", {b.name: va.copy()})
        variant(f"{a.name}_ulp_{b.name}", {b.name: np.nextafter(va, np.inf)})
        rng = np.random.default_rng([seed, len(a.name), len(b.name)])
        sign = np.where(rng.random(va.shape) < 0.5, -1.0, 1.0)
        unit = sign * np.round(rng.uniform(0.5, 1.0, va.shape), 3)
        for dd in TINY_DIFFERENCES:
            if dd >= np.finfo(float).eps:
                variant(f"{a.name}_near_{b.name}_{dd:.0e}", {a.name: unit, b.name: unit + sign * dd})
            else:
                variant(f"{a.name}_near_{b.name}_{dd:.0e}", {a.name: unit * dd, b.name: np.zeros(va.shape)})
    for tag, changes in _boundary_variants(spec, base, floats):
        variant(tag, changes)
    return out


def _boundary_variants(spec: Spec, base: CaseData, floats: list[Input]) -> list[tuple[str, dict]]:
    """Ties of the formula's comparisons, clip bounds and max/min: for each, one float input x
    is solved (by bisection on float64 values, bounded) so that both sides are equal, the other
    inputs it involves held at one representative value."""
    import sympy as sp

    from . import ir
    from .parse import build_program

    try:
        prog = build_program(spec)
    except Exception:  # noqa: BLE001 - an invalid spec has no boundaries to test; verify reports it
        return []
    sym = prog.symbols
    fixed = {sym[p.name]: (sp.Integer(int(p.default)) if p.kind in ("int", "bool") else sp.Float(p.default))
             for p in spec.params if p.name in sym and isinstance(p.default, (int, float))}
    names = {sym[i.name]: i for i in spec.inputs if i.name in sym and base.inputs.get(i.name) is not None}
    pairs = []
    for node in sp.preorder_traversal(prog.loss):
        if isinstance(node, sp.core.relational.Relational) and not isinstance(node, (sp.Eq, sp.Ne)):
            pairs.append((node.lhs, node.rhs))
        elif isinstance(node, ir.Clip):
            pairs += [(node.args[0], node.args[1]), (node.args[0], node.args[2])]
        elif isinstance(node, (sp.Max, sp.Min)) and len(node.args) == 2:
            pairs.append(node.args)
        if len(pairs) >= 8:
            break
    out, seen = [], set()
    for lhs, rhs in pairs:
        f = (lhs - rhs).subs(fixed)
        if f.has(ir.TensorOp) or not f.free_symbols or not f.free_symbols <= set(names):
            continue
        xs = [s for s in sorted(f.free_symbols, key=str) if names[s] in floats and not names[s].domain.is_set]
        if not xs:
            continue
        x = xs[0]
        rep = {s: float(np.asarray(base.inputs[names[s].name], dtype=float).reshape(-1)[0])
               for s in f.free_symbols if s != x}
        g = f.subs({s: sp.Float(v, 30) for s, v in rep.items()})
        root = _bisect(g, x, names[x].domain)
        if root is None or (x, root) in seen:
            continue
        seen.add((x, root))
        changes = {}
        for s, v in rep.items():
            changes[names[s].name] = np.full(base.inputs[names[s].name].shape, v)
        arr = np.asarray(base.inputs[names[x].name], dtype=float).copy()
        arr.reshape(-1)[::2] = root
        changes[names[x].name] = arr
        out.append((f"{names[x].name}_tie{len(out)}", changes))
    return out


def _bisect(g, x, domain, steps: int = 80):
    """A float64 value of x where the expression g changes sign (g(x) == 0 when representable),
    searched on a grid inside the domain; None if g keeps its sign there."""
    import sympy as sp

    lo = -8.0 if domain.lo is None else float(domain.lo)
    hi = 8.0 if domain.hi is None else float(domain.hi)
    if domain.hi is None and domain.lo is not None:
        hi = lo + 16.0

    def val(t: float):
        try:
            r = complex(g.subs(x, sp.Float(t, 30)).evalf(30))
        except (TypeError, ValueError, ZeroDivisionError):
            return None
        return r.real if abs(r.imag) == 0 and np.isfinite(r.real) else None

    grid = np.linspace(lo, hi, 33)[1:-1]
    vals = [val(float(t)) for t in grid]
    for t, v in zip(grid, vals):
        if v == 0:
            return float(t)
    for (t0, v0), (t1, v1) in zip(zip(grid, vals), zip(grid[1:], vals[1:])):
        if v0 is None or v1 is None or (v0 > 0) == (v1 > 0):
            continue
        a, b = float(t0), float(t1)
        for _ in range(steps):
            m = (a + b) / 2
            if m in (a, b):
                break
            vm = val(m)
            if vm is None:
                return None
            if vm == 0:
                return m
            if (vm > 0) == (v0 > 0):
                a = m
            else:
                b = m
        return b
    return None
