"""The seed losses in both frameworks against float64 NumPy, eager and graph, values and gradients.

Each generated module is imported on its own (it must be self-contained). The NumPy
versions below are written independently of the compiler, straight from the formulas.
"""

from pathlib import Path

import numpy as np
import pytest

from losscc.verify import load_module

ms = pytest.importorskip("mindspore")  # the two frameworks' own APIs, side by side
paddle = pytest.importorskip("paddle")

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT / "generated"
RNG = np.random.default_rng(7)


def np_softplus(x):
    return np.logaddexp(0.0, x)


def np_huber(x, y, delta, w=None):
    d = np.abs(x - y)
    l = np.where(d < delta, 0.5 * d**2, delta * (d - 0.5 * delta))
    return l if w is None else w * l


def np_focal(logits, label, alpha, gamma):
    lp = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) - logits.max(1, keepdims=True)
    lpt = lp[np.arange(len(label)), label]
    return -alpha * (1 - np.exp(lpt)) ** gamma * lpt


def np_multitask(x1, y1, x2, y2, s):
    b1 = y1 * np_softplus(-x1) + (1 - y1) * np_softplus(x1)
    b2 = y2 * np_softplus(-x2) + (1 - y2) * np_softplus(x2)
    return np.exp(-s[0]) * b1 + s[0] + np.exp(-s[1]) * b2 + s[1]


def num_grad(f, arrays, k, eps=1e-6):
    """Central differences of sum(f) in float64 (accurate to ~1e-9 for these smooth losses)."""
    x = arrays[k]
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        up = [a.copy() for a in arrays]
        dn = [a.copy() for a in arrays]
        up[k][idx] += eps
        dn[k][idx] -= eps
        g[idx] = (f(*up).sum() - f(*dn).sum()) / (2 * eps)
    return g


REDUCE = {"none": lambda l: l, "sum": np.sum, "mean": np.mean}

CASES = {
    "huber": dict(
        arrays=[RNG.normal(size=(5, 3)), RNG.normal(size=(5, 3))], ints=[], params={"delta": 0.7},
        ref=lambda x, y: np_huber(x, y, 0.7)),
    "focal": dict(
        arrays=[RNG.normal(size=(6, 4)) * 2], ints=[RNG.integers(0, 4, size=6)], params={"alpha": 0.3, "gamma": 1.5},
        ref=None),
    "uncertainty_multitask": dict(
        arrays=[RNG.normal(size=7), (RNG.random(7) > 0.5) * 1.0, RNG.normal(size=7), RNG.random(7)], ints=[],
        params={}, ref=None),
}
CASES["focal"]["ref"] = lambda x: np_focal(x, CASES["focal"]["ints"][0], 0.3, 1.5)
LOG_VARS = np.array([0.3, -0.2])


