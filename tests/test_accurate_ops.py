"""Operators whose value must keep its relative accuracy where it is tiny (the per-element
check of docs/verify.md): softplus far below 0, log1p/expm1 near 0, log_softmax near 0 (a
dominant logit); and the gradients of sigmoid and tanh in their tails. Each backend's spelling, with its helpers, is run in float64 and float32
against mpmath, and where a native kernel was replaced, the kernel is shown to fail the
same bound (so the choice is needed, not only harmless)."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
from tests.backend_util import BACKENDS

from losscc import verify
from losscc.backends import get

ULPS = 8  # a few libm calls and one sum: every spelling is within a few ulps

SOFTPLUS_X = (-745.0, -700.0, -90.0, -50.0, -30.0, -20.0, -5.0, -1e-3, 0.0, 1e-3, 3.0, 30.0, 100.0)
TINY_U = (-1e-3, -1e-10, -1e-30, 0.0, 1e-30, 1e-10, 1e-3, 0.5, 3.0)
# rows of logits: the first entry dominates (log_softmax ~ -2e-20, -1e-8), two tied maxima
LOGITS = ((0.0, -45.0, -46.0), (3.0, -15.0, 2.0 - 18.0), (1.0, 1.0, -2.0), (0.5, -0.25, 2.0),
          (1e-20, -1e-20, 5e-21))  # tiny distinct logits: Paddle's float == has a tolerance there


def _probe(backend, key, names, tmp_path, **code):
    b = get(backend)
    src = "\n".join(b.imports) + "\n\n\n" + "".join(f"{h}\n\n\n" for h in b.helper_sources(key))
    src += f"def probe({', '.join(names)}):\n    return {b.op(key, **{n: n for n in names}, **code)}\n"
    path = tmp_path / f"acc_{backend}_{key}.py"
    path.write_text(src, encoding="utf-8")
    return verify.load_module(path, f"losscc_acc_{backend}_{key}_{abs(hash(str(tmp_path)))}").probe


def _rel(got, exact, dtype):
    """|got - exact| / |exact| where exact is a normal number of the dtype (else 0)."""
    got, exact = np.asarray(got, float), np.asarray(exact, float)
    normal = np.abs(exact) >= np.finfo(dtype).tiny
    return np.where(normal, np.abs(got - exact) / np.where(normal, np.abs(exact), 1), 0)


def _exact(f, xs, dtype):
    """f at the dtype-rounded inputs, in mpmath at 50 digits (rounded to float64)."""
    with mp.workdps(50):
        return np.array([float(f(mp.mpf(float(v)))) for v in np.asarray(xs, dtype)])


def _softplus(x):
    return mp.log1p(mp.exp(x))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_softplus_is_accurate_far_below_zero(backend, dtype, tmp_path):
    x = np.array(SOFTPLUS_X)
    value, (grad,) = verify.runner(backend).gradient(_probe(backend, "softplus", ["x"], tmp_path), [x], dtype, "eager")
    eps = np.finfo(dtype).eps
    assert np.max(_rel(value, _exact(_softplus, x, dtype), dtype)) <= ULPS * eps
    sigmoid = _exact(lambda v: 1 / (1 + mp.exp(-v)), x, dtype)
    assert np.max(_rel(grad, sigmoid, dtype)) <= ULPS * eps


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key, f", [("log1p", mp.log1p), ("expm1", mp.expm1)])
def test_log1p_and_expm1_keep_tiny_arguments(key, f, backend, dtype, tmp_path):
    u = np.array(TINY_U)
    value, _ = verify.runner(backend).gradient(_probe(backend, key, ["x"], tmp_path), [u], dtype, "eager")
    assert np.max(_rel(value, _exact(f, u, dtype), dtype)) <= ULPS * np.finfo(dtype).eps


def _condition(z, exact):
    """Per entry of log_softmax, S = sum_j |z_j * d/dz_j|: the error that a relative error
    eps in every operand causes, verify's per-element floor (docs/verify.md). MindSpore's
    float32 exp is off by about eps * |x| (its range reduction), within that floor."""
    p = np.exp(exact)[:, None, :]
    return (np.abs(z)[:, None, :] * np.abs(np.eye(z.shape[1])[None] - p)).sum(-1)


def _log_softmax_exact(z):
    with mp.workdps(50):
        out = []
        for row in z:
            lse = mp.log(sum(mp.exp(mp.mpf(float(v))) for v in row))
            out.append([float(mp.mpf(float(v)) - lse) for v in row])
        return np.array(out)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_log_softmax_is_accurate_near_zero(backend, dtype, tmp_path):
    z = np.array(LOGITS)
    exact = _log_softmax_exact(z.astype(dtype))
    value, (grad,) = verify.runner(backend).gradient(
        _probe(backend, "log_softmax", ["x"], tmp_path, axis="-1"), [z], dtype, "eager")
    eps = np.finfo(dtype).eps
    assert np.all(np.abs(value - exact) <= ULPS * eps * (np.abs(exact) + _condition(z, exact)))
    assert np.abs(value[0, 0] - exact[0, 0]) < 1e-3 * abs(exact[0, 0])  # z - logsumexp(z) gives 0
    # d/dz_j of sum_i log_softmax_i = 1 - C * softmax_j, also at the tied maxima
    want = 1 - z.shape[1] * np.exp(exact)
    np.testing.assert_allclose(grad, want, rtol=ULPS * eps, atol=ULPS * eps)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_gathered_log_softmax_is_accurate_near_zero(backend, dtype, tmp_path):
    z = np.array(LOGITS)
    index = np.array([[0], [0], [1], [2], [0]])
    full = _log_softmax_exact(z.astype(dtype))
    exact = np.take_along_axis(full, index, axis=1)
    value, (grad, _) = verify.runner(backend).gradient(
        _probe(backend, "gather_log_softmax", ["x", "index"], tmp_path, axis="-1"), [z, index], dtype, "eager")
    eps = np.finfo(dtype).eps
    cond = np.take_along_axis(_condition(z, full), index, axis=1)
    assert np.all(np.abs(value - exact) <= ULPS * eps * (np.abs(exact) + cond))
    assert np.abs(value[0, 0] - exact[0, 0]) < 1e-3 * abs(exact[0, 0])
    want = np.exp(_log_softmax_exact(z.astype(dtype)))
    np.put_along_axis(want, index, np.take_along_axis(want, index, axis=1) - 1, axis=1)
    np.testing.assert_allclose(grad, -want, rtol=ULPS * eps, atol=ULPS * eps)


TAIL_X = (-80.0, -30.0, -12.0, -5.0, -0.75, -0.5, -0.25, -1e-3, 0.0, 1e-6, 0.3, 0.5, 2.0, 4.0, 9.5, 20.0, 30.0, 80.0)


def _sech2(v):
    return mp.sech(v) ** 2


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key, f, df", [
    ("sigmoid", lambda v: 1 / (1 + mp.exp(-v)), lambda v: 1 / ((1 + mp.exp(-v)) * (1 + mp.exp(v)))),
    ("tanh", mp.tanh, _sech2)])
def test_sigmoid_and_tanh_gradients_keep_their_tails(key, f, df, backend, dtype, tmp_path):
    """The gradient is e^-|x| (sigmoid) or 4 e^-2|x| (tanh) far out, where the native
    kernels give 0 (s (1 - s), 1 - t**2 of the rounded output)."""
    x = np.array(TAIL_X)
    value, (grad,) = verify.runner(backend).gradient(_probe(backend, key, ["x"], tmp_path), [x], dtype, "eager")
    eps = np.finfo(dtype).eps
    assert np.max(_rel(value, _exact(f, x, dtype), dtype)) <= ULPS * eps
    assert np.max(_rel(grad, _exact(df, x, dtype), dtype)) <= ULPS * eps


# ---------------------------------------------------------------- the kernels replaced fail the bound

def test_native_softplus_kernels_lose_the_tail():
    ms = pytest.importorskip("mindspore")
    paddle = pytest.importorskip("paddle")
    x = np.array([-30.0])
    exact = _exact(_softplus, x, "float64")
    native = paddle.nn.functional.softplus(paddle.to_tensor(x), threshold=40.0).numpy()
    assert _rel(native, exact, "float64")[0] > 1e-4  # log(1 + exp(x)): 9.348e-14 for 9.358e-14
    native = ms.ops.softplus(ms.Tensor(np.full(8, -30.0, np.float32))).asnumpy()
    assert native[0] == 0  # float32, vectorised (from 4 entries): flushed


def test_native_mindspore_log1p_and_composed_log_softmax_lose_tiny_values():
    ms = pytest.importorskip("mindspore")
    u = np.array([1e-10], np.float32)
    assert _rel(ms.ops.log1p(ms.Tensor(u)).asnumpy(), _exact(mp.log1p, u, "float32"), "float32")[0] > 1e-3
    z = np.array([LOGITS[0]])
    lse = ms.ops.logsumexp(ms.Tensor(z), -1, keepdim=True).asnumpy()
    assert (z - lse)[0, 0] == 0  # the exact value is -5.4e-20


def test_native_sigmoid_and_tanh_kernels_lose_the_tail():
    ms = pytest.importorskip("mindspore")
    paddle = pytest.importorskip("paddle")
    x = paddle.to_tensor(np.array([40.0, 25.0]), stop_gradient=False)
    (paddle.nn.functional.sigmoid(x[:1]).sum() + paddle.tanh(x[1:]).sum()).backward()
    assert list(x.grad.numpy()) == [0.0, 0.0]  # the truths are 4.2e-18 and 7.7e-22
    x = np.linspace(3.0, 6.0, 16).astype(np.float32)
    t = ms.ops.tanh(ms.Tensor(x)).asnumpy()  # MindSpore's float32 kernel: 1e-4 relative
    assert np.max(_rel(t, _exact(mp.tanh, x, "float32"), "float32")) > 1e-5


EXP_X = (-87.0, -80.3, -30.0, -10.0, -1.5, -1e-3, 0.0, 1e-6, 0.7, 3.3, 10.0, 45.5, 80.25, 88.0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_exp_is_accurate_in_both_dtypes(backend, dtype, tmp_path):
    """MindSpore's float32 exp kernel is off by up to 2e-5 relative (near 80), which sums of
    exponentials and cancellations carry into losses; each backend's spelling is held to a
    few ulps, value and gradient."""
    x = np.array(EXP_X)
    value, (grad,) = verify.runner(backend).gradient(_probe(backend, "exp", ["x"], tmp_path), [x], dtype, "eager")
    eps = np.finfo(dtype).eps
    exact = _exact(mp.exp, x, dtype)
    assert np.max(_rel(value, exact, dtype)) <= ULPS * eps
    assert np.max(_rel(grad, exact, dtype)) <= ULPS * eps


def test_native_mindspore_float32_exp_is_not_accurate():
    ms = pytest.importorskip("mindspore")
    x = np.linspace(79.0, 81.0, 64).astype(np.float32)
    got = ms.ops.exp(ms.Tensor(x)).asnumpy()
    assert np.max(_rel(got, _exact(mp.exp, x, "float32"), "float32")) > 1e-5


LOG_X = (1e-30, 1e-8, 0.01, 0.37, 0.999, 0.9999999, 1.0, 1.0000001, 1.001, 2.5, 100.0, 3e30)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_log_is_accurate_in_both_dtypes(backend, dtype, tmp_path):
    """MindSpore's float32 log kernel is off by up to 3e-5 relative near 1; each backend's
    spelling is held to a few ulps, value and gradient (where the value is not 0)."""
    x = np.array(LOG_X)
    value, (grad,) = verify.runner(backend).gradient(_probe(backend, "log", ["x"], tmp_path), [x], dtype, "eager")
    eps = np.finfo(dtype).eps
    assert np.max(_rel(value, _exact(mp.log, x, dtype), dtype)) <= ULPS * eps
    assert np.max(_rel(grad, _exact(lambda v: 1 / v, x, dtype), dtype)) <= ULPS * eps


ATAN_X = (-1e6, -30.0, -1.0, -1e-3, -1e-30, 0.0, 1e-30, 1e-3, 0.5, 1.0, 7.0, 1e3, 1e9)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_atan_and_its_gradient(backend, dtype, tmp_path):
    """atan (a registry entry since CIoU needs it): value and 1 / (1 + x**2) within a few ulps."""
    x = np.array(ATAN_X)
    value, (grad,) = verify.runner(backend).gradient(_probe(backend, "atan", ["x"], tmp_path), [x], dtype, "eager")
    eps = np.finfo(dtype).eps
    assert np.max(_rel(value, _exact(mp.atan, x, dtype), dtype)) <= ULPS * eps
    assert np.max(_rel(grad, _exact(lambda v: 1 / (1 + v * v), x, dtype), dtype)) <= ULPS * eps


EXPM1_X = (-80.0, -30.0, -12.0, -9.0, -7.0, -5.0, -1.5, -1.0, -0.5, -1e-6, 0.0, 1e-6, 0.5, 3.0, 20.0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_expm1_keeps_its_gradient_far_below_zero(backend, dtype, tmp_path):
    """The native gradient is out + 1 of the rounded out: 0 where out rounds to -1 (Welsch's
    loss lost its gradient beyond r = 7 in float32); MindSpore's quotient cancelled."""
    x = np.array(EXPM1_X)
    value, (grad,) = verify.runner(backend).gradient(_probe(backend, "expm1", ["x"], tmp_path), [x], dtype, "eager")
    eps = np.finfo(dtype).eps
    assert np.max(_rel(value, _exact(mp.expm1, x, dtype), dtype)) <= ULPS * eps
    assert np.max(_rel(grad, _exact(mp.exp, x, dtype), dtype)) <= ULPS * eps


