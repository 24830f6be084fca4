"""Central differences of the reference evaluator, one input entry at a time.

Each entry's derivative of the summed per-element loss, whether it is a kink there, and
its resolution; and, beside them, what each entry's differences tell about the loss
elements one by one: the value's per-element condition S_i (the sum over entries of
|x_j| times |d l_i / d x_j|; an input every sample shares adds to an element only what it
moves of that element) and which elements an entry feeds (a non-finite element another
sample holds, or a huge one, says nothing of this entry's derivative).
"""

from __future__ import annotations

import mpmath
import numpy as np

from .refarrays import place, slopes_differ, to_mp
from .refeval import Evaluator

_H = mpmath.mpf(10) ** -15  # relative step of the differences


def _changed(new: np.ndarray, old: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(new - old per element, where an element is not finite and did not move).  Such an
    element (another sample's 0/0) adds 0 here: NaN - NaN would make every entry's gradient
    NaN, where autograd reaches an entry only from the elements it feeds.  Whether this entry
    feeds it the differences cannot tell: the caller asks the layout (`Differences.feeds`)."""
    out = np.empty(len(new), dtype=object)
    blind = np.zeros(len(new), dtype=bool)
    for j, (a, b) in enumerate(zip(new, old)):
        if mpmath.isfinite(a) and mpmath.isfinite(b):
            out[j] = a - b
        elif (mpmath.isnan(a) and mpmath.isnan(b)) or a == b:
            out[j], blind[j] = mpmath.mpf(0), True
        else:
            out[j] = mpmath.mpf("nan") if mpmath.isnan(a) or mpmath.isnan(b) else a - b
    return out, blind


def _room(prog, name: str, x0):
    """How far `x0` lies inside its input's declared interval: a step beyond a bound evaluates
    the formula where it is not defined (log of a negative probability: a NaN gradient that
    the correct code then failed against). None for sets, learnables and unbounded inputs."""
    spec = getattr(prog, "spec", None)
    try:
        dom = spec.input(name).domain
    except (AttributeError, KeyError, StopIteration, ValueError):
        return None
    if dom.is_set:
        return None
    gaps = [x0 - b if side < 0 else b - x0 for side, b in ((-1, dom.lo), (1, dom.hi)) if isinstance(b, float)]
    gaps = [g for g in gaps if g > 0]
    return min(gaps) if gaps else None


class Differences:
    """Central differences of the summed per-element loss, one entry at a time, at the
    precision in force when it was made, selections frozen at the unperturbed point."""

    def __init__(self, ev: Evaluator, inputs: dict, learnable: dict, at=None):
        """`at`: the per-element loss at the point where `ev` has just run there (else it runs)."""
        self.ev, self.inputs, self.learnable = ev, inputs, learnable
        # differences of the per-element loss, summed afterwards: a huge entry elsewhere
        # (exp(8000)) must not absorb the change of this one
        self.f0 = np.asarray(ev.run()["none"] if at is None else at, dtype=object).reshape(-1)
        self.base = {}
        self.overflow = None  # reference's `overflow`
        # the value's condition S_i, entry by entry: sum of |x_j| |d l_i / d x_j| (not over
        # inputs of a finite set of values: labels are exact data)
        self.condition = np.zeros(len(self.f0))
        spec = ev.prog.spec
        self.exact_data = {i.name for i in spec.inputs if i.domain.is_set}

    def feeds(self, name: str, k: tuple) -> np.ndarray | None:
        """The loss elements entry k of input `name` reaches by the layout (those with its
        coordinates on the axes it shares with the loss), a flat bool mask; None for all (a
        learnable, or a layout this cannot place)."""
        if name in self.learnable:
            return None
        ev = self.ev
        try:
            prog, lay = ev.prog, ev.layout
            inp = prog.spec.input(name)
            src = np.zeros(np.shape(self.inputs[name]))
            src[k] = 1.0
            at = place(src, prog.types[prog.symbols[name]].axes, inp, lay)
            loss_axes = prog.typeof(prog.loss).axes
            keep = {d for ax in loss_axes for d in lay.dims[ax]}
            drop = tuple(d for d in range(lay.rank) if d not in keep and at.shape[d] > 1)
            at = at.sum(axis=drop, keepdims=True) if drop else at
            full = [1] * lay.rank
            for ax in loss_axes:
                for d, n in zip(lay.dims[ax], ev.sizes[ax]):
                    full[d] = n
            mask = lay.squeeze(np.broadcast_to(at, full), loss_axes).reshape(-1) > 0
        except (ValueError, KeyError, IndexError, AttributeError, StopIteration):
            return None
        return mask if mask.size == len(self.f0) else None

    def entry(self, name: str, k: tuple):
        """(derivative, kink?, absolute resolution) of d(sum)/d name[k]."""
        ev = self.ev
        is_learn = name in self.learnable
        if name not in self.base:
            self.base[name] = to_mp(np.asarray(self.learnable[name] if is_learn else self.inputs[name], dtype=float))
        mp = self.base[name]
        x0 = mp[k]
        h = _H * max(1, abs(x0))
        room = None if is_learn else _room(ev.prog, name, x0)
        if room is not None and 0 < room < h:  # a probability of 1e-31: x0 - 1e-15 leaves [0, 1]
            h = _H * room
        vals, sides = [], []
        for sign in (1, -1):
            pert = mp.copy()
            pert[k] = x0 + sign * h
            if is_learn:
                lrn = dict(ev.learnable)
                lrn[name] = pert
                out = ev.run(learnable=lrn, freeze=True)["none"]
            else:
                cur = dict(self.inputs)
                cur[name] = pert
                out = ev.run(inputs=cur, freeze=True)["none"]
            vals.append(np.asarray(out, dtype=object).reshape(-1))
            sides.append(ev.sides)
        (up, blind_up), (down, blind_down) = (_changed(v, self.f0) for v in vals)  # per-element changes
        right = mpmath.fsum(up) / h
        left = -mpmath.fsum(down) / h
        d = mpmath.fsum(up - down) / (2 * h)
        scale = max(abs(right), abs(left), 1)
        moved = np.array([u != 0 or v != 0 for u, v in zip(up, down)], dtype=bool)
        fed = self.feeds(name, k)
        if fed is not None and np.any(moved & ~fed):  # the loss couples its elements: all of them
            fed = None
        unseen = blind_up | blind_down
        blind = bool(np.any(unseen if fed is None else unseen & fed))
        # rounding noise of the differences: the elements it feeds or moves, each of size |f|,
        # resolve changes of |f| * 10^-dps (a change below that leaves one unmoved; a huge
        # element of another sample adds none)
        reach = np.ones(len(self.f0), dtype=bool) if fed is None else moved | fed
        res = mpmath.fsum(abs(f) for f, m in zip(self.f0, reach) if m and mpmath.isfinite(f)) * \
            mpmath.mpf(10) ** (-mpmath.mp.dps + 2) / h
        if name not in self.exact_data:
            slope = np.array([float(abs(u - v) / (2 * h)) if mpmath.isfinite(u - v) else 0.0
                              for u, v in zip(up, down)])
            self.condition += float(abs(x0)) * slope
        # not differentiable here, or not resolved at this precision
        # a near tie (reference's near_tol) whose sides move differently with this entry: the
        # dtype's rounding may pick either side there, and the side decides the gradient
        near = any(slopes_differ(m, sides[0][key], sides[1][key], h) for key, m in ev.watch.items()
                   if key in sides[0] and key in sides[1])
        over = self.overflow is not None and any(
            abs(f) > self.overflow and (u != 0 or v != 0) for f, u, v in zip(self.f0, up, down))
        kink = (abs(right - left) > mpmath.mpf(10) ** -6 * scale or res > mpmath.mpf(10) ** -8 * scale
                or blind or near or over)
        return d, bool(kink), res
