"""Shared helpers of the case-file generators: seeded inputs and the JSON layout.

The generators run outside losscc's environment (a virtual environment with the library
that computes the numbers); they import nothing from losscc.  Inputs are rounded to a few
decimals, so the JSON numbers are exactly the float64 values fed to the library.
"""

import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent


def normal(rng, shape, scale=1.0, decimals=4):
    return np.round(rng.normal(size=shape) * scale, decimals)


def uniform(rng, shape, lo, hi, decimals=4):
    return np.round(rng.uniform(lo, hi, size=shape), decimals)


def signs(rng, shape):
    return rng.choice([-1.0, 1.0], size=shape)


def bits(rng, shape):
    return rng.choice([0.0, 1.0], size=shape)


def tensor(a):
    a = np.asarray(a)
    dtype = "int64" if a.dtype.kind in "iu" else "float64"
    data = a.astype(np.int64 if dtype == "int64" else np.float64).tolist()
    return {"dtype": dtype, "shape": list(a.shape), "data": data}


def _check_finite(obj, where):
    arr = np.asarray(obj, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{where}: not finite")


def case(cid, params, inputs, expected, grads, note=None):
    """One case; inputs are numpy arrays, expected maps reductions to arrays or numbers."""
    out = {"id": cid, "params": params, "inputs": {k: tensor(v) for k, v in inputs.items()},
           "expected": {k: (np.asarray(v).tolist() if np.ndim(v) else float(v)) for k, v in expected.items()},
           "grad_of_sum": {k: np.asarray(v).tolist() for k, v in grads.items()}}
    for k, v in out["expected"].items():
        _check_finite(v, f"{cid}: expected.{k}")
    for k, v in out["grad_of_sum"].items():
        _check_finite(v, f"{cid}: grad_of_sum.{k}")
    if note:
        out["note"] = note
    return out


def write(loss, library, reference, semantics, cases, class_axis=None):
    doc = {"loss": loss, "library": library, "reference": reference, "semantics": semantics}
    if class_axis is not None:
        doc["class_axis"] = class_axis
    doc["cases"] = cases
    ids = [c["id"] for c in cases]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{loss}: duplicate case ids")
    path = OUT / f"{loss}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path.name}: {len(cases)} cases")
