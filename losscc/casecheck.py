"""Validation of case data (the spec's ``cases:`` and case/reference files) against the spec.

Case data is untrusted: before anything evaluates it, every tensor must be a
rectangular nested list of finite numbers whose rank and axis sizes fit the input's
declared shape (one size per shape symbol across all inputs), int inputs must hold
integers inside their domain (or the ``ignore`` value), and parameters must have the
parameter's kind and lie within its bounds.  The functions here are pure Python and
return messages; the callers attach positions and codes.
"""

from __future__ import annotations

import ast
import math
from functools import lru_cache
from typing import Any

from . import limits


class CaseProblem(ValueError):
    """A case does not fit the spec; the message says which value and why."""


def nested_shape(v: Any, where: str, depth: int = 0) -> tuple[int, ...]:
    """The shape of a rectangular nested list of finite numbers, else CaseProblem."""
    if depth > limits.MAX_RANK:
        raise CaseProblem(f"{where}: nested more deeply than the limit 'rank' ({limits.MAX_RANK})")
    if isinstance(v, list):
        if not v:
            return (0,)
        shapes = {nested_shape(x, where, depth + 1) for x in v}
        if len(shapes) != 1:
            raise CaseProblem(f"{where}: ragged data (rows of different lengths or depths)")
        return (len(v),) + shapes.pop()
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise CaseProblem(f"{where}: expected numbers or nested lists of numbers, got {type(v).__name__}")
    if isinstance(v, float) and not math.isfinite(v):
        raise CaseProblem(f"{where}: numbers must be finite")
    return ()


def count_numbers(v: Any) -> int:
    """How many leaves a nested structure of lists and dicts holds (bounds what is read next)."""
    if isinstance(v, list):
        return sum(count_numbers(x) for x in v)
    if isinstance(v, dict):
        return sum(count_numbers(x) for x in v.values())
    return 1


def flat(v: Any) -> list:
    if isinstance(v, list):
        return [y for x in v for y in flat(x)]
    return [v]


def _bind(sizes: dict, inp, shape: tuple[int, ...], where: str) -> None:
    """Record the sizes of inp's axis symbols from `shape`, checking the ones already known."""
    fixed = [a for a in inp.shape if not a.startswith("*")]
    variadic = len(fixed) != len(inp.shape)
    if inp.broadcast:
        if len(shape) > len(inp.shape) and not variadic:
            raise CaseProblem(f"{where}: rank {len(shape)} is more than the declared {list(inp.shape)}")
        return
    if (len(shape) < len(fixed)) if variadic else (len(shape) != len(fixed)):
        raise CaseProblem(f"{where}: shape {list(shape)} does not fit the declared shape {list(inp.shape)}")
    nvar = len(shape) - len(fixed)
    k = 0
    for a in inp.shape:
        n = nvar if a.startswith("*") else 1
        got = tuple(shape[k:k + n])
        k += n
        key = a.lstrip("*")
        if key in sizes and sizes[key][0] != got:
            first, other = sizes[key]
            raise CaseProblem(f"{where}: axis {a} has size {_sz(got)} here but {_sz(first)} in {other}")
        sizes.setdefault(key, (got, where))


def _sz(t: tuple[int, ...]) -> str:
    return str(t[0]) if len(t) == 1 else str(list(t))


def check_inputs(spec, inputs: dict, params: dict, prefix: str, skip: frozenset = frozenset()) -> dict:
    """Check `inputs` (name -> nested list, number or None) against the spec; return the
    axis sizes {symbol: tuple}.  `params` holds the case's parameter values; inputs named
    in `skip` are filled in later (a scalar for every entry)."""
    sizes: dict = {a: ((n,), "the spec's shape") for a, n in spec.sizes.items()}
    for inp in spec.inputs:
        if inp.name in skip:
            continue
        v = inputs.get(inp.name)
        where = f"{prefix}.{inp.name}"
        if v is None:
            if not inp.optional:
                raise CaseProblem(f"{where}: missing (only an optional input may be left out or null)")
            continue
        shape = nested_shape(v, where)
        _bind(sizes, inp, shape, where)
    for inp in spec.inputs:
        v = inputs.get(inp.name)
        if v is None:
            continue
        _check_domain(inp, flat(v), sizes, params, spec, f"{prefix}.{inp.name}")
    return {k: s for k, (s, _) in sizes.items()}


