"""Drawn verification cases: random inputs from each input's declared domain, and extreme
ones where hand-written losses overflow, cancel or lose their gradient.

Draws use seeded generators, so a run is reproducible; their expectations come from the
reference evaluator.
"""

from __future__ import annotations

import numpy as np

from . import bounded
from .casedata import CaseData
from .spec import Input, Spec

# --------------------------------------------------------------------------- random


def random_cases(spec: Spec, count: int, seed: int) -> list[CaseData]:
    """`count` draws: sizes 2 to 4 (a variadic group of rank 1 or 2), inputs from their
    domains (an optional input left out in every other draw), parameters at their defaults
    in the first draw and varied after, about 30% of positions ignored where an input says."""
    return [_random_case(spec, k, seed) for k in range(count)]


def _random_case(spec: Spec, k: int, seed: int) -> CaseData:
    rng = np.random.default_rng([seed, k, len(spec.name)] + [ord(c) for c in spec.name])
    sizes = _random_sizes(spec, k, rng)
    inputs = {inp.name: _random_input(inp, k, rng, sizes) for inp in spec.inputs}
    params = _varied_params(spec, k)
    for inp in spec.inputs:
        if inp.ignore and inputs.get(inp.name) is not None:
            arr = inputs[inp.name]
            mask = rng.random(arr.shape) < 0.3
            mask.reshape(-1)[0] = False  # at least one position counts
            arr[mask] = params[inp.ignore]
    learn = {lr.name: np.round(rng.normal(0.0, 0.5, size=lr.shape), 3) for lr in spec.learnable}
    return CaseData(f"random{k}", "random", inputs, params, learn, from_reference=True)


def _random_sizes(spec: Spec, k: int, rng: np.random.Generator) -> dict[str, tuple[int, ...]]:
    sizes: dict[str, tuple[int, ...]] = {}
    for inp in spec.inputs:
        for a in inp.shape:
            if a.lstrip("*") not in sizes:
                if a.startswith("*"):
                    rank = 1 + (k % 2)
                    sizes[a.lstrip("*")] = tuple(int(rng.integers(2, 5)) for _ in range(rank))
                else:
                    sizes[a] = (spec.sizes[a],) if a in spec.sizes else (int(rng.integers(2, 5)),)
    return sizes


def _random_input(inp: Input, k: int, rng: np.random.Generator, sizes: dict) -> np.ndarray | None:
    shape = tuple(n for a in inp.shape for n in sizes[a.lstrip("*")])
    if inp.optional:
        return None if k % 2 == 0 else np.round(rng.uniform(0.5, 2.0, size=shape), 3)
    return draw(inp, shape, rng, sizes)


def draw(inp: Input, shape, rng: np.random.Generator, sizes) -> np.ndarray:
    """Values from `inp`'s domain: a set's members, uniform in an interval (floats 2% off its
    ends), a bound plus a log-normal draw where only one is given, else normal(0, 1.5)."""
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


def _varied_params(spec: Spec, k: int) -> dict:
    params = {}
    for p in spec.params:
        if k == 0:
            params[p.name] = p.default
        elif p.kind == "bool":
            params[p.name] = bool((k % 2) ^ int(p.default))
        elif p.kind == "int":  # one up in odd cases, one down in even ones, within the bounds
            step = 1 if k % 2 else -1
            params[p.name] = next(int(v) for v in (p.default + step, p.default - step, p.default) if p.admits(v))
        else:
            v = p.default + (0.5 if k % 2 else 0.25)
            if not p.admits(v):  # past the upper bound: on it, or halfway to a strict one
                v = (p.default + p.max) / 2 if p.max_open else p.max
            params[p.name] = float(v)
    return params


# --------------------------------------------------------------------------- extreme

EXTREME_SCALES = (1e-4, 1e2, 1e4, 1e18)  # 1e18: squares still fit in float32; 1e-4: 1 + x**2 rounds to 1
LARGE_TOGETHER = 1e6  # counts of single-cell data; float32 holds integers exactly up to 1.6e7
TINY_DIFFERENCES = (1e-8, 1e-4, 1e-20)   # 1e-8 relative to entries of size 1; 1e-4 and 1e-20 from 0


