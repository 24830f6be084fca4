"""Spec calls in a formula: ``bce_with_logits(x, y, reduction=none)`` inlines another spec.

A call whose name is not a registered function names a spec, looked up beside the calling
spec (its project's specs folder) and then in the shipped catalogue.  The callee's program
(bindings inlined, its loss and its reductions' denominators) is built once, and its symbols
are replaced: inputs by the caller's arguments (positional in the callee's order, optional
ones also by keyword; an omitted optional input is its default), params by keyword (else
their defaults), axes by the caller's axes that the arguments carry.  A variadic group may
stand for no axis or for several; a reduction over it then disappears or nests.  The
result is one IR, so rewrites, guards and CSE work across the boundary.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

import sympy as sp

from . import functions, ir, limits
from .errors import SpecError
from .resources import catalogue
from .ttype import Fail, TType

_ACTIVE: list[str] = []            # specs whose programs are being built, outermost first
_CACHES: list[dict] = []          # per outermost build: each spec file's program, built once


def find_spec(name: str, caller_path: str, folder: str = "") -> tuple[str, object] | None:
    """(shown path, file) of the spec `name`: beside the caller (in `folder`, the caller's
    absolute folder, not relative to the working directory), else in the catalogue."""
    shown = Path(caller_path).parent / f"{name}.yaml"
    local = Path(folder) / f"{name}.yaml" if folder else shown
    if local.is_symlink():
        return None
    if local.is_file():
        return shown.as_posix(), local
    f = catalogue().get(name)
    return (f"<catalogue>/{name}.yaml", f) if f is not None else None


def _load(shown: str, f):
    from .spec import load_spec, spec_from_text
    if isinstance(f, Path):
        return load_spec(f, shown)
    raw = f.read_bytes()[: limits.MAX_FILE_BYTES + 1]
    if len(raw) > limits.MAX_FILE_BYTES:
        raise SpecError([])
    return spec_from_text(raw.decode("utf-8"), shown, hashlib.sha256(raw).hexdigest())


def callee_program(node, name: str, caller, cache: dict):
    """The built program of the spec `name` called from the spec `caller`; `cache` holds the
    programs built for the outermost spec being compiled (so each file is built once)."""
    found = find_spec(name, caller.path, caller.folder)
    if found is None:
        return None
    chain = [*_ACTIVE, caller.name] if not _ACTIVE or _ACTIVE[-1] != caller.name else list(_ACTIVE)
    if name in chain:
        raise Fail(node, "E260", f"spec call cycle: {' -> '.join([*chain, name])}")
    if len(chain) >= limits.MAX_COMPOSE_DEPTH:
        raise Fail(node, "E261", f"spec calls nest deeper than the limit 'compose_depth' "
                                 f"({limits.MAX_COMPOSE_DEPTH})")
    from .parse import build_program
    shown, f = found
    try:
        spec = _load(shown, f)
        key = (shown, spec.source_sha256)
        if key in cache:
            return cache[key]
        pushed = chain[len(_ACTIVE):]
        _ACTIVE.extend(pushed)
        _CACHES.append(cache)
        try:
            prog = build_program(spec)
        finally:
            del _ACTIVE[len(_ACTIVE) - len(pushed):]
            _CACHES.pop()
    except SpecError as exc:
        if any(d.code in ("E260", "E261") for d in exc.diagnostics):
            first = next(d for d in exc.diagnostics if d.code in ("E260", "E261"))
            raise Fail(node, first.code, first.message) from None
        first = exc.diagnostics[0] if exc.diagnostics else None
        why = f": {first.loc.path}:{first.loc.line}:{first.loc.col}: {first.message}" if first else ""
        raise Fail(node, "E265", f"spec '{name}' has errors{why}") from None
    if spec.name != name:
        raise Fail(node, "E265", f"{shown}: its name is '{spec.name}', not '{name}'")
    if spec.learnable:
        raise Fail(node, "E265", f"spec '{name}' has learnable tensors; a called spec may not")
    if prog.aliases:
        raise Fail(node, "E265", f"spec '{name}' renames axes (rename(x, N=M)); a called spec may not")
    cache[key] = prog
    return prog


class SpecCalls:
    """spec_call, a part of the parser's Converter (beside losscc.calls.CallRules)."""

    def spec_call(self, node, d):
        name = node.func.id
        cache = _CACHES[-1] if _CACHES else self.__dict__.setdefault("spec_programs", {})
        prog = callee_program(node, name, self.spec, cache)
        if prog is None:
            return None
        self.composed = getattr(self, "composed", ())
        if len(self.composed) >= limits.MAX_SPEC_CALLS:
            raise Fail(node, "E261", f"more spec calls than the limit 'spec_calls' ({limits.MAX_SPEC_CALLS})")
        spec = prog.spec
        values, reduction = self._spec_arguments(node, spec, d)
        sub, axes = self._unify(node, prog, values)
        cond = None
        for inp in spec.inputs:
            if inp.ignore:  # as the pipeline's mask: ignored positions give 0, their index reads 0
                label = sub[prog.symbols[inp.name]]
                c = sp.Ne(label, sub[prog.symbols[inp.ignore]])
                cond = c if cond is None else sp.And(cond, c)
                safe = sp.Piecewise((label, c), (0, True))
                self.types.setdefault(safe, self.types[label])
                sub = {**sub, prog.symbols[inp.name]: safe}
        # each call substitutes other arguments into its own copy of the callee: calls of calls
        # multiply distinct nodes (30 calls of 30 calls of a log-cosh: 900 copies, each of which
        # SymPy evaluates again), which the limit 'tree' on the inlined tree does not bound
        self.inlined = getattr(self, "inlined", 0) + ir.dag_size(prog.loss)
        if self.inlined > limits.MAX_INLINED:
            raise Fail(node, "E104", f"spec calls inline more than the limit 'inlined' ({limits.MAX_INLINED} "
                       "distinct nodes, summed over the calls)")
        loss, den = _remap(prog.loss, sub, axes, node), None
        if cond is not None:
            loss = sp.Piecewise((loss, cond), (0, True))
        self._retype(loss)
        if reduction != "none":
            raw = prog.denominators.get(reduction) if reduction != "sum" else None
            per_element = raw is not None and bool(prog.typeof(raw).axes)
            if raw is not None:
                den = _remap(raw, sub, axes, node)
                self._retype(den)
                if cond is not None and per_element:  # as the mask: ignored positions do not count
                    den = sp.Piecewise((den, cond), (0, True))
            elif reduction != "sum" and cond is not None:
                den, per_element = sp.Piecewise((1, cond), (0, True)), True
            loss = self._reduce(loss, den, reduction, per_element)
        self.composed = (*self.composed, (name, spec.source_sha256))
        return self._t(loss, self._retype(loss))

    def _spec_arguments(self, node, spec, d):
        inputs = spec.inputs
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise Fail(node, "E202", "'*' arguments are not allowed")
        required = [i for i in inputs if not i.optional]
        if len(node.args) < len(required) or len(node.args) > len(inputs):
            raise Fail(node, "E262", f"{spec.name} takes {len(required)} input argument(s) "
                                     f"({', '.join(i.name for i in required)}), got {len(node.args)}")
        values = {inputs[k].name: (a, self.visit(a, d)) for k, a in enumerate(node.args)}
        params = {p.name: p for p in spec.params}
        reduction = spec.default_reduction
        for kw in node.keywords:
            if kw.arg == "reduction":
                known = [r.name for r in spec.reductions]
                if not isinstance(kw.value, ast.Name) or kw.value.id not in known:
                    raise Fail(kw.value, "E263", f"{spec.name}: reduction= must be one of {', '.join(known)}")
                reduction = kw.value.id
            elif kw.arg in values:
                raise Fail(kw, "E262", f"{spec.name}: '{kw.arg}' given twice")
            elif kw.arg in params or any(i.name == kw.arg and i.optional for i in inputs):
                values[kw.arg] = (kw.value, self.visit(kw.value, d))
            else:
                known = [p.name for p in spec.params] + [i.name for i in inputs if i.optional]
                raise Fail(kw, "E262", f"{spec.name}: unknown keyword '{kw.arg}' "
                                       f"(known: {', '.join(known + ['reduction']) })")
        for name, (a, (e, t)) in values.items():
            if name in params:
                p = params[name]
                if t.axes or t.literal or (t.dtype == "bool") != (p.kind == "bool"):
                    raise Fail(a, "E262", f"{spec.name}: param '{name}' needs a {p.kind} scalar")
                if p.kind == "int" and e.is_Number and not e.is_integer:
                    raise Fail(a, "E262", f"{spec.name}: param '{name}' needs an integer")
                if e.is_Number and not p.admits(float(e)):
                    raise Fail(a, "E262", f"{spec.name}: param '{name}' = {e} is outside its bounds "
                                             f"({' and '.join(p.bound_words())})")
        return values, reduction

    def _unify(self, node, prog, values):
        """The substitution of the callee's inputs and params and the map of its axes."""
        spec = prog.spec
        axes: dict[str, tuple[str, ...]] = {}
        sub: dict = {}
        order = sorted(spec.inputs, key=lambda i: bool(i.broadcast))
        for inp in order:
            sym = prog.symbols[inp.name]
            if inp.name not in values:
                sub[sym] = sp.Integer(int(inp.default)) if float(inp.default).is_integer() else sp.Float(inp.default)
                continue
            a, (e, t) = values[inp.name]
            if inp.dtype == "float":
                self.need_value(a, t)
            elif t.dtype != "int":
                raise Fail(a, "E264", f"{spec.name}: input '{inp.name}' needs an integer argument")
            sub[sym] = e
            if inp.broadcast and all(any(x in v for v in axes.values()) for x in t.axes):
                continue
            got = _match(inp.shape, t.axes)
            if got is None:
                raise Fail(a, "E264", f"{spec.name}: input '{inp.name}' has shape [{', '.join(inp.shape)}], "
                                      f"the argument has axes [{', '.join(t.axes)}]")
            for k, v in got.items():
                if axes.setdefault(k, v) != v:
                    raise Fail(a, "E264", f"{spec.name}: axis {k} of input '{inp.name}' is "
                                          f"[{', '.join(v)}] here but [{', '.join(axes[k])}] before")
            if inp.domain.hi in axes and inp.dtype == "int" and t.index_of not in axes[inp.domain.hi]:
                raise Fail(a, "E264", f"{spec.name}: input '{inp.name}' indexes axis {inp.domain.hi}, "
                                      f"the argument is no index of [{', '.join(axes[inp.domain.hi])}]")
        for k, n in spec.sizes.items():  # an axis of a fixed size is the caller's axis of that size
            if k in axes and axes[k] and [self.spec.sizes.get(x) for x in axes[k]] != [n]:
                raise Fail(node, "E264", f"{spec.name}: its axis {k} has the fixed size {n}; the caller's "
                                         f"[{', '.join(axes[k])}] must be one axis declared {axes[k][0]}={n}")
        taken = [x for v in axes.values() for x in v]
        if len(taken) != len(set(taken)):
            raise Fail(node, "E264", f"{spec.name}: two of its axes are the same axis of the caller")
        for p in spec.params:
            got = values.get(p.name)
            sub[prog.symbols[p.name]] = got[1][0] if got else (
                sp.true if p.default is True else sp.false if p.default is False else sp.sympify(p.default))
        return sub, axes

    def _retype(self, expr) -> TType:
        from .parse import Program, type_of
        scratch = Program(self.spec, self.axes, self.variadic, {}, (), expr, {}, self.types)
        return type_of(expr, scratch)

    def _reduce(self, loss, den, reduction, per_element=False):
        """A reduction as lowering computes it: sum_all(loss) / sum_all(denominator broadcast
        to the loss) for a per-element denominator, also one that became a constant."""
        lt = self.types[loss]
        if reduction == "sum" or den is not None:
            total = _nest(ir.ReduceSum, loss, lt.axes)
        else:
            return _nest(ir.ReduceMean, loss, lt.axes)
        if den is None:
            return total
        dt = self._retype(den)
        if not dt.axes and not per_element:
            return total / den
        count = sp.Mul(*[ir.Size(sp.Symbol(a)) for a in lt.axes if a not in dt.axes])
        return total / (_nest(ir.ReduceSum, den, dt.axes) * count)


