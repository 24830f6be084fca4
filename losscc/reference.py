"""The reference evaluator: the spec's IR, as written, evaluated with mpmath.

It shares nothing with the lowering or the templates: it walks the *unrewritten*
IR (no stable rewrites, no guards) on concrete NumPy inputs, in object arrays of
``mpmath.mpf`` at :data:`DPS` significant digits, so that a wrong operator
mapping, a broken rewrite or a missing guard in the generated code shows up as a
mismatch.  Gradients are central differences at that precision, with every
selection (comparison, max/min, clip, abs, maximum over an axis) made at the
unperturbed point, so that at a tie the difference gives the documented one-sided
value (docs/spec.md, "Gradients at ties and kinks"); points where the left and
right differences still disagree (sqrt at 0: a true kink of a smooth operation) or
that the precision does not resolve are reported as kinks and left out of gradient
comparisons.

The walk is ``losscc.refeval`` (driven by the function registry), its arrays
``losscc.refarrays``; this module computes values and gradients of one case.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import mpmath
import numpy as np
import sympy as sp

from . import limits
from .casecheck import case_digits, exponent_digits
from .parse import Program
from .refarrays import Layout, infer_sizes, to_mp
from .refeval import Evaluator, ReferenceCost
from .refdiff import _H, Differences as _Differences, _room  # noqa: F401 (_H, _room: docplots, refties)
from .refties import tie_slopes

__all__ = ["DPS", "Evaluator", "Layout", "Reference", "digits_for", "gradient_condition", "infer_sizes", "reference"]

DPS = 40


def digits_for(inputs: dict, learnable: dict, spec=None, params: dict | None = None) -> int:
    """Working precision for the largest input magnitude: DPS digits, plus what
    casecheck.reference_digits asks for the spec's formula (all of it if `spec` is None:
    enough that exp(-|x|) still counts next to 1)."""
    sizes = {}
    for k, v in list(inputs.items()) + list(learnable.items()):
        a = None if v is None else np.asarray(v, dtype=float)
        if a is not None and a.size:
            sizes[k] = max(sizes.get(k, 0.0), float(np.max(np.abs(a))))
    more = exponent_digits(spec, params) if spec is not None and params else 0
    return case_digits(spec, sizes) + more




def reference_work(prog: Program, inputs: dict, learnable: dict, runs: int, max_dps: int | None = None,
                   params: dict | None = None) -> int:
    """The evaluator's work on a case: the elements it computes in one evaluation (each
    distinct node of the loss at its own axes: a pairwise node over N and M holds N * M)
    times `runs` evaluations times the cost of one operation at its working digits,
    dps**2 / 40 (measured: 500 digits cost 13x 83 digits per element, not 6x)."""
    dps = min(digits_for(inputs, learnable, prog.spec, params), max_dps or limits.MAX_REFERENCE_DPS)
    return dps * dps // 40 * _elements(prog, inputs) * runs


_CHEAP = (sp.Add, sp.Mul, sp.Max, sp.Min, sp.Piecewise, sp.Abs, sp.Rel, sp.Not, sp.And, sp.Or)
_RUN = 512  # one evaluation's own cost, in additions (measured on one-element cases)
_NODE = 64  # a node's own cost, whatever its size, in additions (measured on one-element cases)
_COSTLY = 12  # a transcendental function costs up to 12 additions (erf, log-gamma at 41 digits)


def _weight(e: sp.Expr) -> int:
    """What computing one element of node `e` costs, in additions."""
    if e.is_Atom:
        return 0
    if isinstance(e, _CHEAP) or e.is_Pow and e.exp.is_Integer:
        return 1
    return _COSTLY


def _elements(prog: Program, inputs: dict) -> int:
    """Elements the evaluator computes in one run on these inputs, in additions: each
    distinct node of the loss at the size of its own axes, weighted by its operation."""
    sizes = {a: math.prod(s) for a, s in infer_sizes(prog, inputs).items()}
    seen: set = set()
    stack = [prog.loss]
    total = _RUN
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        stack.extend(e.args)
        w = _weight(e)
        total += w and w * math.prod(sizes.get(a, 1) for a in prog.typeof(e).axes) + _NODE
    return total


_SPENT: list[int] = []  # the work of each open `spec_budget`, innermost last
_COND_SPENT: list[int] = []  # its gradient conditions' work


@contextmanager
def spec_budget():
    """Within it, the work of the references computed with `charge` (verify: the cases that
    the spec and its case files give, not the drawn ones, whose number the command line
    sets) adds up and is held to the limit 'reference_spec_work' (200 cases each just under
    'reference_work' took hours); their gradient conditions add up likewise, held to
    'condition_spec_work', past which they give no allowance (the stricter check)."""
    _SPENT.append(0)
    _COND_SPENT.append(0)
    try:
        yield
    finally:
        _SPENT.pop()
        _COND_SPENT.pop()


def check_work(prog: Program, inputs: dict, learnable: dict, runs: int, max_dps: int | None = None,
               charge: bool = False, params: dict | None = None) -> None:
    work = reference_work(prog, inputs, learnable, runs, max_dps, params)
    if work > limits.MAX_REFERENCE_WORK:
        raise ReferenceCost(f"the reference evaluator's work on it, {work:.3g} (the additions of one evaluation, each "
                            f"node at its own axes, x {runs} evaluations x digits**2 / 40), is above the limit 'reference_work' "
                            f"({limits.MAX_REFERENCE_WORK:.3g}); make the case smaller")
    if charge and _SPENT:
        _SPENT[-1] += work
        if _SPENT[-1] > limits.MAX_REFERENCE_SPEC_WORK:
            raise ReferenceCost(f"the reference evaluator's work on the spec's cases up to it, {_SPENT[-1]:.3g}, is above "
                                f"the limit 'reference_spec_work' ({limits.MAX_REFERENCE_SPEC_WORK:.3g}); "
                                "make the cases fewer or smaller")


@dataclass
class Reference:
    values: dict                  # reduction -> float64 array / float
    grads: dict                   # name -> float64 array of d(sum)/d(name)
    kinks: dict                   # name -> bool mask of non-differentiable points
    # d(sum)/d(name) with stop_gradient the identity, where the loss has one (None: `grads`):
    # the value's own derivative, for its condition (compare.sensitivity)
    value_grads: dict | None = None
    tie_slopes: object = None  # refties.TieSlopes where the point has an exact tie
    # the value's S_i per loss element (flat): sum of |x_j| |d l_i / d x_j| (stop_gradient thawed)
    condition: np.ndarray | None = None


def reference(prog: Program, inputs: dict, params: dict, learnable: dict | None = None,
              grad_of: list[str] | None = None, max_dps: int | None = None, near_tol: float = 0.0,
              overflow: float | None = None, charge: bool = False) -> Reference:
    """Values of every reduction and gradients of the summed loss, at DPS digits (more for
    large inputs, at most `max_dps`: the extreme-input suite caps it and compares only
    where the result is finite).  `near_tol`: a gradient entry that feeds a selection whose
    sides differ by at most that much relative (but are not equal) is a kink: the dtype's
    rounding may make it a tie, with its own convention, or swap the sides.  `overflow`: an
    entry that moves a per-element loss larger than that (infinite in the dtype) is a kink:
    no computation in the dtype has its gradient there (exp(v) / 2 at exp(v) = 5e38)."""
    learnable = learnable or {}
    dps = min(digits_for(inputs, learnable, prog.spec, params), max_dps or limits.MAX_REFERENCE_DPS)
    names = grad_of if grad_of is not None else [
        i.name for i in prog.spec.inputs if i.dtype == "float" and inputs.get(i.name) is not None
    ] + [lr.name for lr in prog.spec.learnable]
    entries = sum(np.size(learnable[n] if n in learnable else inputs[n]) for n in names)
    stops = _has_stop(prog)
    check_work(prog, inputs, learnable, 1 + 2 * entries * (2 if stops else 1), max_dps, charge, params)
    with mpmath.workdps(dps):
        ev = Evaluator(prog, inputs, params, learnable)
        ev.near_tol = near_tol
        base = ev.run()
        _drop_unfelt(ev, base["none"])
        with np.errstate(over="ignore", invalid="ignore"):  # beyond float64: inf; 0/0: nan
            values = {k: (np.array(v, dtype=object).astype(float) if isinstance(v, np.ndarray) else float(v))
                      for k, v in base.items()}
        grads, kinks = {}, {}
        diff = _Differences(ev, inputs, learnable, base["none"])
        diff.overflow = overflow
        fine = []  # entries whose rounding noise is not far below their own size
        for name in names:
            src = np.asarray(learnable[name] if name in learnable else inputs[name], dtype=float)
            g = np.zeros(src.shape)
            kink = np.zeros(src.shape, dtype=bool)
            for k in np.ndindex(src.shape):
                d, kink[k], res = diff.entry(name, k)
                g[k] = float(d) if kink[k] else _resolved(d, res)  # a kink's slope sizes its value's condition
                if not kink[k] and d != 0 and res > _RESOLVE * abs(d):
                    fine.append((name, k, res / abs(d)))
            grads[name] = g
            kinks[name] = kink
        value_grads, condition = _thawed(ev, inputs, learnable, base["none"], names) if stops else (None, diff.condition)
        ties = tie_slopes(prog, ev, inputs, learnable, base["none"], names, max_dps, params, charge)
    if fine:
        _refine(prog, inputs, params, learnable, grads, fine, dps)
    return Reference(values, grads, kinks, value_grads, ties, condition)



def _has_stop(prog: Program) -> bool:
    from .ir import StopGradient

    return any(e is not None and e.has(StopGradient) for e in (prog.loss, *prog.denominators.values()))


def _thawed(ev: Evaluator, inputs: dict, learnable: dict, at, names: list[str]) -> tuple[dict, np.ndarray]:
    """d(sum)/d(name) with each stop_gradient the identity: an element's value moves with
    its operands' rounding whatever the gradient says (`x - stop_gradient(max(x))` at the
    maximum is 0 for any x, and frozen it would seem to move with x)."""
    ev.thaw = True
    try:
        diff = _Differences(ev, inputs, learnable, at)
        out = {}
        for name in names:
            src = np.asarray(learnable[name] if name in learnable else inputs[name], dtype=float)
            g = np.zeros(src.shape)
            for k in np.ndindex(src.shape):
                d, _, res = diff.entry(name, k)
                g[k] = _resolved(d, res)
            out[name] = g
        return out, diff.condition
    finally:
        ev.thaw = False


def _drop_unfelt(ev: Evaluator, f0) -> None:
    """Stop watching the near ties of a selection whose output the loss does not feel there
    (`w * max(a, b)` at w = 0): which side the rounding picks cannot change any gradient, and
    watching it would make every entry a kink (a wrong gradient elsewhere passed)."""
    f0 = np.asarray(f0, dtype=object).reshape(-1)
    for key in list(ev.watch):
        ev.nudge = (key, mpmath.mpf(10) ** -(mpmath.mp.dps // 3))
        try:
            got = np.asarray(ev.run(freeze=True)["none"], dtype=object).reshape(-1)
        finally:
            ev.nudge = None
        if all(a == b or (mpmath.isnan(a) and mpmath.isnan(b)) for a, b in zip(got, f0)):
            del ev.watch[key]


_RESOLVE = mpmath.mpf(10) ** -16  # relative resolution a gradient entry must reach (float64 rtol 2.3e-13)


def _resolved(d, res) -> float:
    """A difference within its own rounding noise is 0: an entry whose exact derivative is 0
    (`-log_softmax(x)[y] + sum(one_hot(y) * log_softmax(x))`) leaves noise of its size at
    any precision (1e-92, then 1e-112 refined), which the per-element check would hold the
    code's exact 0 to."""
    return 0.0 if abs(d) <= res else float(d)