def extreme_cases(spec: Spec, seed: int = 0) -> list[CaseData]:
    """Inputs where hand-written losses overflow, cancel or lose their gradient.

    Per float input with an unbounded domain: entries of magnitude 1e2, 1e4 and 1e18 (the
    others stay ordinary); probabilities exactly 0 and 1 where the domain is closed there;
    values 1e-30 or 1e-7 relative inside the ends of an interval open at either end; tiny
    (1e-30) and huge (1e30) values where the domain is (0, inf) or [0, inf), and every such
    input 1e6 times its draw at once (counts at their mean, where lgamma terms cancel); entries of
    1e-4 where it is unbounded (float32 holds them and their squares, but 1 + x**2 is 1).  Per
    pair of same-shaped real inputs a, b: equal (difference exactly 0), one ulp apart, and
    differences of 1e-8, 1e-4 and 1e-20 (b = a + 1e-8 on entries of size 1; a = +-1e-4 or
    +-1e-20, b = 0), where a loss of the difference must keep its relative accuracy
    (log(cosh(d)) ~ d**2 / 2, sqrt(1 + d**2) - 1 ~ d**2 / 2; 1e-4 is the one float32 can tell).  Per pair of
    same-shaped float inputs of continuous domains: a relative difference of 1e-8 at ordinary
    values of both.  Per real input with a last axis: rows of near-equal entries (a few float32
    ulps apart).  Per comparison, clip bound and max/min of the formula whose sides depend
    elementwise on the inputs: a draw that puts half the entries exactly on the boundary
    (ties), and one with those entries a few float32 ulps above and below it."""
    base = random_cases(spec, 1, seed + 1000)[0]
    base.params = {p.name: p.default for p in spec.params}
    floats = [i for i in spec.inputs if i.dtype == "float" and not i.optional and base.inputs.get(i.name) is not None]
    variants = []
    for inp in floats:
        variants += _input_extremes(inp, base.inputs[inp.name], seed)
    counts = [i for i in floats if not i.domain.is_set and i.domain.lo == 0.0 and i.domain.hi is None]
    if counts:  # every half-bounded input large at once: a count at its mean (lgamma(y + theta) - lgamma(theta))
        variants.append(("large_together", {i.name: base.inputs[i.name] * LARGE_TOGETHER for i in counts}))
    real = [i for i in floats if not i.domain.is_set and i.domain.lo is None and i.domain.hi is None]
    for a, b in zip(real, real[1:]):
        if base.inputs[a.name].shape == base.inputs[b.name].shape:
            variants += _pair_extremes(a.name, b.name, base.inputs[a.name], seed)
    cont = [i for i in floats if not i.domain.is_set]
    for k, a in enumerate(cont):
        for b in cont[k + 1:]:
            if base.inputs[a.name].shape == base.inputs[b.name].shape:
                variants += _relative_near(a, b, base)
    for inp in real:
        if base.inputs[inp.name].ndim and base.inputs[inp.name].shape[-1] > 1:
            variants.append(_near_tied_row(inp, base.inputs[inp.name]))
    variants += _boundary_variants(spec, base, floats)
    for lr in spec.learnable:  # a learnable scale or table, as large and as small as an input
        variants += _learnable_extremes(lr.name, base.learnable[lr.name], seed)
    return [_variant(base, tag, changes) for tag, changes in variants]


# a learnable's magnitudes: 3 and 10 make a learnable logit scale (exp(3) = 20, or 10 itself)
# confident where a log-softmax difference cancels, not so confident that the loss is below
# the dtype; 100 would put exp(-100) beside elements of 1e43 (a log-variance), a derivative
# the reference's differences do not resolve (they read 0) without refining every zero entry
LEARNABLE_SCALES = (1e-4, 3.0, 1e1)


