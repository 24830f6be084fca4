"""The symbolic backward (losscc.backward, losscc.backward_emit): its derivative rules, the
specs it covers and the reason it gives for the others, and a spy proving that the generated
class runs the custom backward eagerly and compiled in Paddle and MindSpore, and that a second
derivative through it is right."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sympy as sp

from losscc import backward, ir, verify
from losscc.backends import get
from losscc.emit import compile_spec
from losscc.errors import SpecError
from losscc.pipeline import prepare
from losscc.spec import load_spec, spec_from_text
from tests.backend_util import AVAILABLE

x, y, c = sp.symbols("x y c")


def value(e, **at):
    """e at a point, with where/sign/max evaluated (the IR's own nodes)."""
    e = e.subs({sp.Symbol(k): v for k, v in at.items()})
    for _ in range(10):  # nested selects, innermost first
        e = e.replace(lambda n: isinstance(n, ir.Where) and n.args[0] in (sp.true, sp.false),
                      lambda n: n.args[1] if n.args[0] == sp.true else n.args[2])
    return float(e.replace(lambda n: isinstance(n, ir.Sign), lambda n: sp.sign(n.args[0])))


# ----------------------------------------------------------------------- derivative rules

def test_smooth_rules_agree_with_sympy():
    e = ir.softplus(x * y) + sp.log(ir.sigmoid(x)) * sp.tanh(y) + sp.cosh(x - y) + sp.exp(-x) ** 2
    for var in (x, y):
        got = backward.derivative(e, var)
        want = sp.diff(e.rewrite(sp.exp), var)
        assert abs(value(got, x=0.3, y=-0.7) - float(want.subs({x: 0.3, y: -0.7}))) < 1e-12


def test_abs_is_zero_at_zero_and_the_sign_elsewhere():
    d = backward.derivative(sp.Abs(x - y), x)
    assert [value(d, x=v, y=0) for v in (-2, 0, 3)] == [-1.0, 0.0, 1.0]
    assert backward.derivative(sp.Abs(x - y), y) == -d


def test_max_of_two_tensors_splits_a_tie_and_a_bound_passes_it():
    pair = sp.Max(x, y, evaluate=False)
    assert value(backward.derivative(pair, x), x=1, y=1) == 0.5
    assert value(backward.derivative(pair, y), x=1, y=1) == 0.5
    assert value(backward.derivative(pair, x), x=2, y=1) == 1.0
    hinge = sp.Max(x, c, evaluate=False)  # c a hyperparameter: clip's convention
    assert value(backward.derivative(hinge, x, frozenset({c})), x=1, c=1) == 1.0
    assert value(backward.derivative(hinge, x, frozenset({c})), x=0, c=1) == 0.0


def test_clip_passes_the_gradient_at_either_bound():
    d = backward.derivative(ir.Clip(x, -1, 1), x)
    assert [value(d, x=v) for v in (-2, -1, 0, 1, 2)] == [0.0, 1.0, 1.0, 1.0, 0.0]


def test_where_differentiates_the_selected_branch_only():
    guarded = ir.Where(sp.StrictGreaterThan(x, 0), sp.sqrt(ir.Where(sp.StrictGreaterThan(x, 0), x, 1)), 0)
    d = backward.derivative(guarded, x)
    assert value(d, x=0) == 0.0  # the fractional power's guard: 0 at 0, no NaN
    assert abs(value(d, x=4) - 0.25) < 1e-15


def test_stop_gradient_and_straight_through_estimator():
    assert backward.derivative(ir.StopGradient(x * x), x) == 0
    ste = x + ir.StopGradient(ir.Round(x) - x)
    assert backward.derivative(ste, x) == 1


def test_a_node_without_a_rule_is_named():
    with pytest.raises(backward.NoRule, match="Item"):
        backward.derivative(ir.Item(x, 0), x)


def test_rules_over_an_axis():
    C = sp.Symbol("C")
    assert backward.derivative(ir.ReduceSum(x * y, C), x) == y
    assert backward.derivative(ir.LogSumExp(x, C), x) == ir.Softmax(x, C)
    label = sp.Symbol("label")
    assert backward.derivative(ir.Gather(ir.LogSoftmax(x, C), label, C), x) == \
        ir.OneHot(label, C) - ir.Softmax(x, C) * ir.ReduceSum(ir.OneHot(label, C), C)


def test_plan_covers_elementwise_specs_and_names_why_others_fall_back():
    for name in ("mse", "huber", "bce", "focal"):
        plan = backward.plan(prepare(load_spec(f"specs/{name}.yaml")))
        assert isinstance(plan, backward.Plan), (name, plan)
    assert isinstance(backward.plan(prepare(load_spec("specs/cross_entropy.yaml"))), backward.Plan)  # ignore masks
    assert "learnable" in backward.plan(prepare(load_spec("specs/uncertainty_multitask.yaml")))
    assert isinstance(backward.plan(prepare(load_spec("specs/bce_with_logits.yaml"))), backward.Plan)  # two optional


def test_the_spec_field_is_checked():
    spec = load_spec("specs/mse.yaml")
    assert spec.backward == ""  # the project's default applies (autograd unless [tool.losscc] says)
    text = open("specs/mse.yaml", encoding="utf-8").read() + "backward: fastest\n"
    with pytest.raises(SpecError) as err:
        spec_from_text(text, "<mse>")
    (d,) = err.value.diagnostics
    assert d.code == "E135" and "backward" in d.format()


def test_autograd_specs_generate_no_custom_backward():
    spec = load_spec("specs/mse.yaml")
    assert "PyLayer" not in compile_spec(spec, get("paddle"))
    assert "bprop" not in compile_spec(spec, get("mindspore"))


# ----------------------------------------------------------------------- the generated classes

@pytest.fixture(scope="module")
def mse_modules(tmp_path_factory):
    spec = dataclasses.replace(load_spec("specs/mse.yaml"), backward="custom")
    tmp = tmp_path_factory.mktemp("backward")
    out = {}
    for b in ("paddle", "mindspore"):
        if b not in AVAILABLE:
            continue
        path = tmp / f"{b}_mse.py"
        path.write_text(compile_spec(spec, get(b)), encoding="utf-8")
        out[b] = verify.load_module(path, f"losscc_test_backward_{b}_mse")
    return out


X = np.array([[0.5, -1.0, 2.0], [0.25, 0.0, -3.0]])
Y = np.array([[0.0, 1.0, 1.5], [0.25, -2.0, 1.0]])
W = np.array([0.5, 2.0, 1.0])


def expected_grads(weighted: bool):
    """d/dx, d/dy, d/dw of the weighted mean sum(w (x - y)^2) / sum(w) (w broadcast), by hand."""
    w = np.broadcast_to(W, X.shape) if weighted else np.ones_like(X)
    s = w.sum()
    r = (w * (X - Y) ** 2).sum() / s
    gx = 2 * w * (X - Y) / s
    gw = ((X - Y) ** 2 - r).sum(axis=0) / s
    return gx, -gx, gw


@pytest.mark.parametrize("mode", ["eager", "to_static"])
def test_paddle_runs_the_pylayer(mse_modules, mode, monkeypatch):
    if "paddle" not in mse_modules:
        pytest.skip("paddle is not installed")
    import paddle

    mod = mse_modules["paddle"]
    calls = []
    real = mod._mse_grad

    def spy(dout, input, target, weight, reduction):  # the gradient times 3: seen only if it runs
        calls.append(reduction)
        return real(dout * 3, input, target, weight, reduction)

    monkeypatch.setattr(mod, "_mse_grad", spy)
    layer = mod.Mse(reduction="mean")
    f = paddle.jit.to_static(layer, full_graph=True) if mode == "to_static" else layer
    ts = [paddle.to_tensor(a, stop_gradient=False) for a in (X, Y, W)]
    f(*ts).backward()
    assert calls
    for t, want in zip(ts, expected_grads(True)):
        np.testing.assert_allclose(t.grad.numpy(), 3 * want, rtol=1e-12)


@pytest.mark.parametrize("mode", ["pynative", "jit", "graph"])
def test_mindspore_runs_the_bprop(mse_modules, mode, monkeypatch):
    if "mindspore" not in mse_modules:
        pytest.skip("mindspore is not installed")
    import mindspore as ms

    mod = mse_modules["mindspore"]
    real = mod._mse_grad

    def spy(dout, input, target, weight, reduction):  # the gradient times 3: seen only if it runs
        return real(dout * 3, input, target, weight, reduction)

    monkeypatch.setattr(mod, "_mse_grad", spy)
    cell = mod.Mse(reduction="mean")
    vg = ms.value_and_grad(cell, grad_position=(0, 1, 2))
    if mode == "jit":
        vg = ms.jit(vg)
    if mode == "graph":
        ms.set_context(mode=ms.GRAPH_MODE)
    try:
        _, grads = vg(*[ms.Tensor(a) for a in (X, Y, W)])
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    for g, want in zip(grads, expected_grads(True)):
        np.testing.assert_allclose(g.asnumpy(), 3 * want, rtol=1e-12)


def test_paddle_second_derivative_through_the_pylayer(mse_modules):
    """create_graph=True: the backward recomputes from the saved inputs, so it is differentiable."""
    if "paddle" not in mse_modules:
        pytest.skip("paddle is not installed")
    import paddle

    mod = mse_modules["paddle"]
    xt = paddle.to_tensor(X, stop_gradient=False)
    yt = paddle.to_tensor(Y)
    (g,) = paddle.grad(mod.Mse(reduction="sum")(xt, yt), [xt], create_graph=True)
    (gg,) = paddle.grad((g * g).sum(), [xt])
    np.testing.assert_allclose(gg.numpy(), 8 * (X - Y), rtol=1e-12)  # d/dx sum((2(x - y))^2)


def test_mindspore_second_derivative_through_the_bprop(mse_modules):
    if "mindspore" not in mse_modules:
        pytest.skip("mindspore is not installed")
    import mindspore as ms

    cell = mse_modules["mindspore"].Mse(reduction="sum")
    yt = ms.Tensor(Y)

    def loss(a):
        return cell(a, yt)

    def gsq(a):
        g = ms.grad(loss)(a)
        return (g * g).sum()

    np.testing.assert_allclose(ms.grad(gsq)(ms.Tensor(X)).asnumpy(), 8 * (X - Y), rtol=1e-12)


def test_the_project_default_fills_specs_without_the_field(tmp_path):
    from losscc.emit import load_all
    from losscc.project import find_project

    plain = tmp_path / "mse.yaml"
    plain.write_text(open("specs/mse.yaml", encoding="utf-8").read(), encoding="utf-8")
    own = tmp_path / "l1.yaml"
    own.write_text(open("specs/l1.yaml", encoding="utf-8").read() + "backward: autograd\n", encoding="utf-8")
    got = {s.name: s.backward for s in load_all([plain, own], backward="custom")}
    assert got == {"mse": "custom", "l1": "autograd"}
    (tmp_path / "pyproject.toml").write_text('[tool.losscc]\nbackward = "auto"\n', encoding="utf-8")
    assert find_project(tmp_path).backward == "auto"
    (tmp_path / "pyproject.toml").write_text('[tool.losscc]\nbackward = "fast"\n', encoding="utf-8")
    with pytest.raises(SpecError, match="backward: expected one of autograd, custom, auto"):
        find_project(tmp_path)


@pytest.fixture(scope="module")
def focal_modules(tmp_path_factory):
    spec = dataclasses.replace(load_spec("specs/focal.yaml"), backward="custom")
    tmp = tmp_path_factory.mktemp("backward_focal")
    out = {}
    for b in ("paddle", "mindspore"):
        if b in AVAILABLE:
            path = tmp / f"{b}_focal.py"
            path.write_text(compile_spec(spec, get(b)), encoding="utf-8")
            out[b] = verify.load_module(path, f"losscc_test_backward_{b}_focal")
    return out


LOGITS = np.array([[2.0, 0.5, -1.0], [0.0, 3.0, 1.0], [-2.0, 0.0, 0.5], [1.0, 1.0, 1.0]])
LABEL = np.array([0, 2, 1, 1])
ROW = np.array([1.0, -2.0, 0.5, 3.0])  # upstream gradient of reduction none, in the loss's own shape


def test_a_class_loss_backward_in_paddle(focal_modules):
    """focal: softmax, gather and an integer label; reduction none takes dout in the loss's
    shape (not the canonical layout), compared with the function's autograd."""
    if "paddle" not in focal_modules:
        pytest.skip("paddle is not installed")
    import paddle

    mod = focal_modules["paddle"]
    assert "PyLayer" in open(mod.__file__, encoding="utf-8").read()
    label, row = paddle.to_tensor(LABEL), paddle.to_tensor(ROW)
    for red in ("none", "mean"):
        grads = []
        for f in (lambda a, k: mod.focal(a, k, reduction=red), mod.Focal(reduction=red),
                  paddle.jit.to_static(mod.Focal(reduction=red), full_graph=True)):
            a = paddle.to_tensor(LOGITS, stop_gradient=False)
            out = f(a, label)
            (out * row if red == "none" else out).sum().backward()
            grads.append(a.grad.numpy())
        np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(grads[2], grads[0], rtol=1e-12, atol=1e-15)


def test_a_class_loss_backward_in_mindspore(focal_modules):
    if "mindspore" not in focal_modules:
        pytest.skip("mindspore is not installed")
    import mindspore as ms

    mod = focal_modules["mindspore"]
    label, row = ms.Tensor(LABEL), ms.Tensor(ROW)
    cell = mod.Focal(reduction="none")

    def by_function(a):
        return (mod.focal(a, label, reduction="none") * row).sum()

    def by_class(a):
        return (cell(a, label) * row).sum()

    want = ms.grad(by_function)(ms.Tensor(LOGITS)).asnumpy()
    got = ms.jit(ms.grad(by_class))(ms.Tensor(LOGITS)).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_ignored_positions_and_class_weights(tmp_path):
    """nll: an ignore mask and a weight per class (summed back to its shape [C]); the weighted
    mean's gradient, eagerly in Paddle, equals the function's autograd."""
    if "paddle" not in AVAILABLE:
        pytest.skip("paddle is not installed")
    import paddle

    spec = dataclasses.replace(load_spec("specs/nll.yaml"), backward="custom")
    path = tmp_path / "paddle_nll.py"
    path.write_text(compile_spec(spec, get("paddle")), encoding="utf-8")
    mod = verify.load_module(path, "losscc_test_backward_paddle_nll")
    target = paddle.to_tensor(np.array([0, -100, 2, 1]))
    grads = []
    for f in (lambda a, t, w: mod.nll(a, t, weight=w), mod.Nll()):
        a = paddle.to_tensor(LOGITS, stop_gradient=False)
        w = paddle.to_tensor(np.array([0.5, 2.0, 1.0]), stop_gradient=False)
        f(a, target, w).backward()
        grads.append((a.grad.numpy(), w.grad.numpy()))
    assert not grads[1][0][1].any()  # the ignored row
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
