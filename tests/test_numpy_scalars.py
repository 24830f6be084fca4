"""NumPy scalars as hyperparameters: a config read through NumPy gives np.float32, np.int64
and np.bool_, which the built-ins take.  The generated ``_check`` takes them as the numbers
they stand for, and the function and the constructor convert them to Python numbers, so
``ms.jit`` and ``to_static`` see Python constants; strings, tensors, fractional ints and
numbers beyond float's range stay refused."""

from __future__ import annotations

import numpy as np
import pytest

from tests.codegen_util import modules, spec_of

SPEC = """
    name: np_scalars
    summary: s.
    inputs:
      x: {dtype: float, shape: [N, C]}
      y: {dtype: float, shape: [N, C]}
    params:
      scale: {default: 1.0, gt: 0, doc: A scale.}
      power: {default: 2, min: 1, max: 4, doc: An integer power.}
      shift: {default: false, doc: Add one.}
    formula: |
      loss = scale * abs(x - y)**power + where(shift, 1, 0)
"""

GIVEN = [(np.float32(0.5), np.int64(3), np.bool_(True)), (np.float64(2.0), np.int32(1), np.bool_(False)),
         (np.float16(1.5), np.float64(2.0), True)]


def _expected(x, y, scale, power, shift):
    return float(np.mean(float(scale) * np.abs(x - y) ** int(power) + (1.0 if shift else 0.0)))


@pytest.fixture(scope="module")
def arrays():
    rng = np.random.default_rng(3)
    return rng.normal(size=(3, 4)), rng.normal(size=(3, 4))


def test_check_converts_numpy_scalars_to_python_numbers(tmp_path):
    from losscc.backends import get
    from losscc.emit import compile_spec

    path = tmp_path / "m.py"
    path.write_text(compile_spec(spec_of(SPEC), get("paddle")))
    src = path.read_text()
    assert "import numbers" in src
    lines = [ln.strip() for ln in src.splitlines()]
    at = lines.index("_check(scale, power, shift, reduction)")  # the function's, then the class's
    assert lines[at + 1:at + 4] == ["scale = float(scale)", "power = int(power)", "shift = bool(shift)"]
    # `_check` alone runs without the framework: take it out of the module's text
    start = src.index("def _check(")
    ns: dict = {}
    exec(compile("import numbers\n" + src[start:src.index("\n\n\n", start)], "check", "exec"), ns)
    for scale, power, shift in GIVEN:
        assert ns["_check"](scale, power, shift, "mean") is None
    for bad, err in [(("0.5", 2, True), TypeError), ((0.5, np.float32(2.5), True), TypeError),
                     ((0.5, 2, np.int64(1)), TypeError), ((np.float32(0.0), 2, True), ValueError),
                     ((0.5, np.int64(5), True), ValueError), ((np.bool_(True), 2, True), TypeError),
                     ((-10**400, 2, True), TypeError), ((0.5, 10**400, True), TypeError)]:
        with pytest.raises(err, match="np_scalars: "):
            ns["_check"](*bad, "mean")


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_numpy_scalars_run_eager_and_compiled(backend, tmp_path, arrays):
    pytest.importorskip(backend)
    mod = modules(spec_of(SPEC), tmp_path)[backend]
    x, y = arrays
    if backend == "mindspore":
        import mindspore as ms

        def call(fn, params, jit=False):
            f = ms.jit(fn) if jit else fn
            return float(f(ms.Tensor(x), ms.Tensor(y), **params).asnumpy())

        def cell(params, jit=False):
            c = mod.NpScalars(**params)
            return float((ms.jit(c.construct) if jit else c)(ms.Tensor(x), ms.Tensor(y)).asnumpy())
    else:
        import paddle

        def call(fn, params, jit=False):
            f = paddle.jit.to_static(fn) if jit else fn
            return float(f(paddle.to_tensor(x), paddle.to_tensor(y), **params))

        def cell(params, jit=False):
            c = mod.NpScalars(**params)
            return float((paddle.jit.to_static(c) if jit else c)(paddle.to_tensor(x), paddle.to_tensor(y)))
    for scale, power, shift in GIVEN:
        want = _expected(x, y, scale, power, shift)
        params = {"scale": scale, "power": power, "shift": shift}
        for jit in (False, True):
            assert call(mod.np_scalars, params, jit=jit) == pytest.approx(want, rel=1e-12), (params, jit)
            assert cell(params, jit=jit) == pytest.approx(want, rel=1e-12), (params, jit)
    with pytest.raises(TypeError, match="np_scalars: power must be an int >= 1 and <= 4; received: power="):
        mod.NpScalars(power=np.float32(2.5))