def ms_value(cls, arrays, ints, params, reduction, graph, learn=None):
    kw = dict(params, reduction=reduction)
    if learn is not None:
        kw["dtype"] = ms.float64
    cell = cls(**kw)
    if learn is not None:
        cell.log_vars.set_data(ms.Tensor(learn))
    args = [ms.Tensor(a) for a in arrays] + [ms.Tensor(i) for i in ints]
    fn = ms.jit(cell) if graph else cell
    return cell, args, fn(*args).asnumpy()


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_mindspore_seed(name, graph):
    mod = load_module(GEN / "mindspore" / f"{name}.py", f"seed_ms_{name}")
    cls = getattr(mod, "".join(p.capitalize() for p in name.split("_")))
    case = CASES[name]
    learn = LOG_VARS if name == "uncertainty_multitask" else None
    ref = (lambda *a: np_multitask(*a, LOG_VARS)) if learn is not None else case["ref"]
    for reduction, red in REDUCE.items():
        _, _, got = ms_value(cls, case["arrays"], case["ints"], case["params"], reduction, graph, learn)
        np.testing.assert_allclose(got, red(ref(*case["arrays"])), rtol=1e-12, atol=1e-14)
    cell, args, _ = ms_value(cls, case["arrays"], case["ints"], case["params"], "sum", graph, learn)
    n = len(case["arrays"])
    weights = cell.trainable_params() if learn is not None else None
    vg = ms.value_and_grad(cell, grad_position=tuple(range(n)), weights=weights)
    if graph:
        vg = ms.jit(vg)
    _, grads = vg(*args)
    g_in = grads[0] if learn is not None else grads
    if not isinstance(g_in, tuple):  # one grad_position gives a tensor, not a tuple
        g_in = (g_in,)
    for k in range(n):
        np.testing.assert_allclose(g_in[k].asnumpy(), num_grad(ref, case["arrays"], k), rtol=1e-6, atol=1e-8)
    if learn is not None:
        g_s = num_grad(lambda s: np_multitask(*case["arrays"], s), [LOG_VARS.copy()], 0)
        np.testing.assert_allclose(grads[1][0].asnumpy(), g_s, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "to_static"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_paddle_seed(name, graph):
    mod = load_module(GEN / "paddle" / f"{name}.py", f"seed_pd_{name}")
    cls = getattr(mod, "".join(p.capitalize() for p in name.split("_")))
    case = CASES[name]
    learn = LOG_VARS if name == "uncertainty_multitask" else None
    ref = (lambda *a: np_multitask(*a, LOG_VARS)) if learn is not None else case["ref"]
    for reduction in list(REDUCE) + ["sum"]:
        kw = dict(case["params"], reduction=reduction)
        if learn is not None:
            kw["dtype"] = "float64"
        layer = cls(**kw)
        if learn is not None:
            layer.log_vars.set_value(paddle.to_tensor(learn))
        args = [paddle.to_tensor(a, stop_gradient=False) for a in case["arrays"]]
        args += [paddle.to_tensor(i) for i in case["ints"]]
        fn = paddle.jit.to_static(layer) if graph else layer
        out = fn(*args)
        np.testing.assert_allclose(out.numpy(), REDUCE[reduction](ref(*case["arrays"])), rtol=1e-12, atol=1e-14)
    out.backward()  # the last reduction was "sum"
    for k, a in enumerate(args[: len(case["arrays"])]):
        np.testing.assert_allclose(a.grad.numpy(), num_grad(ref, case["arrays"], k), rtol=1e-6, atol=1e-8)
    if learn is not None:
        g_s = num_grad(lambda s: np_multitask(*case["arrays"], s), [LOG_VARS.copy()], 0)
        np.testing.assert_allclose(layer.log_vars.grad.numpy(), g_s, rtol=1e-6, atol=1e-8)


def test_functions_match_classes_and_reject_bad_arguments():
    ms_mod = load_module(GEN / "mindspore" / "huber.py", "seed_ms_huber_fn")
    pd_mod = load_module(GEN / "paddle" / "huber.py", "seed_pd_huber_fn")
    x, y = CASES["huber"]["arrays"]
    a = ms_mod.huber(ms.Tensor(x), ms.Tensor(y), delta=0.7, reduction="sum").asnumpy()
    b = pd_mod.huber(paddle.to_tensor(x), paddle.to_tensor(y), delta=0.7, reduction="sum").numpy()
    np.testing.assert_allclose(a, np_huber(x, y, 0.7).sum(), rtol=1e-13)
    np.testing.assert_allclose(b, np_huber(x, y, 0.7).sum(), rtol=1e-13)
    for mod in (ms_mod, pd_mod):
        with pytest.raises(ValueError, match="reduction must be one of 'none', 'mean', 'sum'; received: reduction='avg'"):
            mod.Huber(reduction="avg")
        with pytest.raises(ValueError, match="delta must be a float >= 0; received: delta=-1.0"):
            mod.Huber(delta=-1.0)


def test_mindspore_graph_mode_context():
    """The whole cell under GRAPH_MODE (not only ms.jit), then back to PyNative."""
    mod = load_module(GEN / "mindspore" / "focal.py", "seed_ms_focal_graph")
    x = CASES["focal"]["arrays"][0]
    lbl = CASES["focal"]["ints"][0]
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        out = mod.Focal(alpha=0.3, gamma=1.5)(ms.Tensor(x), ms.Tensor(lbl)).asnumpy()
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_allclose(out, np_focal(x, lbl, 0.3, 1.5).mean(), rtol=1e-12)
