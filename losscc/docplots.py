"""The data behind a reference page's plot, and the plot itself.

The data (:func:`plot_data`) is the loss summed over the spec's first case and its
gradient, as one element of one float input sweeps an interval, both from the reference
evaluator (:mod:`losscc.reference`, the unrewritten IR at high precision).  It is stored
as JSON next to the page, and ``losscc docs --check`` compares that text, so the check
needs neither matplotlib nor byte-stable images.  :func:`render_png` draws the PNG from the
data (matplotlib, the ``docs`` extra) and is only called when the data changed or the
image is missing.  Where the spec stands in for a framework's function, the data also holds that
function's curve (:mod:`losscc.docbuiltin`), drawn dashed beside the reference.
"""

from __future__ import annotations

import io
import json
import math
import time
from pathlib import Path

import mpmath
import numpy as np

from . import limits
from .casefile import reference_cases
from .cases import random_cases, spec_cases
from .parse import build_program
from .reference import _H, Evaluator, ReferenceCost, digits_for, reference_work, to_mp
from .spec import Spec

POINTS = 41          # samples of the swept input
HALF_WIDTH = 3.0     # an unbounded input sweeps value +- this
MARGIN = 1e-3        # a bounded domain's ends are kept this far inside (relative to its width)


def _bound(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(float(v)) else None


def sweep_interval(inp, x0: float) -> tuple[float, float]:
    """The interval one element of `inp` sweeps: x0 +- HALF_WIDTH, cut to the input's domain."""
    lo, hi = _bound(inp.domain.lo), _bound(inp.domain.hi)
    a, b = x0 - HALF_WIDTH, x0 + HALF_WIDTH
    if lo is not None and hi is not None:
        a, b = lo, hi
    elif lo is not None:
        a, b = lo, max(lo + 2 * HALF_WIDTH, x0 + HALF_WIDTH)
    elif hi is not None:
        a, b = min(hi - 2 * HALF_WIDTH, x0 - HALF_WIDTH), hi
    pad = (b - a) * MARGIN  # inside closed ends too: a clamped log's end point would dwarf the curve
    if lo is not None:
        a += pad
    if hi is not None:
        b -= pad
    return a, b


def swept_input(spec: Spec, inputs: dict):
    """The first required float input that the case gives and whose domain is an interval."""
    for inp in spec.inputs:
        if inp.dtype == "float" and not inp.optional and not inp.domain.is_set and inputs.get(inp.name) is not None:
            if np.asarray(inputs[inp.name]).size:
                return inp
    return None


def _num(v: float) -> float | None:
    """A JSON number at 12 significant digits (stable text); None for inf and nan."""
    v = float(v)
    return float(f"{v:.12g}") if math.isfinite(v) else None


def plot_data(spec: Spec, root: Path, builtin=None) -> dict | None:
    """The plotted data, or None where the spec has no case or no input to sweep.  The
    case is the spec's first, else the first of its reference files (inside `root`), else
    verify's first random case (seed 0); one whose 3 * POINTS evaluations would pass the
    limit 'reference_work' gives way to the random case.  `builtin(spec, case, input name,
    xs)`, where given, returns the framework built-in's series on the same sweep
    (losscc.docbuiltin)."""
    prog = build_program(spec)
    for cases in (lambda: spec_cases(spec) or reference_cases(spec, root), lambda: random_cases(spec, 1, 0)):
        got = _sweep(spec, prog, cases()[:1])
        if got is not None:
            break
    else:
        return None
    case, inp, xs = got
    base = np.asarray(case.inputs[inp.name], dtype=float)
    loss, grad = [], []
    deadline = time.monotonic() + limits.MAX_REFERENCE_SECONDS  # the whole plot's, not each point's
    for x in xs:
        cur = dict(case.inputs)
        arr = base.copy()
        arr.reshape(-1)[0] = x
        cur[inp.name] = arr.reshape(base.shape)
        try:
            value, slope = _value_and_slope(prog, cur, dict(case.params), dict(case.learnable), inp.name, deadline)
        except ReferenceCost:
            return None
        loss.append(_num(value))
        grad.append(_num(slope))
    where = f"{inp.name}[{', '.join(['0'] * base.ndim)}]" if base.ndim else inp.name
    data = {"spec": spec.name, "case": case.id, "input": inp.name, "element": where,
            "x": [_num(x) for x in xs], "loss": loss, "gradient": grad}
    series = builtin(spec, case, inp.name, xs) if builtin is not None else None
    if series is not None:
        data["builtin"] = series
    return data


PLOT_WORK = limits.MAX_REFERENCE_WORK // 4  # the plot's evaluations, at most (reference_work's unit)


def _sweep(spec: Spec, prog, cases: list) -> tuple | None:
    """(case, swept input, sweep points) of the first of `cases` (one at most), or None where
    there is none, it has no float input to sweep, or its evaluations at either end of the
    sweep would pass PLOT_WORK (a case file of large entries, fixed axes of 64**3)."""
    if not cases:
        return None
    case = cases[0]
    inp = swept_input(spec, case.inputs)
    if inp is None:
        return None
    base = np.asarray(case.inputs[inp.name], dtype=float)
    a, b = sweep_interval(inp, float(base.reshape(-1)[0]))
    for x in (a, b):
        arr = base.copy()
        arr.reshape(-1)[0] = x
        if reference_work(prog, {**case.inputs, inp.name: arr}, case.learnable, 3 * POINTS) > PLOT_WORK:
            return None
    return case, inp, np.linspace(a, b, POINTS)


def _value_and_slope(prog, inputs: dict, params: dict, learnable: dict, name: str,
                     deadline: float) -> tuple[float, float]:
    """The summed loss and its derivative in the first element of `name`: the reference
    evaluator's value and central difference (losscc.reference, the same step and
    precision), for that one element only."""
    dps = min(digits_for(inputs, learnable), limits.MAX_REFERENCE_DPS)
    with mpmath.workdps(dps):
        ev = Evaluator(prog, inputs, params, learnable)
        ev.deadline = deadline
        value = ev.run()["sum"]
        src = to_mp(np.asarray(inputs[name], dtype=float))
        flat = src.reshape(-1)
        x0 = flat[0]
        h = _H * max(1, abs(x0))
        sides = []
        for sign in (1, -1):
            pert = src.copy()
            pert.reshape(-1)[0] = x0 + sign * h
            cur = dict(inputs)
            cur[name] = pert
            sides.append(np.asarray(ev.run(inputs=cur, freeze=True)["none"], dtype=object).reshape(-1))
        slope = mpmath.fsum(sides[0] - sides[1]) / (2 * h)
        with np.errstate(over="ignore", invalid="ignore"):
            return float(value), float(slope)


def data_text(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def render_png(data: dict) -> bytes:
    """The PNG of `data`: the loss and its gradient over the swept element.  Agg backend,
    fixed size, dpi and font, no software or date metadata."""
    try:
        import matplotlib
    except ImportError:
        from .errors import Diagnostic, Location, SpecError

        raise SpecError([Diagnostic(Location("docs/losses/img"), "E174",
                                    "drawing the plots needs matplotlib: pip install 'losscc[docs]'")]) from None
    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    nan = float("nan")
    x = [nan if v is None else v for v in data["x"]]
    with matplotlib.rc_context({"font.family": "DejaVu Sans", "font.size": 9, "svg.hashsalt": "losscc",
                                "path.simplify": False}):
        fig = Figure(figsize=(7.0, 2.8), dpi=100)
        left, right = fig.subplots(1, 2)
        for ax, key, title in ((left, "loss", "loss (sum over the case)"),
                               (right, "gradient", f"d loss / d {data['element']}")):
            ax.plot(x, [nan if v is None else v for v in data[key]], color="tab:blue", linewidth=1.5,
                    label="reference")
            if "builtin" in data:
                ax.plot(x, [nan if v is None else v for v in data["builtin"][key]], color="tab:orange",
                        linewidth=1.2, linestyle="--", label=data["builtin"]["call"].rsplit(".", 1)[-1])
                ax.legend(fontsize=7)
            ax.set_title(title)
            ax.set_xlabel(data["element"])
            ax.grid(True, linewidth=0.4, alpha=0.6)
        fig.suptitle(f"{data['spec']}, case {data['case']}", fontsize=10)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()
