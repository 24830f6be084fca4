"""The framework built-in's curve beside a page's reference curve.

A spec whose ``dropin:`` names a built-in function among those it replaces in a backend
that draws built-in curves (``Backend.builtin_series``; the first such backend by name),
and gives that function's positional order, gets a second series in its plot data: the
built-in, in float64, on the same swept inputs, with its gradient from the framework's own
autograd.  It is computed when ``losscc docs`` writes the pages, the framework can be
imported and its function runs on the case in float64; otherwise (and always under
``--check``, which imports no framework) the series is taken from the committed data file,
where its sweep is the same.  So the check compares the reference series exactly and
carries the built-in's over unchanged.
"""

from __future__ import annotations

import math

from . import dropin
from .backends import Backend, all_backends
from .spec import Spec


def drawing_backend() -> Backend | None:
    """The backend whose built-ins are drawn on the pages, or None."""
    return next((b for b in all_backends() if b.builtin_series is not None), None)


def builtin_call(spec: Spec, backend: Backend | None = None) -> str | None:
    """The qualified name of the built-in function the spec stands in for, or None."""
    backend = backend or drawing_backend()
    if backend is None:
        return None
    d = dropin.of(spec, backend.name)
    if not d.function:
        return None
    return next((r for r in d.replaces if r.rsplit(".", 1)[-1][:1].islower() and framework_name(r, backend)), None)


def framework_name(call: str, backend: Backend) -> bool:
    """`call` names a public attribute of one of the backend's frameworks (`<framework>.nn.
    functional.kl_div`): a spec's `replaces` is text, and no other module is ever imported or called."""
    parts = call.split(".")
    return (len(parts) > 1 and parts[0] in backend.frameworks
            and all(p.isidentifier() and not p.startswith("_") for p in parts))


def carried(data: dict, old: dict | None, spec: Spec) -> dict | None:
    """The committed built-in series of `old` where it belongs to the same sweep as `data` and
    names the built-in the spec stands in for (a data file cannot give a spec without one a
    curve, or its page another name); its numbers are the framework's and are kept as they are."""
    if not isinstance(old, dict) or not isinstance(old.get("builtin"), dict):
        return None
    same = all(old.get(k) == data.get(k) for k in ("spec", "case", "element", "x"))
    b = old["builtin"]
    call = builtin_call(spec)
    ok = (call is not None and b.get("call") == call and set(b) == {"call", "loss", "gradient"}
          and all(isinstance(b.get(k), list) and len(b[k]) == len(data["x"])
                  and all(v is None or (isinstance(v, float) and math.isfinite(v)) for v in b[k])
                  for k in ("loss", "gradient")))
    return b if same and ok else None


def _num(v: float) -> float | None:
    v = float(v)
    return float(f"{v:.12g}") if math.isfinite(v) else None


def compute(spec: Spec, case, name: str, xs) -> dict | None:
    """The built-in's series for the sweep of `name`'s first element over `xs`, or None where
    the spec has no such function or its framework is not installed."""
    backend = drawing_backend()
    call = builtin_call(spec, backend)
    if call is None or backend.missing():
        return None
    got = backend.builtin_series(spec, case, name, xs, call, dropin.of(spec, backend.name).function)
    if got is None:
        return None
    return {"call": call, "loss": [_num(v) for v in got["loss"]], "gradient": [_num(v) for v in got["gradient"]]}
