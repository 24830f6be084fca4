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
from tests.backend_util import AVAILABLE

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
            if (ROOT / ref.file).parent != DATA:   # the library's own cases: tests/test_library_cases.py
                continue
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


# --------------------------------------------------------------------------- the calls users write


def _module(backend: str, name: str):
    framework(backend)
    return importlib.import_module(f"generated.{backend}.{name}")


RNG = np.random.default_rng(19)
X = np.round(RNG.normal(size=(4, 3)), 3)
Y = np.round(RNG.normal(size=(4, 3)), 3)


def _huber_np(x, y, delta):
    d = np.abs(x - y)
    return np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta))


@pytest.mark.parametrize("backend", BACKENDS)
def test_constructors_take_the_builtins_positional_order(backend):
    fw = framework(backend)
    m = _module(backend, "huber")
    assert m.HuberLoss is m.Huber
    x, y = fw.tensor(X), fw.tensor(Y)
    assert close(fw.numpy(m.HuberLoss("sum")(x, y)), _huber_np(X, Y, 1.0).sum())        # nn.HuberLoss('sum')
    assert close(fw.numpy(m.HuberLoss("none", 0.5)(x, y)), _huber_np(X, Y, 0.5))
    kl = _module(backend, "kl_div")
    p = np.full((4, 3), 1 / 3)
    lq = np.log(np.array([[0.2, 0.3, 0.5]] * 4))
    want = (p * (np.log(p) - lq)).sum() / 4
    assert close(fw.numpy(kl.KLDivLoss("batchmean")(fw.tensor(lq), fw.tensor(p))), want)
    assert close(fw.numpy(kl.kl_div(fw.tensor(lq), fw.tensor(p), "batchmean")), want)   # F.kl_div(x, y, 'batchmean')
    mse = _module(backend, "mse")
    assert close(fw.numpy(mse.MSELoss("sum")(fw.tensor(X), fw.tensor(Y))), ((X - Y) ** 2).sum())
    with pytest.raises(ValueError, match="huber: reduction must be one of"):
        m.HuberLoss(0.5)   # the first positional argument is the reduction, as in the built-in


@pytest.mark.parametrize("backend", BACKENDS)
def test_multi_margin_takes_each_builtins_positional_order(backend):
    """F.multi_margin_loss(x, y, p, margin, weight, reduction) in both; the class is
    MultiMarginLoss(p, margin, weight, reduction) in Paddle, (p, margin, reduction, weight)
    in MindSpore."""
    fw = framework(backend)
    m = _module(backend, "multi_margin")
    y = np.array([0, 2, 1, 2])
    w = np.array([0.5, 1.0, 2.0])
    hinge = np.maximum(0.5 - X[np.arange(4), y][:, None] + X, 0) ** 2
    hinge[np.arange(4), y] = 0
    want = (w[y] * hinge.sum(axis=1) / 3).sum()
    x, t, wt = fw.tensor(X), fw.tensor(y), fw.tensor(w)
    assert close(fw.numpy(m.multi_margin(x, t, 2, 0.5, wt, "sum")), want)
    layer = m.MultiMarginLoss(2, 0.5, wt, "sum") if backend == "paddle" else m.MultiMarginLoss(2, 0.5, "sum", wt)
    assert close(fw.numpy(layer(x, t)), want)


def test_mindspore_smooth_l1_takes_beta_first():
    fw = framework("mindspore")
    m = _module("mindspore", "smooth_l1")
    d = np.abs(X - Y)
    want = np.where(d < 0.5, 0.5 * d * d / 0.5, d - 0.25).sum()
    assert close(fw.numpy(m.SmoothL1Loss(0.5, "sum")(fw.tensor(X), fw.tensor(Y))), want)   # nn.SmoothL1Loss(beta, 'sum')


