"""Defects a new user's losses found (fresh-loss trial 9, 2026-12-06), each as the smallest
spec that showed it."""

from __future__ import annotations

from pathlib import Path

import pytest

from losscc import verify
from losscc.emit import compile_spec
from losscc.backends import get
from losscc.parse import build_program
from losscc.ranges import Ranges
from losscc.spec import spec_from_text

# p > 1, r < 2, z in (0, 1): p - 1, 2 - r and 1 - z are never 0, so no eps is added; at the
# case's p - 1 = 2**-10 (below the eps 1e-3) a clamp to eps gave 1000 + 1 for 1024 + 1
STRICT = """
name: strict_bounds
summary: Denominators that strict bounds keep from 0.
inputs:
  x: {dtype: float, shape: [N]}
  z: {dtype: float, shape: [N], domain: "(0, 1)"}
params:
  p: {default: 1.5, gt: 1}
  r: {default: 1.5, lt: 2}
  k: {default: 1.5, min: 1}
guards: {eps: 1.0e-3}
formula: |
  loss = x**2 / (p - 1) + x**2 / (2 - r) + x**2 / (1 - z) + x**2 / (k - 1)
cases:
  - id: near_the_strict_bounds
    inputs: {x: [1.0], z: [0.9990234375]}
    params: {p: 1.0009765625, r: 1.9990234375, k: 2.0}
    expected: {none: [3073.0]}
"""


def test_a_strict_bound_keeps_a_difference_from_zero():
    spec = spec_from_text(STRICT, "strict.yaml")
    prog = build_program(spec)
    s = prog.symbols
    ranges = Ranges(prog)
    # > 0 over the reals, but p = 1 + 1e-8 rounds to 1 in float32 (red-team round 11): "tight",
    # clamped at 1e-30, exact wherever the dtype holds the margin; min: 1 reaches 0 (eps)
    for d in (s["p"] - 1, 2 - s["r"], 1 - s["z"]):
        assert ranges.of(d).tight and ranges.nonneg(d) and not ranges.positive(d)
    assert not ranges.of(s["k"] - 1).tight and ranges.nonneg(s["k"] - 1)
    body = compile_spec(spec, get("paddle")).split("def strict_bounds(")[1]
    assert body.count("1e-30") == 3 and body.count("0.001") == 1


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_a_strict_bound_gives_the_exact_value_near_it(backend):
    spec = spec_from_text(STRICT, "strict.yaml")
    rows = verify.run([spec], (backend,), dtypes=("float64",), modes=("eager",), root=Path("."))
    assert rows and all(r.ok for r in rows), [r.failures[:2] for r in rows]


CIOU_ASPECT = """
name: ciou_aspect
summary: CIoU's aspect-ratio consistency term.
inputs:
  w: {dtype: float, shape: [N], domain: "(0, inf)"}
  h: {dtype: float, shape: [N], domain: "(0, inf)"}
  wg: {dtype: float, shape: [N], domain: "(0, inf)"}
  hg: {dtype: float, shape: [N], domain: "(0, inf)"}
formula: |
  v = 4 / pi**2 * (atan(wg / hg) - atan(w / h))**2
  loss = v + atan(w - h)
"""


@pytest.mark.parametrize("backward", ["autograd", "custom"])
@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_atan_is_a_function_of_the_language(backend, backward):
    """CIoU's aspect term needs atan, which was an unknown function whose hint was tanh."""
    spec = spec_from_text(CIOU_ASPECT + f"backward: {backward}\n", "ciou_aspect.yaml")
    rows = verify.run([spec], (backend,), dtypes=("float64", "float32"), modes=("eager", "graph"), root=Path("."))
    assert len(rows) == 4 and all(r.ok for r in rows), [r.failures[:2] for r in rows]
    if backward == "custom":
        assert "Backward" in compile_spec(spec, get(backend))


def test_the_cumulative_sum_hint_is_a_formula_that_compiles():
    """The hint wrote an input named T, which is no snake_case name (E120), on axes J and K (E235)."""
    import re

    from losscc.functions import FUNCTIONS

    doc = next(f.doc for f in FUNCTIONS if f.name == "cumsum")
    formula = re.search(r"(sum\(where\(.*?axis=J\))", doc).group(1)
    build_program(spec_from_text("name: emd\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N, K]}\n"
                                 f"formula: |\n  loss = sum(abs({formula}), axis=K)\n", "emd.yaml"))


