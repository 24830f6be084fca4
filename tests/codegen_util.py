"""Compile a spec written in a test, import its generated modules and compare them with the
reference evaluator (losscc.reference) on inputs of chosen sizes."""

from __future__ import annotations

import textwrap
from functools import cache

import numpy as np

from losscc import verify
from losscc.backends import get
from losscc.cases import CaseData, _draw
from losscc.emit import compile_spec
from losscc.spec import spec_from_text
from tests.backend_util import AVAILABLE as BACKENDS  # the backends whose frameworks are installed


def spec_of(text: str, label: str = "test"):
    return spec_from_text(textwrap.dedent(text), f"<{label}>")


def modules(spec, tmp_path, tag: str = "") -> dict:
    out = {}
    for b in BACKENDS:
        path = tmp_path / b / f"{spec.name}{tag}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(compile_spec(spec, get(b)), encoding="utf-8")
        out[b] = verify.load_module(path, f"losscc_test_{b}_{spec.name}_{tmp_path.name}{tag}")
    return out


@cache
def runners() -> dict:
    return {b: verify.runner(b) for b in BACKENDS}


def case(spec, sizes: dict, seed: int = 0, params: dict | None = None, none: tuple = ()) -> CaseData:
    """Random inputs where axis A has the sizes `sizes[A]` (a tuple: () is an empty group)."""
    rng = np.random.default_rng(seed)
    inputs = {}
    for inp in spec.inputs:
        shape = tuple(n for a in inp.shape for n in sizes[a.lstrip("*")])
        if inp.name in none:
            inputs[inp.name] = None
        elif inp.optional:
            inputs[inp.name] = np.round(rng.uniform(0.5, 2.0, size=shape), 3)
        else:
            inputs[inp.name] = np.asarray(_draw(inp, shape, rng, sizes))
    p = {q.name: q.default for q in spec.params}
    p.update(params or {})
    label = "_".join(f"{k}{'x'.join(map(str, v))}" for k, v in sizes.items())
    learn = {lr.name: np.round(rng.normal(0.0, 0.5, size=lr.shape), 3) for lr in spec.learnable}
    return CaseData(f"{label}_none{'_'.join(none)}", "test", inputs, p, learn, from_reference=True)


def check(spec, mods: dict, cases: list, modes=("eager",), dtypes=("float64",), backends=None) -> list:
    """Every backend's (or those named's) values and gradients for every reduction equal the
    reference's."""
    use = {b: r for b, r in runners().items() if backends is None or b in backends}
    rows = verify.verify_spec(spec, mods, use, dtypes, modes, cases)
    bad = [(r.backend, r.mode, r.dtype, r.failures[:3]) for r in rows if not r.ok]
    assert not bad, bad
    assert all(r.cases == len(cases) for r in rows)
    return rows