CONFIDENT = ((46.0, 0.0, -80.0), (20.0, -3.0, 1.0), (5.0, 4.0, -1.0), (0.5, 3.0, 3.0))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_picked_logit_keeps_its_gradient_when_confident(backend, dtype, tmp_path):
    """d log_softmax(z)[y] / d z_y = 1 - p_y = the other entries' probabilities: computed as
    1 / (1 + rest) - 1 it rounded to 0 at logits [46, 0, -80] (fresh-loss trial 11)."""
    z = np.array(CONFIDENT)
    index = np.array([[0], [0], [0], [1]])
    _, (grad, _) = verify.runner(backend).gradient(
        _probe(backend, "gather_log_softmax", ["x", "index"], tmp_path, axis="-1"), [z, index], dtype, "eager")
    with mp.workdps(60):
        want = []
        for row, y in zip(np.asarray(z, dtype).astype(float), index[:, 0]):
            e = [mp.exp(mp.mpf(v) - mp.mpf(max(row))) for v in row]
            p = [v / sum(e) for v in e]
            want.append([float(sum(p[j] for j in range(len(row)) if j != y)) if k == y else float(-p[k])
                         for k in range(len(row))])
    assert np.max(_rel(grad, np.array(want), dtype)) <= ULPS * np.finfo(dtype).eps, (grad, want)