def _learnable_extremes(name: str, v: np.ndarray, seed: int) -> list[tuple[str, dict]]:
    """A learnable tensor at magnitudes LEARNABLE_SCALES, its signs drawn and flipped: drawn near 0
    otherwise, a learnable logit scale was never tried where it makes a batch confident
    (CLIP's loss lost every digit at a scale of 20 and passed; fresh-loss trial 15)."""
    rng = np.random.default_rng([seed, len(name), 7])
    sign = np.where(rng.random(np.shape(v)) < 0.5, -1.0, 1.0)
    size = np.abs(np.round(rng.uniform(0.5, 1.0, np.shape(v)), 3))
    # each scale with the signs drawn and with them flipped: a scalar takes both
    return [(f"{name}_{s:.0e}{'' if flip > 0 else '_flipped'}", {name: flip * sign * s * size})
            for s in LEARNABLE_SCALES for flip in (1.0, -1.0)]


def _variant(base: CaseData, tag: str, changes: dict) -> CaseData:
    inputs = {k: (None if v is None else v.copy()) for k, v in base.inputs.items()}
    learnable = dict(base.learnable)
    for k, v in changes.items():
        (learnable if k in learnable else inputs)[k] = v
    return CaseData(f"extreme_{tag}", "extreme", inputs, dict(base.params), learnable, from_reference=True)


def _input_extremes(inp: Input, v: np.ndarray, seed: int) -> list[tuple[str, dict]]:
    """Large magnitudes, a closed interval's ends, and tiny, huge or zero positive values."""
    d = inp.domain
    out = []
    rng = np.random.default_rng([seed, len(inp.name)])
    sign = np.where(rng.random(v.shape) < 0.5, -1.0, 1.0)
    if not d.is_set and d.lo is None and d.hi is None:
        for s in EXTREME_SCALES:
            big = sign * s * np.abs(np.round(rng.uniform(0.5, 1.0, v.shape), 3))
            out.append((f"{inp.name}_{s:.0e}", {inp.name: big}))
    if isinstance(d.lo, float) and d.lo_closed and isinstance(d.hi, float) and d.hi_closed:
        out.append((f"{inp.name}_ends", {inp.name: np.where(rng.random(v.shape) < 0.5, d.lo, d.hi)}))
    if isinstance(d.lo, float) and isinstance(d.hi, float) and not (d.lo_closed and d.hi_closed):
        # an open end: as close to it as float32 tells apart (p = 1 - 1e-7 makes 1 - p cancel)
        near_lo = d.lo + (1e-30 if d.lo == 0 else 1e-7 * max(1.0, abs(d.lo)))
        near_hi = d.hi - (1e-30 if d.hi == 0 else 1e-7 * max(1.0, abs(d.hi)))
        out.append((f"{inp.name}_near_ends", {inp.name: np.where(rng.random(v.shape) < 0.5, near_lo, near_hi)}))
    if d.lo == 0.0 and d.hi is None:
        out.append((f"{inp.name}_tiny", {inp.name: np.full(v.shape, 1e-30)}))
        out.append((f"{inp.name}_huge", {inp.name: np.full(v.shape, 1e30)}))
        if d.lo_closed:
            out.append((f"{inp.name}_zero", {inp.name: np.zeros(v.shape)}))
    return out


def _pair_extremes(a: str, b: str, va: np.ndarray, seed: int) -> list[tuple[str, dict]]:
    """Two same-shaped real inputs equal, one ulp apart, and a tiny difference apart."""
    out = [(f"{a}_eq_{b}", {b: va.copy()}), (f"{a}_ulp_{b}", {b: np.nextafter(va, np.inf)})]
    rng = np.random.default_rng([seed, len(a), len(b)])
    sign = np.where(rng.random(va.shape) < 0.5, -1.0, 1.0)
    unit = sign * np.round(rng.uniform(0.5, 1.0, va.shape), 3)
    for dd in TINY_DIFFERENCES:
        if dd == 1e-8:
            out.append((f"{a}_near_{b}_{dd:.0e}", {a: unit, b: unit + sign * dd}))
        else:
            out.append((f"{a}_near_{b}_{dd:.0e}", {a: unit * dd, b: np.zeros(va.shape)}))
    return out


NEAR_RELATIVE = 1e-8  # a relative difference float32 cannot hold: the pair rounds to equal or one ulp
NEAR_ULPS = 64        # float32 ulps off a tie: either side of a kink, beyond a few ulps of rounding of its sides