TUKEY = """
name: tukey_biweight
summary: Tukey's biweight.
inputs:
  pred: {dtype: float, shape: [N]}
  target: {dtype: float, shape: [N]}
params:
  c: {default: 1.0, min: 0.001}
formula: |
  r = pred - target
  loss = where(abs(r) <= c, c**2 / 6 * (1 - (1 - (r / c)**2)**3), c**2 / 6)
"""


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_an_integer_power_difference_keeps_its_gradient_near_the_cutoff(backend, tmp_path):
    """1 - (1 - u)**3 factored as u (w**2 + w + 1), w = 1 - u, differentiates into O(1) terms
    cancelling to 3 w**2: at r = 0.9999 c the float32 gradient was 83% low (0 under ms.jit)."""
    import mpmath
    import numpy as np

    spec = spec_from_text(TUKEY, "tukey_biweight.yaml")
    path = tmp_path / f"tukey_{backend}.py"
    path.write_text(compile_spec(spec, get(backend)), encoding="utf-8")
    f = verify.load_module(path, f"losscc_tukey9_{backend}").tukey_biweight
    r = np.array([0.9999, 0.999, 0.99, 0.5, 1e-3], dtype=np.float32)
    _, (grad, _) = verify.runner(backend).gradient(lambda p, t: f(p, t, reduction="sum"), [r, np.zeros_like(r)],
                                                   "float32", "eager")
    with mpmath.workdps(40):
        exact = np.array([float(mpmath.mpf(float(v)) * (1 - mpmath.mpf(float(v)) ** 2) ** 2) for v in r])
    assert np.max(np.abs(grad - exact) / exact) < 1e-3, (grad, exact)


def test_random_cases_vary_int_hyperparameters_within_their_bounds():
    """verify drew every int hyperparameter at its default: an exponent 1 / r was only ever
    checked at r = 3."""
    from losscc.draws import random_cases

    spec = spec_from_text("name: t\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N], domain: \"(0, inf)\"}\n"
                          "params:\n  r: {default: 3, min: 1, max: 4}\n  q: {default: 2, min: 2, max: 2}\n"
                          "  s: {default: 4, min: 1, max: 4}\nformula: |\n  loss = x**(1 / r) * q * s\n", "t.yaml")
    drawn = [c.params for c in random_cases(spec, 3, seed=0)]
    assert [d["r"] for d in drawn] == [3, 4, 2]
    assert [d["q"] for d in drawn] == [2, 2, 2] and [d["s"] for d in drawn] == [4, 3, 3]
    assert all(isinstance(d["r"], int) for d in drawn)


IDIV = """
name: idiv
summary: Division by int hyperparameters.
inputs:
  x: {dtype: float, shape: [N]}
params:
  k: {default: 7, min: 2}
formula: |
  loss = x / k + x**2 / (k - 1) + exp(x / (2 * k)) + x / k**2
"""


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_a_tensor_divided_by_an_int_hyperparameter_keeps_float64(backend):
    """Paddle's to_static turned x / k (k a Python int) into a scale by float32 1/k:
    0.3333333432674408 for 1/3 in float64 (fresh-loss trial 10, a Renyi divergence at alpha = 8);
    k**2 of a Python int was paddle.square(k), which takes tensors only (red-team round 11)."""
    spec = spec_from_text(IDIV, "idiv.yaml")
    rows = verify.run([spec], (backend,), dtypes=("float64",), modes=("eager", "graph"), root=Path("."))
    assert len(rows) == 2 and all(r.ok for r in rows), [r.failures[:2] for r in rows]


