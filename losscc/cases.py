"""Verification cases from three sources: the spec's own, random draws, and case files.

A :class:`CaseData` holds float64 NumPy inputs and, where known, expected values
and gradients (:mod:`losscc.casedata`).  Random cases are drawn from each input's
declared domain with a seeded generator, so a run is reproducible; extreme ones probe
overflow, cancellation and ties (:mod:`losscc.draws`).  External files use the schema
of the conformance suite (``tests/data/conformance/README.md``; :mod:`losscc.casefile`).
This module turns the spec's own cases into :class:`CaseData` and is the interface of all three.
"""

from __future__ import annotations

import numpy as np

from .casedata import CaseData, axis_sizes, check_none_shape
from .casedata import declared_shape as _declared_shape  # noqa: F401  (tests' import)
from .casefile import load_case_file, read_case_json, reference_cases
from .draws import EXTREME_SCALES, TINY_DIFFERENCES, extreme_cases, random_cases
from .draws import draw as _draw  # noqa: F401  (tests' import)
from .errors import Location
from .spec import Spec

__all__ = [
    "EXTREME_SCALES", "TINY_DIFFERENCES", "CaseData", "axis_sizes", "check_none_shape", "extreme_cases",
    "load_case_file", "random_cases", "read_case_json", "reference_cases", "spec_cases",
]


def spec_cases(spec: Spec) -> list[CaseData]:
    """The spec's own cases (checked against the spec when it was loaded)."""
    out = []
    for n, c in enumerate(spec.cases):
        inputs = {}
        for inp in spec.inputs:
            v = c.inputs.get(inp.name)
            inputs[inp.name] = None if v is None else np.asarray(v, dtype=np.int64 if inp.dtype == "int" else float)
        expected = {k: (np.asarray(v, dtype=float) if isinstance(v, list) else float(v)) for k, v in c.expected.items()}
        learn = {lr.name: np.full(lr.shape, lr.init) for lr in spec.learnable}
        case = CaseData(c.id, spec.path, inputs, dict(c.params), learn, expected, rtol=c.rtol)
        line, col = c.positions.get("expected.none", (c.loc.line, c.loc.col))
        check_none_shape(spec, case, Location(spec.path, line, col), "E117", f"cases[{n}]")
        out.append(case)
    return out
