"""Fused built-ins (losscc.fusion): each backend's pattern table matches the IR its specs'
passes leave, the built-in runs only under its conditions, and it gives the reference's
values and gradients there, at ties (|x - y| = beta, x = y) and at large differences."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from losscc import fusion
from losscc.backends import all_backends, get
from losscc.backends.operators import OperatorTableError
from losscc.casedata import CaseData
from losscc.emit import compile_spec
from losscc.pipeline import prepare
from losscc.spec import load_spec
from tests.codegen_util import BACKENDS, check, modules

ROOT = Path(__file__).resolve().parent.parent
SPEC_OF = {s: s for s in ("smooth_l1", "huber", "bce", "kl_div")}  # shape -> a spec whose passes leave it


def _spec(name):
    return load_spec(ROOT / "specs" / f"{name}.yaml", f"specs/{name}.yaml")


def _nodes(prep):
    import sympy as sp

    roots = [prep.loss] + ([prep.none.loss] if prep.none else [])
    return {n for r in roots for n in sp.preorder_traversal(r)}


@pytest.mark.parametrize("shape", sorted(fusion.SHAPES))
def test_every_shape_is_what_a_spec_prepares(shape):
    """A shape out of step with the passes would silently never match."""
    prep = prepare(_spec(SPEC_OF[shape]))
    rec = fusion.Fused(shape, "f()")
    table = fusion.candidates(prep.prog, (rec,), prep.none.loss if prep.none else prep.loss)
    assert any(fusion.match(n, table, prep.prog) for n in _nodes(prep))


def test_records_are_checked():
    with pytest.raises(OperatorTableError, match="unknown shape"):
        fusion.check_records("b", (fusion.Fused("nope", "f({x})"),), "")
    with pytest.raises(OperatorTableError, match="reads {z}"):
        fusion.check_records("b", (fusion.Fused("huber", "f({z})"),), "")
    with pytest.raises(OperatorTableError, match="no_grad test"):
        fusion.check_records("b", (fusion.Fused("huber", "f({x})", no_grad=("y",)),), "")


@pytest.mark.parametrize("backend", [b.name for b in all_backends() if b.fused])
def test_the_built_in_is_called_only_under_its_conditions(backend):
    b = get(backend)
    for rec in b.fused:
        code = compile_spec(_spec(SPEC_OF[rec.shape]), b)
        call = rec.call.split("(")[0] + "("
        lines = code.splitlines()
        at = next(k for k, ln in enumerate(lines) if call in ln)
        head = lines[at - 1].strip()
        assert head.startswith("if ") and head.endswith(":"), head
        for dtype in rec.dtypes:
            assert f"dtype == {dtype}" in head, head
        for name in rec.no_grad:
            assert b.no_grad.format(x="target") in head, head
        # the composite serves the other calls: an else branch without the built-in
        indent = lines[at - 1][: len(lines[at - 1]) - len(lines[at - 1].lstrip())]
        other = lines.index(f"{indent}else:", at)
        stop = next(k for k in range(other + 1, len(lines)) if not lines[k].startswith(indent + " "))
        assert stop - other > 2 and not any(call in ln for ln in lines[other:stop])


def _tie_case(spec, beta):
    x = np.array([[0.0, 1.5, -2.0, 0.25, 3.0, -1e3], [beta, -beta, 0.5, 0.0, 2.0, 1e3]])
    y = np.array([[0.0, 1.5 - beta, -2.0 + beta, 0.0, -1.0, 1e3], [0.0, 0.0, 0.5 + beta, 0.0, 2.0 + beta / 2, -1e3]])
    name = "beta" if "beta" in {p.name for p in spec.params} else "delta"
    inputs = {i.name: None for i in spec.inputs}
    inputs.update(input=x, target=y)
    return CaseData(f"ties_{beta}", "test", inputs, {name: beta}, {}, from_reference=True)


@pytest.mark.parametrize("name", ["smooth_l1", "huber"])
def test_fused_float32_matches_the_reference_at_ties(name, tmp_path):
    spec = _spec(name)
    mods = modules(spec, tmp_path)
    cases = [_tie_case(spec, b) for b in (1.0, 0.5, 0.0)]
    check(spec, {b: m for b, m in mods.items() if b in BACKENDS}, cases, dtypes=("float32", "float64"))


NO_GRAD_INPUTS = {
    # probabilities at and near 0 and 1 (the clamped logs and the 1e-12 floor), labels soft and hard
    "bce": (np.array([0.0, 1.0, 1e-30, 1 - 1e-7, 0.5, 1e-45, 0.999, 1e-8, 0.5, 1e-6, 0.3, 0.7]),
            np.array([0.0, 1.0, 1.0, 0.0, 0.5, 1.0, 0.0, 1.0, 0.0, 0.3, 1.0, 0.0])),
    # targets 0 (no term), tiny and large, inputs far apart
    "kl_div": (np.array([0.0, 5.0, -5.0, 1.0, 1e30, -1e30, 3.0, 0.0, -0.5, 2.0, 1e-3, -80.0]),
               np.array([0.0, 0.0, 1.0, 1e-30, 0.5, 0.0, 1e-38, 2.0, 0.25, 0.0, 1e-3, 0.5])),
}


@pytest.mark.skipif("paddle" not in BACKENDS, reason="needs paddle")
@pytest.mark.parametrize("name", sorted(NO_GRAD_INPUTS))
def test_no_grad_built_in_equals_the_verified_composite(name, tmp_path):
    """A record that asks a label to need no gradient (Paddle's ``stop_gradient``) is not
    reached by verify, which differentiates every float input: here the built-in path (label
    without gradient) gives the composite path's value and input gradient (label with one),
    eagerly and under to_static, at the extremes."""
    import paddle

    mod = modules(_spec(name), tmp_path)["paddle"]
    fn = getattr(mod, name)
    x, y = NO_GRAD_INPUTS[name]
    for dtype in ("float32", "float64"):
        for static in (False, True):
            got = []
            for label_grad in (False, True):
                a = paddle.to_tensor(x.astype(dtype), stop_gradient=False)
                b = paddle.to_tensor(y.astype(dtype), stop_gradient=not label_grad)
                f = paddle.jit.to_static(fn, full_graph=True) if static else fn
                out = f(a, b, reduction="none")
                out.sum().backward()
                got.append((out.numpy(), a.grad.numpy()))
            (v1, g1), (v2, g2) = got
            tol = 2e-7 if dtype == "float32" else 1e-15
            np.testing.assert_allclose(v1, v2, rtol=tol, atol=0, err_msg=f"{dtype} static={static}")
            np.testing.assert_allclose(g1, g2, rtol=tol, atol=0, err_msg=f"{dtype} static={static}")
