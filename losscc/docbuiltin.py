"""The framework built-in's curve beside a page's reference curve.

A spec whose ``dropin:`` names a Paddle function among the built-ins it replaces (and
gives that function's positional order) gets a second series in its plot data: Paddle's
own function, in float64, on the same swept inputs, with its gradient from
``paddle.grad``.  It is computed when ``losscc docs`` writes the pages, Paddle can be
imported and its function runs on the case in float64; otherwise (and always under
``--check``, which imports no framework) the series is taken from the committed data file,
where its sweep is the same.  So the check compares the reference series exactly and
carries the built-in's over unchanged.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math

import numpy as np

from . import dropin
from .spec import Spec

BACKEND = "paddle"


def builtin_call(spec: Spec) -> str | None:
    """The qualified name of the Paddle function the spec stands in for, or None."""
    d = dropin.of(spec, BACKEND)
    if not d.function:
        return None
    return next((r for r in d.replaces if r.rsplit(".", 1)[-1][:1].islower()), None)


def carried(data: dict, old: dict | None) -> dict | None:
    """The committed built-in series of `old` where it belongs to the same sweep as `data`."""
    if not isinstance(old, dict) or not isinstance(old.get("builtin"), dict):
        return None
    same = all(old.get(k) == data.get(k) for k in ("spec", "case", "element", "x"))
    b = old["builtin"]
    ok = (isinstance(b.get("call"), str) and all(isinstance(b.get(k), list) and len(b[k]) == len(data["x"])
                                                 for k in ("loss", "gradient")))
    return b if same and ok else None


def _num(v: float) -> float | None:
    v = float(v)
    return float(f"{v:.12g}") if math.isfinite(v) else None


def compute(spec: Spec, case, name: str, xs) -> dict | None:
    """Paddle's series for the sweep of `name`'s first element over `xs`, or None where the
    spec has no Paddle function or Paddle is not installed."""
    call = builtin_call(spec)
    if call is None or importlib.util.find_spec(BACKEND) is None:
        return None
    import paddle

    module, attr = call.rsplit(".", 1)
    fn = getattr(importlib.import_module(module), attr)
    arity = len(inspect.signature(fn).parameters)  # a drop-in may add reduction after the built-in's own
    inputs = {i.name: i for i in spec.inputs}
    base = np.asarray(case.inputs[name], dtype=np.float64)
    loss, grad = [], []
    for x in xs:
        args, swept = [], None
        for arg in dropin.of(spec, BACKEND).function:
            if arg in inputs:
                v = case.inputs.get(arg)
                if v is None:
                    args.append(None)
                    continue
                if arg == name:
                    arr = base.copy()
                    arr.reshape(-1)[0] = x
                    swept = paddle.to_tensor(arr, dtype="float64", stop_gradient=False)
                    args.append(swept)
                else:
                    dtype = "int64" if inputs[arg].dtype == "int" else "float64"
                    args.append(paddle.to_tensor(np.asarray(v), dtype=dtype))
            elif arg == "reduction":
                args.append("sum")
            elif arg == "name":
                args.append(None)
            else:
                args.append(case.params.get(arg, spec.param(arg).default))
        try:
            out = fn(*args[:arity])
        except (RuntimeError, ValueError):  # no float64 kernel or another shape (log_loss: [N, 1] only)
            return None
        out = out.sum() if out.ndim else out  # a built-in without a reduction argument
        (g,) = paddle.grad(out, [swept])
        loss.append(_num(out.item()))
        grad.append(_num(g.numpy().reshape(-1)[0]))
    return {"call": call, "loss": loss, "gradient": grad}