def _check_domain(inp, values: list, sizes: dict, params: dict, spec, where: str) -> None:
    d = inp.domain
    allowed = None
    if inp.ignore:
        allowed = params.get(inp.ignore, spec.param(inp.ignore).default)
    if inp.dtype == "int":
        for x in values:
            if isinstance(x, float) and not x.is_integer():
                raise CaseProblem(f"{where}: {x!r} is not an integer (the input's dtype is int)")
    for x in values:
        if allowed is not None and x == allowed:
            continue
        if d.is_set:
            if x not in d.values:
                raise CaseProblem(f"{where}: {x!r} is outside the domain {d.text}")
            continue
        if inp.dtype != "int":
            continue  # float intervals: hand-written cases may sit on or near the ends
        lo, hi = d.lo, d.hi
        if isinstance(lo, str):
            lo = sizes.get(lo, ((None,), ""))[0][0]
        if isinstance(hi, str):
            hi = sizes.get(hi, ((None,), ""))[0][0]
        below = lo is not None and (x < lo or (x == lo and not d.lo_closed))
        above = hi is not None and (x > hi or (x == hi and not d.hi_closed))
        if below or above:
            raise CaseProblem(f"{where}: {x!r} is outside the domain {d.text}"
                              + (f" (with {d.hi} = {hi})" if isinstance(d.hi, str) and hi is not None else ""))


def check_param(p, v: Any, where: str) -> None:
    """A case's value for parameter p: its kind, finite, within p's bounds."""
    if p.kind == "bool":
        if not isinstance(v, bool):
            raise CaseProblem(f"{where}: expected true or false for the boolean parameter '{p.name}'")
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise CaseProblem(f"{where}: expected a number for the parameter '{p.name}', got {type(v).__name__}")
    if p.kind == "int" and not (isinstance(v, int) or (isinstance(v, float) and v.is_integer())):
        raise CaseProblem(f"{where}: expected an integer for the int parameter '{p.name}'")
    if p.kind == "int" and not -2**63 <= v < 2**63:  # as a default must (E113): no framework takes more
        raise CaseProblem(f"{where}: an int parameter must fit in int64")
    if not math.isfinite(v):
        raise CaseProblem(f"{where}: must be finite")
    if not p.admits(v):
        raise CaseProblem(f"{where}: {v!r} is outside the bounds of '{p.name}' ({' and '.join(p.bound_words())})")


def check_expected(name: str, v: Any, where: str) -> None:
    """An expected value: a finite number, or (for per-element reductions) a rectangular list."""
    nested_shape(v, f"{where}.{name}")


REFERENCE_BASE_DPS = 40


def reference_digits(magnitude: float, exponential: bool = True) -> int:
    """Working digits the reference evaluator needs for inputs up to `magnitude`.  Where the
    formula has an exponential function (the registry's `exponential`), enough that
    exp(-|x|) still counts next to 1 (1 - sigmoid(1000) must not cancel to 0): |x| / 2.3
    more; elsewhere a difference of two terms of size |x| (x**2 - (x - 1)**2, lgamma(x + y)
    - lgamma(x)) loses log10 |x| digits: 1.3 log10 |x| more."""
    if exponential:
        return int(REFERENCE_BASE_DPS + min(magnitude, 1e6) / 2.3)
    return int(REFERENCE_BASE_DPS + 1.3 * math.log10(max(magnitude, 1.0)))


def _numeric(node) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def _fixed_exponent(node, params: frozenset[str]) -> bool:
    """An exponent made of numbers and hyperparameters by arithmetic alone (`alpha / 2`,
    `1 / (1 - t)`): a constant for the reference, as a bare number or parameter is."""
    if _numeric(node) or (isinstance(node, ast.Name) and node.id in params):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _fixed_exponent(node.operand, params)
    return isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)) \
        and _fixed_exponent(node.left, params) and _fixed_exponent(node.right, params)


def _names(node) -> set[str]:
    return {m.id for m in ast.walk(node) if isinstance(m, ast.Name)}