def test_a_custom_backward_that_keeps_autograd_says_so_and_verify_keeps_the_projects_backends(tmp_path):
    """`backward: custom` fell back to autograd in silence (verify --backward custom reported a
    pass of the autograd run); verify ran every backend although [tool.losscc] named one."""
    import subprocess
    import sys

    (tmp_path / "pyproject.toml").write_text('[tool.losscc]\nbackends = ["paddle"]\n', encoding="utf-8")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "scaled.yaml").write_text(
        "name: scaled\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\nlearnable:\n"
        "  w: {shape: [1], init: 1.0}\nformula: |\n  loss = w[0] * x**2\nbackward: custom\n", encoding="utf-8")
    gen = subprocess.run([sys.executable, "-m", "losscc", "generate"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert gen.returncode == 0 and "W310" in gen.stderr and "keeps autograd in paddle" in gen.stderr
    ver = subprocess.run([sys.executable, "-m", "losscc", "verify", "--dtype", "float64", "--mode", "eager"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ver.returncode == 0, ver.stdout + ver.stderr
    assert "W310" in ver.stderr and "paddle" in ver.stdout and "mindspore" not in ver.stdout + ver.stderr


ITAKURA_SAITO = """
name: itakura_saito
summary: Itakura-Saito divergence.
inputs:
  input: {dtype: float, shape: [N], domain: "(0, inf)"}
  target: {dtype: float, shape: [N], domain: "(0, inf)"}
formula: |
  r = target / input
  loss = r - log(r) - 1
"""


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_a_split_log_ratio_is_subtracted_before_the_other_terms(backend, tmp_path):
    """log-of-quotient gives r + log(i) - log(t) - 1; summed left to right, log(i) rounded
    into r + log(i) first: -1.19e-7 at a perfect prediction in float32 (fresh-loss trial 10)."""
    import numpy as np

    spec = spec_from_text(ITAKURA_SAITO, "itakura_saito.yaml")
    source = compile_spec(spec, get(backend))
    path = tmp_path / f"is_{backend}.py"
    path.write_text(source, encoding="utf-8")
    f = verify.load_module(path, f"losscc_is9_{backend}").itakura_saito
    v = np.array([7.0, 3.3, 1e3, 0.1, 1.7], dtype=np.float32)
    value, _ = verify.runner(backend).gradient(lambda a, b: f(a, b, reduction="none"), [v, v], "float32", "eager")
    assert np.all(np.asarray(value) == 0), value


TIGHT = """
name: tight
summary: Margins the dtype may round away.
inputs:
  x: {dtype: float, shape: [N], domain: "[0, 1]"}
params:
  p: {default: 1.5, gt: 1}
  a: {default: 0.1, min: 0.1}
  b: {default: 0.2, min: 0.2}
  c: {default: 0.3, max: 0.3}
guards: {eps: 1.0e-7}
formula: |
  loss = log(p - x) + log(a + b - c) * x
"""


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_a_margin_the_dtype_rounds_away_is_still_guarded(backend, tmp_path):
    """p > 1 proved p - x > 0 for x <= 1, so no guard: p = 1.00000001 is 1 in float32 and
    log(p - x) was -inf (red-team round 11); 0.1 + 0.2 - 0.3 > 0 by 5.6e-17 likewise."""
    import numpy as np

    spec = spec_from_text(TIGHT, "tight.yaml")
    prog = build_program(spec)
    s = prog.symbols
    assert Ranges(prog).of(s["a"] + s["b"] - s["c"]).tight
    path = tmp_path / f"tight_{backend}.py"
    path.write_text(compile_spec(spec, get(backend)), encoding="utf-8")
    f = verify.load_module(path, f"losscc_tight9_{backend}").tight
    x = np.array([1.0, 0.5], dtype=np.float32)
    value, (grad,) = verify.runner(backend).gradient(
        lambda v: f(v, p=1.00000001, a=0.1, b=0.2, c=0.3, reduction="sum"), [x], "float32", "eager")
    assert np.isfinite(value) and np.all(np.isfinite(grad)), (value, grad)


BARRON = """
name: barron
summary: Barron's general robust loss at a fixed scale.
inputs:
  x: {dtype: float, shape: [N]}
params:
  alpha: {default: 1.0e-6, gt: 0, lt: 2}
formula: |
  b = 2 - alpha
  loss = b / alpha * ((x**2 / b + 1)**(alpha / 2) - 1)
"""


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_a_power_of_a_small_symbolic_exponent_keeps_its_value_far_out(backend, tmp_path):
    """(1 + U)**p - 1 with p = 5e-7 was taken as written beyond |U| = 1/2, where it cancels:
    17% off in float32 (fresh-loss trial 8); expm1(p log1p(U)) is taken while p log1p(U) is small."""
    import mpmath
    import numpy as np

    spec = spec_from_text(BARRON, "barron.yaml")
    path = tmp_path / f"barron_{backend}.py"
    path.write_text(compile_spec(spec, get(backend)), encoding="utf-8")
    f = verify.load_module(path, f"losscc_barron9_{backend}").barron
    x = np.array([0.5, 3.0, 10.0, 1e3, 1e6], dtype=np.float32)
    value, _ = verify.runner(backend).gradient(lambda v: f(v, reduction="none"), [x], "float32", "eager")
    with mpmath.workdps(50):
        a = mpmath.mpf(1e-6)
        exact = np.array([float((2 - a) / a * ((mpmath.mpf(float(v)) ** 2 / (2 - a) + 1) ** (a / 2) - 1)) for v in x])
    assert np.max(np.abs(np.asarray(value) - exact) / exact) < 1e-5, (value, exact)