def test_paddle_keywords_and_name():
    fw = framework("paddle")
    g = _module("paddle", "gaussian_nll")
    var = np.abs(Y) + 0.1
    x, y, v = fw.tensor(X), fw.tensor(Y), fw.tensor(var)
    want = 0.5 * (np.log(np.maximum(var, 1e-3)) + (X - Y) ** 2 / np.maximum(var, 1e-3))
    out = g.gaussian_nll(input=x, label=y, variance=v, epsilon=1e-3, reduction="none", name="loss")
    assert close(fw.numpy(out), want)
    assert close(fw.numpy(g.gaussian_nll(x, y, v, False, 1e-3, "none")), want)   # all by position
    assert close(fw.numpy(g.GaussianNLLLoss(False, 1e-3, "none")(x, y, v)), want)
    with pytest.raises(TypeError, match="gaussian_nll\\(\\) missing required argument 'var'"):
        g.gaussian_nll(x, y)
    sf = _module("paddle", "sigmoid_focal")
    label = (Y > 0).astype(np.float64)
    plain = fw.numpy(sf.sigmoid_focal(fw.tensor(X), fw.tensor(label)))
    norm = fw.tensor(np.array([2.0]))
    assert close(fw.numpy(sf.sigmoid_focal(fw.tensor(X), fw.tensor(label), norm)), plain / 2)
    assert close(fw.numpy(sf.sigmoid_focal(logit=fw.tensor(X), label=fw.tensor(label), normalizer=norm)), plain / 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_number_for_a_per_class_tensor(backend):
    fw = framework(backend)
    m = _module(backend, "softmax_focal")
    t = np.array([0, 2, 1, 1])
    a = m.softmax_focal(fw.tensor(X), fw.tensor(t), 0.4, reduction="none")
    b = m.softmax_focal(fw.tensor(X), fw.tensor(t), fw.tensor(np.full(3, 0.4)), reduction="none")
    assert close(fw.numpy(a), fw.numpy(b))


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_checks_name_the_loss_and_the_argument(backend):
    fw = framework(backend)
    m = _module(backend, "cosine_embedding")
    x1, x2 = fw.tensor(X), fw.tensor(Y)
    label = np.array([1, -1, 1, -1])
    want = fw.numpy(m.cosine_embedding(x1, x2, fw.tensor(label.astype(np.float64)), reduction="none"))
    # int32/int64 labels are accepted (as Paddle does) and give the same loss
    assert close(fw.numpy(m.cosine_embedding(x1, x2, fw.tensor(label.astype(np.int32)), reduction="none")), want)
    with pytest.raises(TypeError, match="cosine_embedding: input1 must be a float tensor; received: list"):
        m.cosine_embedding(X.tolist(), x2, fw.tensor(label.astype(np.float64)))
    with pytest.raises(ValueError, match="cosine_embedding: input1 must be a float tensor; received: .*[Ii]nt64"):
        m.cosine_embedding(fw.tensor(X.astype(np.int64)), x2, fw.tensor(label.astype(np.float64)))
    with pytest.raises(ValueError, match="cosine_embedding: target must be a float, int32 or int64 tensor"):
        m.cosine_embedding(x1, x2, fw.tensor(label.astype(np.int16)))
    with pytest.raises(ValueError, match="cosine_embedding: input2 must be of the rank of input1; received: ranks 2 and 1"):
        m.cosine_embedding(fw.tensor(X[0]), x2, fw.tensor(np.ones([1])))
    ce = _module(backend, "cross_entropy")
    with pytest.raises(ValueError, match="cross_entropy: target must be an int32 or int64 tensor"):
        ce.cross_entropy(x1, fw.tensor(np.zeros(4)))
    with pytest.raises(ValueError, match="cross_entropy: input must be of shape \\[N, C, \\*D\\]; received: rank 1"):
        ce.cross_entropy(fw.tensor(X[0]), fw.tensor(np.zeros(1, dtype=np.int64)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_variance_is_clamped_not_refused(backend):
    """A deliberate difference: Paddle's eager gaussian_nll_loss raises on a negative variance,
    a data-dependent test (a device sync per call, impossible under jit); losscc clamps var at
    eps as PyTorch's loss does after its check, so the loss is finite."""
    fw = framework(backend)
    g = _module(backend, "gaussian_nll")
    out = fw.numpy(g.gaussian_nll(fw.tensor(X), fw.tensor(Y), fw.tensor(-np.ones((4, 3))), reduction="none"))
    assert np.all(np.isfinite(out))
    assert close(out, 0.5 * (np.log(1e-6) + (X - Y) ** 2 / 1e-6))


def test_every_mindspore_class_is_a_lossbase():
    import mindspore as ms

    for spec in SPECS:
        cls = getattr(_module("mindspore", spec.name), spec.class_name)
        assert issubclass(cls, ms.nn.LossBase), spec.name
    assert isinstance(_module("mindspore", "kl_div").KLDivLoss("batchmean"), ms.nn.LossBase)


@pytest.mark.parametrize("backend", BACKENDS)
def test_constructor_tensors_and_keywords(backend):
    """BCELoss(weight=w) as in the built-ins; the call's weight wins; PoissonNLLLoss(epsilon=)."""
    fw = framework(backend)
    m = _module(backend, "bce")
    p = np.array([[0.2, 0.7], [0.9, 0.4]])
    y = np.array([[0.0, 1.0], [1.0, 0.0]])
    w = np.array([2.0, 0.5])
    plain = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    layer = m.BCELoss(fw.tensor(w), "none")   # nn.BCELoss(weight, reduction) in both frameworks
    assert close(fw.numpy(layer(fw.tensor(p), fw.tensor(y))), w * plain)
    assert close(fw.numpy(layer(fw.tensor(p), fw.tensor(y), fw.tensor(2 * w))), 2 * w * plain)
    assert close(fw.numpy(m.BCELoss(reduction="none")(fw.tensor(p), fw.tensor(y))), plain)
    if backend == "paddle":
        pn = _module(backend, "poisson_nll")
        x = np.array([0.5, 1.5])
        t = np.array([1.0, 2.0])
        want = x - t * np.log(x + 0.25)
        got = pn.PoissonNLLLoss(log_input=False, epsilon=0.25, reduction="none")(fw.tensor(x), fw.tensor(t))
        assert close(fw.numpy(got), want)


def test_a_declaration_for_an_unknown_backend_is_refused():
    from losscc.errors import SpecError
    from losscc.spec import spec_from_text

    text = "name: t\nsummary: s\ninputs:\n  x: {dtype: float, shape: [N]}\nformula: loss = x * x\n" \
           "dropin:\n  padle: {function: [x]}\n"
    with pytest.raises(SpecError) as exc:
        spec_from_text(text, "t.yaml")
    (d,) = exc.value.diagnostics
    assert (d.code, d.loc.line, d.loc.col) == ("E111", 7, 3) and "unknown field 'padle'" in d.message
    assert "did you mean 'paddle'" in d.hint


# --------------------------------------------------------------------------- Paddle's own tests

LEGACY = ROOT / "tests" / "data" / "paddle_legacy"


def _legacy_cases():
    for f in sorted(LEGACY.glob("*.json")):
        for case in json.loads(f.read_text())["cases"]:
            for backend in BACKENDS:
                yield pytest.param(f.name, case, backend, id=f"{f.stem}-{case['id']}-{backend}")


def _paddle_names(spec_name: str) -> dict[str, str]:
    """Paddle's keyword -> the spec's name (the paddle declaration's aliases)."""
    from losscc import dropin

    spec = next(s for s in SPECS if s.name == spec_name)
    return {alias: arg for arg, alias in dropin.of(spec, "paddle").aliases}


@pytest.mark.parametrize("file, case, backend", list(_legacy_cases()))
def test_paddle_legacy_case(file, case, backend):
    """Paddle's test numbers, called as the Paddle call (Paddle backend) or with the spec's
    names (MindSpore, whose functions do not take Paddle's keywords)."""
    doc = json.loads((LEGACY / file).read_text())
    name = doc["loss"]
    fw = framework(backend)
    fn = getattr(_module(backend, name), name)
    args = [fw.tensor(_array(v)) for v in case["inputs"].values()]
    params = {k: fw.tensor(_array(v)) if isinstance(v, dict) else v for k, v in case["params"].items()}
    if backend != "paddle":
        rename = _paddle_names(name)
        params = {rename.get(k, k): v for k, v in params.items()}
    differs = case.get("differs", {"reductions": []})   # deliberate (docs/spec.md, "Drop-in use")
    for reduction, expected in case["expected"].items():
        out = fw.numpy(fn(*args, **params, reduction=reduction))
        if reduction in differs["reductions"]:
            assert differs["losscc"] == "nan" and np.isnan(out).all(), (reduction, out)
            assert not np.isnan(expected).any()
            continue
        assert close(out, expected), (reduction, out, expected)


@pytest.mark.parametrize("file, case", [p.values[:2] for p in _legacy_cases() if p.values[2] == "paddle"])
def test_paddle_legacy_case_through_the_layer(file, case):
    """The same numbers through the class, as Paddle's tests call theirs: hyperparameters
    (and the constructor's tensors) by keyword at construction, inputs by Paddle's keywords."""
    import inspect

    doc = json.loads((LEGACY / file).read_text())
    fw = framework("paddle")
    m = _module("paddle", doc["loss"])
    cls = next(getattr(m, n) for n in m.__all__ if isinstance(getattr(m, n), type))
    takes = inspect.signature(cls.__init__).parameters
    inputs = {k: fw.tensor(_array(v)) for k, v in case["inputs"].items()}
    params = {k: fw.tensor(_array(v)) if isinstance(v, dict) else v for k, v in case["params"].items()}
    differs = case.get("differs", {"reductions": []})
    for reduction, expected in case["expected"].items():
        layer = cls(**{k: v for k, v in params.items() if k in takes}, reduction=reduction)
        out = fw.numpy(layer(**inputs, **{k: v for k, v in params.items() if k not in takes}))
        assert np.isnan(out).all() if reduction in differs["reductions"] else close(out, expected), (reduction, out)


def test_a_layer_without_its_label_names_it():
    m = _module("paddle", "multi_margin")
    fw = framework("paddle")
    with pytest.raises(TypeError, match="multi_margin\\(\\) missing required argument 'target'"):
        m.MultiMarginLoss()(input=fw.tensor(np.ones((2, 3))))


def test_legacy_files_name_their_test_and_tolerance():
    for f in LEGACY.glob("*.json"):
        doc = json.loads(f.read_text())
        assert doc["library"].startswith("PaddlePaddle 3.3.1 test/legacy_test/test_")
        assert doc["tolerance"]["rtol"] == 1e-5 and doc["reference"].startswith("paddle.nn.functional.")
        assert doc["loss"] in {s.name for s in SPECS}


@pytest.mark.parametrize("backend", BACKENDS)
def test_kl_div_takes_a_0d_input(backend):
    """As Paddle's (and PyTorch's) kl_div: a 0-D input is one element; batchmean is the sum."""
    fw = framework(backend)
    m = _module(backend, "kl_div")
    x, t = np.array(-1.2), np.array(0.3)
    want = 0.3 * (np.log(0.3) + 1.2)
    for reduction in ("none", "mean", "sum", "batchmean"):
        out = m.kl_div(fw.tensor(x), fw.tensor(t), reduction)
        assert tuple(out.shape) == () and close(fw.numpy(out), want), reduction
    if backend == "mindspore":
        import mindspore as ms

        fn = ms.jit(m.KLDivLoss("batchmean"))
    else:
        import paddle

        fn = paddle.jit.to_static(m.KLDivLoss("batchmean"), full_graph=True)
    assert close(fw.numpy(fn(fw.tensor(x), fw.tensor(t))), want)


def test_an_alias_cannot_hide_the_framework():
    from losscc.errors import SpecError
    from losscc.spec import spec_from_text

    text = "name: t\nsummary: s\ninputs:\n  x: {dtype: float, shape: [N]}\n  y: {dtype: float, shape: [N]}\n" \
           "formula: loss = (x - y)**2\ndropin:\n  paddle: {aliases: {y: paddle}}\n"
    with pytest.raises(SpecError) as exc:
        spec_from_text(text, "t.yaml")
    assert [d.code for d in exc.value.diagnostics] == ["E128"]


@pytest.mark.skipif("paddle" not in AVAILABLE, reason="Paddle is not installed")
def test_log_loss_is_paddles_log_loss_in_float32():
    """Paddle's log_loss kernel takes float32 only, so no float64 case file comes from it: the
    generated function is compared with it directly, value and gradient, as Paddle calls it ([N, 1] inputs)."""
    fw = framework("paddle")
    F = importlib.import_module("paddle.nn.functional")
    fn = importlib.import_module("generated.paddle.log_loss").log_loss
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(0.0, 1.0, 10), [0.0, 1.0]]).astype(np.float32).reshape(12, 1)
    y = np.concatenate([rng.uniform(0.0, 1.0, 6), [0.0, 1.0] * 3]).astype(np.float32).reshape(12, 1)
    for eps in (1e-4, 0.05):
        got, want = (f(fw.tensor(x), fw.tensor(y), eps) for f in (fn, F.log_loss))
        assert np.allclose(fw.numpy(got), fw.numpy(want), rtol=2e-6, atol=1e-7)
        g_got, g_want = (fw.grad_of_sum(lambda a, b: f(a, b, epsilon=eps).sum(), [fw.tensor(x, grad=True),
                                        fw.tensor(y)], {}, [0])[0] for f in (fn, F.log_loss))
        assert np.allclose(g_got, g_want, rtol=2e-6, atol=1e-6)