def _refine(prog, inputs, params, learnable, grads, fine, dps) -> None:
    """Entries much smaller than the loss (d/dtarget of BCE at logits of 1e-20: the
    per-element loss is 0.69, its change 1e-35) lose their digits in the differences'
    rounding: recompute them with as many more digits as their size asks, up to
    MAX_REFERENCE_DPS (beyond, the entry keeps its value)."""
    short = max(float(mpmath.log10(r)) for _, _, r in fine)
    more = min(dps + int(np.ceil(short)) + 20, limits.MAX_REFERENCE_DPS)
    runs = (1 + 2 * len(fine)) * _elements(prog, inputs)
    more = min(more, math.isqrt(limits.MAX_REFERENCE_WORK * 40 // max(1, runs)))  # the limit 'reference_work'
    if more <= dps:
        return
    try:
        with mpmath.workdps(more):
            diff = _Differences(Evaluator(prog, inputs, params, learnable), inputs, learnable)
            for name, k, _ in fine:
                d, kink, res = diff.entry(name, k)
                if not kink:
                    grads[name][k] = _resolved(d, res)
    except ReferenceCost:  # past 'reference_seconds': the entries not refined keep their values
        return


_EXACT_CONDITION = 48  # entries up to which gradient_condition forms the whole Hessian (2 n^2 runs)
CONDITION_WORK = 20 * limits.MAX_REFERENCE_WORK  # its work at most (the catalogue's largest Hessian: 3.3e10, 25 s)


def gradient_condition(prog: Program, inputs: dict, params: dict, learnable: dict | None, names: list[str],
                       probes: int = 4, max_dps: int | None = None, charge: bool = False) -> dict:
    """_gradient_condition, or no allowance (zeros: the stricter check) past 'reference_seconds'
    or, with `charge`, past 'condition_spec_work' (see spec_budget)."""
    try:
        return _gradient_condition(prog, inputs, params, learnable, names, probes, max_dps, charge)
    except ReferenceCost:
        return {m: np.zeros(np.shape((learnable or {}).get(m, inputs.get(m)))) for m in names}


def _gradient_condition(prog: Program, inputs: dict, params: dict, learnable: dict | None, names: list[str],
                        probes: int = 4, max_dps: int | None = None, charge: bool = False) -> dict:
    """The gradient's own condition, per entry: C_i = sum_j |x_j * dg_i/dx_j| (g the gradient
    of the summed loss, j over every entry of the inputs and learnables in `names`).  A
    gradient computed in a dtype of precision eps from its exact inputs is at best as
    accurate as g at inputs moved by eps relative, eps * C_i (backward stability), as the
    value's S_i is for values; at equal inputs of `1 - cos` g is 0 and C_i ~ 1/|x|.
    Up to _EXACT_CONDITION entries the whole Hessian is formed, from mixed central
    differences of the loss with the selections frozen at the unperturbed point (as for the
    gradient), at 30 more digits; beyond, each of `probes` probes gives
    |sum_j x_j H_ij r_j| <= C_i for a fixed random r in [-1, 1]^n, and the largest is
    returned (a lower bound).  Non-finite results count 0 (no allowance).  Held to
    CONDITION_WORK: the Hessian gives way to probes, and probes to fewer, where they would
    pass it; where one probe would, every C_i is 0 (no allowance: the stricter check)."""
    learnable = learnable or {}
    dps = min(digits_for(inputs, learnable, prog.spec, params), max_dps or limits.MAX_REFERENCE_DPS) + 30
    n = sum(np.size(learnable[m] if m in learnable else inputs[m]) for m in names)
    per_run = _elements(prog, inputs) * (dps * dps // 40)  # reference_work's unit
    exact = n <= _EXACT_CONDITION and 2 * n * (n + 1) * per_run <= CONDITION_WORK
    probes = min(probes, CONDITION_WORK // max(1, 4 * n * per_run))  # 4 runs per entry and probe
    if not exact and probes == 0:
        return {m: np.zeros(np.shape(learnable[m] if m in learnable else inputs[m])) for m in names}
    if charge and _COND_SPENT:
        _COND_SPENT[-1] += 2 * n * (n + 1) * per_run if exact else probes * 4 * n * per_run
        if _COND_SPENT[-1] > limits.MAX_CONDITION_SPEC_WORK:
            return {m: np.zeros(np.shape(learnable[m] if m in learnable else inputs[m])) for m in names}
    with mpmath.workdps(dps):
        ev = Evaluator(prog, inputs, params, learnable)
        ev.run()  # the selections at the unperturbed point
        base = {n: to_mp(np.asarray(learnable[n] if n in learnable else inputs[n], dtype=float)) for n in names}
        entries = [(n, k) for n in names for k in np.ndindex(base[n].shape)]
        steps = {e: _H * max(1, abs(base[e[0]][e[1]])) for e in entries}

        def loss_at(moves) -> np.ndarray:
            """The per-element loss with `moves` ({name: array of offsets}) added to the point."""
            cur_in, cur_l = dict(inputs), dict(ev.learnable)
            for n in names:
                (cur_l if n in learnable else cur_in)[n] = base[n] + moves[n] if n in moves else base[n]
            got = ev.run(inputs=cur_in, learnable=cur_l, freeze=True)["none"]
            return np.asarray(got, dtype=object).reshape(-1)

        def unit(e, size):
            d = np.zeros(base[e[0]].shape, dtype=object)
            d[e[1]] = size
            return d

        def second(e, move: dict, t) -> mpmath.mpf:
            """d/dx_e of the derivative along `move` (a dict of offsets of size t): a mixed difference."""
            acc = None
            for si, st in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
                offs = {n: st * a for n, a in move.items()}
                offs[e[0]] = offs.get(e[0], 0) + si * unit(e, steps[e])
                term = loss_at(offs) * (si * st)
                acc = term if acc is None else acc + term
            return mpmath.fsum(acc) / (4 * steps[e] * t)

        def finite(x) -> float:
            v = abs(float(x)) if mpmath.isfinite(x) else 0.0
            return v if np.isfinite(v) else 0.0

        out = {n: np.zeros(base[n].shape) for n in names}
        if exact:
            for a, ea in enumerate(entries):
                for eb in entries[a:]:
                    hab = second(ea, {eb[0]: unit(eb, steps[eb])}, steps[eb])  # H[ea, eb] = H[eb, ea]
                    out[ea[0]][ea[1]] += finite(base[eb[0]][eb[1]] * hab)
                    if eb != ea:
                        out[eb[0]][eb[1]] += finite(base[ea[0]][ea[1]] * hab)
            return out
        rng = np.random.default_rng(0)
        for _ in range(probes):
            move = {n: _H * base[n] * to_mp(rng.uniform(-1.0, 1.0, size=base[n].shape)) for n in names}
            for e in entries:
                out[e[0]][e[1]] = max(out[e[0]][e[1]], finite(second(e, move, _H)))
        return out