def _match(shape: tuple[str, ...], got: tuple[str, ...]) -> dict[str, tuple[str, ...]] | None:
    """The callee axes of `shape` as the caller axes `got`; None where the ranks differ."""
    var = [k for k, a in enumerate(shape) if a.startswith("*")]
    if not var:
        return {a: (g,) for a, g in zip(shape, got)} if len(shape) == len(got) else None
    k = var[0]
    after = len(shape) - k - 1
    if len(got) < len(shape) - 1:
        return None
    out = {a: (g,) for a, g in zip(shape[:k], got[:k])}
    out[shape[k][1:]] = tuple(got[k:len(got) - after])
    out.update({a: (g,) for a, g in zip(shape[k + 1:], got[len(got) - after:])})
    return out


def _nest(op, x, axes):
    for a in reversed(axes):
        x = op(x, sp.Symbol(a))
    return x


def _remap(expr, sub: dict, axes: dict[str, tuple[str, ...]], node):
    """`expr` of the callee in the caller's symbols and axes."""
    memo: dict = {}

    def walk(e):
        got = memo.get(e)
        if got is not None:
            return got
        if e in sub:
            out = sub[e]
        elif isinstance(e, sp.Symbol):
            if e.name not in axes or len(axes[e.name]) != 1:
                raise Fail(node, "E264", f"the called spec's axis {e.name} has no single axis in the caller")
            out = sp.Symbol(axes[e.name][0])
        elif not e.args:
            out = e
        else:
            axis = e.args[-1] if isinstance(e, ir.TensorOp) and isinstance(e.args[-1], sp.Symbol) \
                and e.args[-1] not in sub else None
            many = axes.get(axis.name) if axis is not None else None
            if many is not None and len(many) != 1:
                rule = getattr(functions.of_node(e), "rule", "")
                if isinstance(e, ir.Size):
                    out = sp.Mul(*[ir.Size(sp.Symbol(a)) for a in many])
                elif rule == "reduce":
                    out = _nest(e.func, walk(e.args[0]), many)
                else:
                    raise Fail(node, "E264", f"the called spec's {type(e).__name__} over axis {axis.name} "
                                             f"needs one axis, the caller gives [{', '.join(many)}]")
            else:
                args = [walk(a) for a in e.args]
                out = e.func(*args)  # of an omitted input's default, the IR folds a constant
        memo[e] = out
        return out

    return walk(expr)
