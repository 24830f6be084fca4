"""The generated losses are drop-ins for the library calls the conformance files came from.

Every case of every file in tests/data/conformance/ is called exactly as its library call
(the file's ``reference`` field): the inputs positional in the file's order, the parameters
as keywords under the library's names (tensor parameters as tensors, ``None`` as ``None``),
the reduction by name.  Values of every reduction the file records and the gradients of the
sum are compared, in float64, eager, both backends, with the generated function of the spec
that claims the case (``references:`` in specs/*.yaml).  Unlike ``losscc verify`` no mapping
of names is applied: what a user of the library would write must work unchanged.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest

from losscc.emit import find_specs, load_all

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "conformance"
SPECS = load_all(find_specs([str(ROOT / "specs")]))
BACKENDS = ("mindspore", "paddle")

# the README's suggested float64 check, |actual - expected| <= ATOL + RTOL * |expected|, with
# ATOL scaled by the largest expected magnitude (gradients of bce reach 1e12)
RTOL, ATOL = 1e-10, 1e-12

# Deliberate differences, asserted rather than skipped (docs/spec.md, "Drop-in use").
# At logit == 0 exactly Paddle 3.3.1's gradient of binary_cross_entropy_with_logits (inside
# sigmoid_focal_loss) takes |x|' = +1 where max(x, 0)' = 0, so its gradient there is off by
# the derivative's jump; the loss is smooth at 0 and losscc gives sigmoid(0) - label's term.
GRADIENT_DIFFERS_AT_ZERO_LOGIT = {("sigmoid_focal.json", "edge_large_logits_gamma2"),
                                  ("sigmoid_focal.json", "edge_large_logits_gamma0")}


def _claims() -> dict[tuple[str, str], str]:
    out = {}
    for spec in SPECS:
        for ref in spec.references:
            doc = json.loads((ROOT / ref.file).read_text())
            for cid in ref.cases or [c["id"] for c in doc["cases"]]:
                out[(Path(ref.file).name, cid)] = spec.name
    return out


CLAIMS = _claims()


def _cases():
    for f in sorted(DATA.glob("*.json")):
        doc = json.loads(f.read_text())
        for case in doc["cases"]:
            yield pytest.param(f.name, case, id=f"{f.stem}-{case['id']}")


def _array(obj) -> np.ndarray:
    return np.array(obj["data"], dtype=obj["dtype"]).reshape(obj["shape"])


class Framework:
    """Tensors, calls and gradients in one backend, eager."""

    def __init__(self, name: str):
        self.name = name
        if name == "mindspore":
            import mindspore as ms

            ms.set_context(mode=ms.PYNATIVE_MODE)
            self.ms = ms
        else:
            import paddle

            self.paddle = paddle

    def tensor(self, a: np.ndarray, grad: bool = False):
        if self.name == "mindspore":
            return self.ms.Tensor(a)
        return self.paddle.to_tensor(a, stop_gradient=not grad)

    def numpy(self, t) -> np.ndarray:
        return np.asarray(t.numpy(), dtype=np.float64)

    def grad_of_sum(self, fn, args: list, kwargs: dict, positions: list[int]) -> list[np.ndarray]:
        if self.name == "mindspore":
            def total(*a):
                return fn(*a, **kwargs)

            g = self.ms.grad(total, grad_position=tuple(positions))(*args)
            g = g if isinstance(g, tuple) else (g,)
            return [self.numpy(x) for x in g]
        loss = fn(*args, **kwargs)
        g = self.paddle.grad(loss, [args[p] for p in positions])
        return [self.numpy(x) for x in g]


_FRAMEWORKS: dict[str, Framework] = {}


def framework(name: str) -> Framework:
    if name not in _FRAMEWORKS:
        _FRAMEWORKS[name] = Framework(name)
    return _FRAMEWORKS[name]


def close(actual: np.ndarray, expected: np.ndarray) -> bool:
    expected = np.asarray(expected, dtype=np.float64)
    actual = np.asarray(actual, dtype=np.float64)
    if actual.shape != expected.shape:
        return False
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    return bool(np.all(np.abs(actual - expected) <= ATOL * scale + RTOL * np.abs(expected)))


def library_call(backend: str, file: str, case: dict):
    """The generated function and the arguments of the library call, as tensors."""
    spec = CLAIMS[(file, case["id"])]
    fw = framework(backend)
    module = importlib.import_module(f"generated.{backend}.{spec}")
    fn = getattr(module, spec)
    names = list(case["inputs"])
    differentiable = list(case.get("grad_of_sum", {}))
    args = [fw.tensor(_array(case["inputs"][n]), grad=n in differentiable) for n in names]
    params = {k: fw.tensor(_array(v)) if isinstance(v, dict) else v for k, v in case["params"].items()}
    return fw, fn, names, args, params


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("file, case", list(_cases()))
def test_called_as_the_library_call(backend, file, case):
    fw, fn, names, args, params = library_call(backend, file, case)
    for reduction, expected in case["expected"].items():
        out = fw.numpy(fn(*args, **params, reduction=reduction))
        assert close(out, expected), (reduction, out, expected)
    grads = case.get("grad_of_sum", {})
    if not grads:
        return
    positions = [names.index(n) for n in grads]
    got = fw.grad_of_sum(fn, args, {**params, "reduction": "sum"}, positions)
    for n, g in zip(grads, got):
        expected = np.array(grads[n], dtype=np.float64)
        if (file, case["id"]) in GRADIENT_DIFFERS_AT_ZERO_LOGIT:
            at_zero = _array(case["inputs"]["logit"]) == 0
            assert at_zero.any()
            assert close(g[~at_zero], expected[~at_zero]), (n, g, expected)
            assert not np.allclose(g[at_zero], expected[at_zero])   # Paddle's slope, not the loss's
            continue
        assert close(g, expected), (n, g, expected)


def test_every_case_is_claimed():
    every = {(f.name, c["id"]) for f in DATA.glob("*.json") for c in json.loads(f.read_text())["cases"]}
    assert every == set(CLAIMS)
