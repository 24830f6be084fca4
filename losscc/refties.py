"""One-sided slopes at exact ties, for the conditions `losscc verify` allows (docs/verify.md).

The reference's gradient at a tie is the documented convention (half to each side of
max(a, b), the tensor's side against a bound, abs'(0) = 0): the mean of the gradients the
two sides have just off the tie, or one of them.  Code that follows the convention forms it
from chain-rule terms of those sides' size, which cancel (GIoU of two equal boxes: the
enclosing box's, the intersection's and the union's terms, each about 1 / height, sum to
1e-7), and an input moved by one ulp moves the loss by that side's slope, not the
convention's.  So where the unperturbed point has an exact tie of a continuous selection
(max/min, clip, abs, the maximum over an axis), each entry's slopes just off the point
(the gradient's own step, so that no other kink is crossed), with those selections made
afresh at the moved point, size two allowances: the gradient's floor takes the entry's
larger one-sided slope of the summed loss, and the value's S_i the sum over entries of
|x_j| times the larger one-sided slope of l_i alone (not of the sum: one sample's tie is
no allowance for another's value).  A condition of `where` or `Piecewise` stays as it was:
its branches may jump, and only the branch taken feeds the gradient.  The compared numbers
are still the convention's.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from .refarrays import to_mp

# relative step of the one-sided differences: as the gradient's (reference._H), so that only
# the tie at the point is crossed, not a kink or a steep stretch nearby (a 1e-5 step crossed
# a kink 1e-6 away and made its slope of 1e8 an allowance)
STEP = mpmath.mpf(10) ** -15


@dataclass(frozen=True)
class TieSlopes:
    """grads: name -> per entry, max(|right|, |left|) slope of the summed loss (the gradient's
    floor); condition: per loss element i (flat, as the 'none' value), sum over the entries j
    of non-set inputs and learnables of |x_j| * max(|right|, |left|) slope of l_i alone (the
    value's S_i: another sample's tie adds nothing to it)."""
    grads: dict
    condition: np.ndarray


def tie_slopes(prog, ev, inputs: dict, learnable: dict, at, names: list[str], max_dps, params,
               charge: bool = False) -> TieSlopes | None:
    """The one-sided slopes of every entry, continuous selections made afresh at the moved
    point; None where the unperturbed point (the evaluator's last unfrozen run) has no exact
    tie, or where the work limits do not allow two more runs an entry: 'reference_work' for
    the case and, with `charge` (a spec's own and its case files' cases),
    'condition_spec_work' for the allowances of the spec's cases together, as the gradient
    conditions (then no allowance: the stricter check).  No step leaves an input's declared
    interval."""
    from . import limits
    from .refdiff import _room
    from .reference import _COND_SPENT, _has_stop, reference_work

    if not ev.tied:
        return None
    entries = sum(np.size(learnable.get(n, inputs.get(n))) for n in names)
    work = reference_work(prog, inputs, learnable, 2 * entries, max_dps, params)
    # the case's limit holds for its gradient (two runs an entry, four with stop_gradient) and these together
    if reference_work(prog, inputs, learnable, 1 + 2 * entries * (3 if _has_stop(prog) else 2), max_dps,
                      params) > limits.MAX_REFERENCE_WORK:
        return None
    if charge and _COND_SPENT:
        if _COND_SPENT[-1] + work > limits.MAX_CONDITION_SPEC_WORK:
            return None
        _COND_SPENT[-1] += work
    f0 = np.asarray(at, dtype=object).reshape(-1)
    ok0 = np.array([bool(mpmath.isfinite(v)) for v in f0])
    exact_data = {i.name for i in prog.spec.inputs if i.domain.is_set}
    condition = np.zeros(len(f0))
    ev.free, ev.thaw = True, True  # the value's own movement: stop_gradient the identity too
    try:
        grads = {}
        for name in names:
            is_learn = name in learnable
            src = np.asarray(learnable[name] if is_learn else inputs[name], dtype=float)
            base = to_mp(src)
            slopes = np.zeros(src.shape)
            for k in np.ndindex(src.shape):
                x0 = base[k]
                h = STEP * max(1, abs(x0))
                r = None if is_learn else _room(prog, name, x0)
                if r is not None and 0 < r < 2 * h:
                    h = r / 2
                best, per = mpmath.mpf(0), np.zeros(len(f0))
                for sign in (1, -1):
                    pert = base.copy()
                    pert[k] = x0 + sign * h
                    if is_learn:
                        f = ev.run(learnable={**ev.learnable, name: pert}, freeze=True)["none"]
                    else:
                        f = ev.run(inputs={**inputs, name: pert}, freeze=True)["none"]
                    f = np.asarray(f, dtype=object).reshape(-1)
                    both = ok0 & np.array([bool(mpmath.isfinite(v)) for v in f])
                    moved = np.where(both, f - np.where(both, f0, 0), 0)
                    best = max(best, abs(mpmath.fsum(moved)) / h)
                    per = np.maximum(per, np.array([float(abs(m) / h) for m in moved]))
                slopes[k] = float(best)
                if name not in exact_data:
                    condition += abs(float(x0)) * per
            grads[name] = slopes
        return TieSlopes(grads, condition)
    finally:
        ev.free, ev.thaw = False, False