def _inside(domain, v: np.ndarray) -> bool:
    lo = -np.inf if domain.lo is None else float(domain.lo)
    hi = np.inf if domain.hi is None else float(domain.hi)
    return bool(np.all((v > lo) & (v < hi)))


def _relative_near(a: Input, b: Input, base: CaseData) -> list[tuple[str, dict]]:
    """Two same-shaped inputs a relative 1e-8 apart at ordinary values of both domains (b's
    drawn values, a = b * (1 -+ 1e-8)): a loss of x - y (regression, a tied margin) must keep
    its relative accuracy on entries of any size, not only near 1."""
    vb = np.asarray(base.inputs[b.name], dtype=float)
    sign = np.where(np.arange(vb.size).reshape(vb.shape) % 2 == 0, 1.0, -1.0)
    va = vb * (1 - sign * NEAR_RELATIVE)
    if not (_inside(a.domain, va) and _inside(b.domain, vb)):
        return []
    return [(f"{a.name}_rel_{b.name}", {a.name: va, b.name: vb})]


def _near_tied_row(inp: Input, v: np.ndarray) -> tuple[str, dict]:
    """Every entry along the last axis within 64 float32 ulps of its row's first, 16 apart
    (near-equal logits: a softmax or max over the row is almost a tie)."""
    first = np.asarray(v, dtype=np.float32)[..., :1]
    steps = (np.arange(v.shape[-1]) % 9 - 4) * (NEAR_ULPS // 4)  # 16 ulps apart, up to 64
    out = np.broadcast_to(first, v.shape).astype(np.float32).copy()
    for k, n in enumerate(steps):
        for _ in range(abs(int(n))):
            out[..., k] = np.nextafter(out[..., k], np.float32(np.inf if n > 0 else -np.inf))
    return (f"{inp.name}_near_tie", {inp.name: out.astype(float)})


def _ulps32(v: float, n: int) -> float:
    """v moved n float32 ulps (up for n > 0), as a float64; from 0, n times 4 smallest normals
    (n ulps of 0 are subnormal, which kernels flush to 0: back on the tie)."""
    tiny = float(np.finfo(np.float32).tiny)
    if abs(v) < tiny:
        return 4 * n * tiny
    t = np.float32(v)
    for _ in range(abs(n)):
        t = np.nextafter(t, np.float32(np.inf if n > 0 else -np.inf))
    return float(t)


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
        # every substitution is bounded: a tower of exp at a number asks mpmath for ln 2 to
        # astronomic precision (bounded.substitute stops past 1e300)
        f = bounded.substitute(lhs - rhs, fixed)
        if f is None or f.has(ir.TensorOp) or not f.free_symbols or not f.free_symbols <= set(names):
            continue
        xs = [s for s in sorted(f.free_symbols, key=str) if names[s] in floats and not names[s].domain.is_set]
        if not xs:
            continue
        x = xs[0]
        rep = {s: float(np.asarray(base.inputs[names[s].name], dtype=float).reshape(-1)[0])
               for s in f.free_symbols if s != x}
        g = bounded.substitute(f, {s: sp.Float(v, 30) for s, v in rep.items()})
        root = _bisect(g, x, names[x].domain) if g is not None else None
        if root is None or (x, root) in seen:
            continue
        seen.add((x, root))
        changes = {}
        for s, v in rep.items():
            changes[names[s].name] = np.full(base.inputs[names[s].name].shape, v)
        arr = np.asarray(base.inputs[names[x].name], dtype=float).copy()
        arr.reshape(-1)[::2] = root
        changes[names[x].name] = arr
        tag = f"{names[x].name}_tie{len(out)}"
        out.append((tag, changes))
        # and a few float32 ulps off the tie, alternately above and below: both sides of the kink
        near = arr.copy()
        near.reshape(-1)[::4] = _ulps32(root, NEAR_ULPS)
        near.reshape(-1)[2::4] = _ulps32(root, -NEAR_ULPS)
        if _inside(names[x].domain, near) or names[x].domain.lo is None and names[x].domain.hi is None:
            out.append((f"{tag}_near", {**changes, names[x].name: near}))
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
            v = bounded.substitute(g, {x: sp.Float(t, 30)})
            if v is None or not v.is_number:
                return None
            r = complex(v.evalf(30))
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
