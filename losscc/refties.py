"""One-sided slopes at ties, for the conditions `losscc verify` allows (docs/verify.md).

The reference's gradient at a tie is the documented convention (half to each side of
max(a, b), the tensor's side against a bound, abs'(0) = 0): the mean of the gradients the
two sides have just off the tie, or one of them.  Code that follows the convention forms it
from chain-rule terms of those sides' size, which cancel (GIoU of two equal boxes: the
enclosing box's, the intersection's and the union's terms, each about 1 / height, sum to
1e-7), and an input moved by one ulp moves the loss by that side's slope, not the
convention's.  So where the unperturbed point has a tie of a continuous selection (max/min,
clip, abs, the maximum over an axis), exact or within verify's near-tie tolerance, each
entry's slopes just off it, with those selections made afresh at the moved point, bound the
entry's condition (a condition of `where` or `Piecewise` stays as it was: its branches may
jump, and only the branch taken feeds the gradient, so a jump is no rounding's size): the value's S_i and the gradient's floor take
max(|right|, |left|) as well as the convention's gradient.  They size allowances only: the
gradient compared is still the convention's.
"""

from __future__ import annotations

import mpmath
import numpy as np

from .refarrays import to_mp

# relative step past a near tie: the reference watches sides within 16 ulps of float32
# (verify.NEAR_ULPS), about 2e-6 relative; a one-sided difference of that step is the
# slope of the side it lands on to within the step (a size for an allowance, not a gradient)
STEP = mpmath.mpf(10) ** -5


def tie_slopes(prog, ev, inputs: dict, learnable: dict, at, names: list[str], max_dps, params,
               charge: bool = False) -> dict | None:
    """name -> float64 array of max(|right slope|, |left slope|) of the summed loss per entry,
    selections free; None where the unperturbed point (the evaluator's last unfrozen run) has
    no tie, exact or near, or where the work limits do not allow two more runs an entry:
    'reference_work' for the case and, with `charge` (a spec's own and its case files'
    cases), 'condition_spec_work' for the allowances of the spec's cases together, as the
    gradient conditions (then no allowance: the stricter check).  No step leaves an input's
    declared interval."""
    from . import limits
    from .reference import _COND_SPENT, _has_stop, _room, reference_work

    if not (ev.tied or ev.watch):
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
    ev.free, ev.thaw = True, True  # the value's own movement: stop_gradient the identity too
    try:
        out = {}
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
                best = mpmath.mpf(0)
                for sign in (1, -1):
                    pert = base.copy()
                    pert[k] = x0 + sign * h
                    if is_learn:
                        f = ev.run(learnable={**ev.learnable, name: pert}, freeze=True)["none"]
                    else:
                        f = ev.run(inputs={**inputs, name: pert}, freeze=True)["none"]
                    f = np.asarray(f, dtype=object).reshape(-1)
                    both = ok0 & np.array([bool(mpmath.isfinite(v)) for v in f])
                    best = max(best, abs(mpmath.fsum(f[both] - f0[both])) / h)
                slopes[k] = float(best)
            out[name] = slopes
        return out
    finally:
        ev.free, ev.thaw = False, False