@lru_cache(maxsize=256)
def _powers(texts: tuple[str, ...], params: frozenset[str]) -> tuple[bool, frozenset[str], tuple | None]:
    """One walk of the formula texts' syntax trees: whether an exponential function may see
    the inputs, the hyperparameters that are exponents (``b ** p``), and per text the names
    it reads and the names an exponential function's arguments read (None: a text that does
    not parse, where every name counts)."""
    from .functions import BY_NAME

    exp, found, reads = False, set(), []
    for text in texts:
        try:
            tree = ast.parse("(" + text + "\n)", mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            exp, reads = True, None  # the parser reports it; no cheaper rule is known to hold
            continue
        seen = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.Call):
                records = BY_NAME.get(n.func.id) if isinstance(n.func, ast.Name) else None
                if records is None or any(f.exponential for f in records):  # or another spec's formula
                    exp = True
                    seen |= set().union(*(_names(a) for a in n.args + [k.value for k in n.keywords]))
            elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) and not _numeric(n.right):
                if _fixed_exponent(n.right, params):  # its hyperparameters count for exponent_digits
                    found |= {m.id for m in ast.walk(n.right) if isinstance(m, ast.Name) and m.id in params}
                else:
                    exp = True  # b ** u = exp(u log b) for u computed from inputs
                    seen |= _names(n)
        if reads is not None:
            reads.append((frozenset(_names(tree)), frozenset(seen)))
    return exp, frozenset(found), None if reads is None else tuple(reads)


def _analysis(spec) -> tuple[bool, frozenset[str], tuple | None]:
    texts = [b.text for b in spec.bindings]
    texts += [r.denominator.text for r in getattr(spec, "reductions", ()) if r.denominator is not None]
    return _powers(tuple(texts), frozenset(p.name for p in spec.params))


def exponential_names(spec) -> frozenset[str] | None:
    """The names whose values an exponential function may see: those its arguments read and,
    through the bindings, every name they are computed from (a count that only meets lgamma
    is not among them, a rate inside exp is); None where every name may (a text that does
    not parse)."""
    reads = _analysis(spec)[2]
    if reads is None:
        return None
    seen = set().union(*(s for _, s in reads)) if reads else set()
    deps: dict[str, set] = {}
    for b, (names, _) in zip(spec.bindings, reads):
        deps.setdefault(b.name, set()).update(names)
    frontier = list(seen)
    while frontier:
        for m in deps.get(frontier.pop(), ()):
            if m not in seen:
                seen.add(m)
                frontier.append(m)
    return frozenset(seen)


def case_digits(spec, values: dict) -> int:
    """reference_digits for a case's inputs (and learnables), `values`: name -> magnitude:
    the exponential rule for the largest input an exponential function may see, the other
    for the largest of all (`spec` None: the exponential rule for every input)."""
    big = max(values.values(), default=0.0)
    if spec is None:
        return reference_digits(big, True)
    if not exponential(spec):
        return reference_digits(big, False)
    names = exponential_names(spec)
    near_exp = max((v for k, v in values.items() if names is None or k in names), default=0.0)
    return max(reference_digits(near_exp, True), reference_digits(big, False))


def exponent_digits(spec, params: dict) -> int:
    """Digits more for the hyperparameters that are exponents (b ** p) of `spec` at `params`:
    b's rounding error grows |p| times ((1 + x) ** p at x = 1e-45, p = 1e45 is e, and was 1
    at 40 digits: verify passed the float's 1).  None below |p| = 1e3."""
    big = 1.0
    for n in _analysis(spec)[1]:
        v = params.get(n)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v)):
            big = max(big, abs(float(v)))
    return math.ceil(math.log10(big)) if big > 1e3 else 0  # the base digits hold small exponents


def exponential(spec) -> bool:
    """Whether `spec`'s formula (its bindings and reduction denominators) may take an
    exponential function of its inputs, for :func:`reference_digits`."""
    return _analysis(spec)[0]


def check_reference_cost(spec, inputs: dict, needs_gradients: bool) -> None:
    """A case the reference evaluator must compute: its precision and its size are bounded
    ('reference_dps'; 'reference_grad_elements' where the gradients come from it: each
    entry costs two evaluations of the whole case)."""
    sizes = {k: max((abs(x) for x in flat(v)), default=0.0) for k, v in inputs.items() if v is not None}
    big = max(sizes.values(), default=0.0)
    need = case_digits(spec, sizes)
    if need > limits.MAX_REFERENCE_DPS:
        raise CaseProblem(f"an input of magnitude {big:.6g} needs {need} digits in the reference evaluator, "
                          f"above the limit 'reference_dps' ({limits.MAX_REFERENCE_DPS})")
    if needs_gradients:
        n = sum(len(flat(inputs[i.name])) for i in spec.inputs
                if i.dtype == "float" and not i.optional and inputs.get(i.name) is not None)
        if n > limits.MAX_REFERENCE_GRAD_ELEMENTS:
            raise CaseProblem(f"{n} input entries need reference gradients, above the limit "
                              f"'reference_grad_elements' ({limits.MAX_REFERENCE_GRAD_ELEMENTS}); "
                              "give the case's gradients or make it smaller")
