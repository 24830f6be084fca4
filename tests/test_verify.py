"""verify catches what it is for: a wrong expected value and a wrong operator mapping."""

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from losscc import verify
from losscc.backends import get
from losscc.emit import compile_spec
from losscc.spec import load_spec
from tests.backend_util import AVAILABLE

ROOT = Path(__file__).resolve().parent.parent


def ok(actual, expected, dtype, quantity="value"):
    return verify.check(actual, expected, dtype, quantity).ok


def test_compare_tolerances():
    # per element: float64 values to 256 ulps, float32 to 1e-5
    assert ok([1.0 + 1e-14], [1.0], "float64")
    assert not ok([1.0 + 1e-12], [1.0], "float64")
    assert ok([1.0 + 5e-6], [1.0], "float32")
    assert not ok([1.0 + 5e-5], [1.0], "float32")
    assert not ok([np.nan], [1.0], "float64")
    assert not ok([1.0, 2.0], [1.0], "float64")
    # a cancelled tiny gradient entry next to 1e6: its floor is the array's largest entry
    assert ok([1e6, 1e-7], [1e6, 0.0], "float64", "gradient")
    assert not ok([1.0, 1e-7], [1.0, 0.0], "float64", "gradient")
    # gradients get 4x the values' per-element tolerance
    assert ok([1.0 + 1.5e-13], [1.0], "float64", "gradient")
    assert not ok([1.0 + 1.5e-13], [1.0], "float64", "value")
    # the norm-wise measure alone (verify.compare, as before) passes what the new check fails
    assert verify.compare([1.0 + 1e-11], [1.0], "float64")[0]
    assert not verify.compare([1.0 + 1e-9], [1.0], "float64")[0]
    assert verify.compare([1e6, 1e-7], [1e6, 0.0], "float64")[0]


def test_per_element_check_catches_what_the_norm_wise_measure_hides():
    """log(cosh(d)) evaluated plainly at d = 1e-8 gives 1.11e-16 (cosh rounds to 1 + 2.2e-16);
    the truth is 5e-17.  The old measure err / max(|e|, atol * scale / rtol) calls that 6e-15
    and passes it; the per-element check does not."""
    d = np.array([1e-8, 0.5, -2.0])
    plain = np.log(np.cosh(d))
    plain[0] = 1.1102230246251565e-16  # what the frameworks' log(cosh(d)) and |d| + log1p(exp(-2|d|)) - log 2 give
    truth = np.array([5.0000000000000004e-17, 0.12011450695827752, 1.3250027473578645])
    old = verify.check(plain, truth, "float64", truth=False)
    assert old.ok and old.norm_err < 1e-14
    new = verify.check(plain, truth, "float64")
    assert not new.ok
    assert new.problem.startswith("relative error 1.22 at element [0]: got 1.1102230246251565e-16")
    # an accurate evaluation passes: log(cosh d) = log1p(2 sinh(d/2)**2)
    assert verify.check(np.log1p(2 * np.sinh(d / 2) ** 2), truth, "float64").ok
    # and a perturbed value at the tiny element fails the same way
    bumped = truth.copy()
    bumped[0] *= 1 + 1e-9
    assert verify.check(bumped, truth, "float64", truth=False).ok
    assert not verify.check(bumped, truth, "float64").ok


def test_condition_floor_and_subnormals():
    # exp(3) - 20 = 0.0855 from operands of size 20: one float32 ulp of 20 (1.9e-6) is 2e-5 of
    # the result; its condition S = |x * exp(x)| = 60.3 lets that through, and no more
    e = np.exp(3.0) - 20.0
    err = 2e-6
    assert verify.check([e + err], [e], "float32", magnitude=3.0, truth=False).ok
    assert not verify.check([e + err], [e], "float32", magnitude=3.0).ok
    assert verify.check([e + err], [e], "float32", magnitude=3.0, floor=3 * np.exp(3.0)).ok
    assert not verify.check([e + 1e-3], [e], "float32", magnitude=3.0, floor=3 * np.exp(3.0)).ok
    # an expected value subnormal in float32 is checked absolutely (to the smallest normal)
    assert verify.check([0.0], [5e-41], "float32").ok
    assert not verify.check([0.0], [5e-41], "float64").ok  # ... but is a normal float64
    assert not verify.check([1e-30], [0.0], "float64").ok


def test_nonfinite_messages_name_the_element():
    c = verify.check([[1.0, np.nan], [2.0, 3.0]], [[1.0, 0.5], [2.0, 3.0]], "float64", quantity="gradient")
    assert not c.ok and c.problem == "is NaN at element [0, 1] (expected 0.5)"
    c = verify.check([np.inf, 1.0], [2.0, 1.0], "float32")
    assert c.problem == "is inf at element [0] (expected 2)"


def test_tolerances_are_stated():
    for (dtype, quantity), tol in verify.ELEMENT_TOLERANCES.items():
        assert tol.dtype == dtype and tol.quantity == quantity and len(tol.reason) > 40
        assert tol.as_dict()["per_element_rtol"] == tol.rtol
    assert verify.ELEMENT_TOLERANCES["float64", "value"].ulps == 256
    assert verify.ELEMENT_TOLERANCES["float64", "gradient"].ulps == 1024


PLAIN_LOG_COSH = """
import paddle
from paddle import nn


class LogCosh(nn.Layer):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target, weight=None):
        d = input - target
        loss = {expr}
        if weight is not None:
            loss = loss * weight
        if self.reduction == "none":
            return loss
        return loss.sum() if self.reduction == "sum" else loss.mean()
"""


def test_plain_log_cosh_lowering_fails_verify(tmp_path):
    """verify_spec end to end with a hand-written plain lowering of log_cosh: the row fails at
    d = 1e-8 with a message naming the case, reduction, element and both values; an accurate
    lowering of the same formula passes."""
    spec = load_spec(ROOT / "specs/log_cosh.yaml", "specs/log_cosh.yaml")
    case = verify.CaseData("tiny_d", "test", {"input": np.array([1e-8, 0.5, -2.0]), "target": np.zeros(3),
                                              "weight": None}, {}, from_reference=True)
    runner = verify.runner("paddle")
    results = {}
    for tag, expr in (("plain", "paddle.log(paddle.cosh(d))"), ("accurate", "paddle.log1p(2 * paddle.sinh(d / 2) ** 2)")):
        path = tmp_path / f"log_cosh_{tag}.py"
        path.write_text(PLAIN_LOG_COSH.format(expr=expr))
        mod = verify.load_module(path, f"log_cosh_{tag}_{abs(hash(str(tmp_path)))}")
        results[tag] = verify.verify_spec(spec, {"paddle": mod}, {"paddle": runner}, ("float64",), ("eager",),
                                          [case])[0]  # the per-element check is the default
        if tag == "plain":
            norm_only = verify.verify_spec(spec, {"paddle": mod}, {"paddle": runner}, ("float64",), ("eager",),
                                           [case], strict=False)[0]
            assert norm_only.ok, norm_only.failures  # --norm-only: the norm-wise check passes it
    plain = results["plain"]
    assert not plain.ok
    assert plain.value_err < 1e-10  # the norm-wise measure alone would pass it
    assert any(re.match(r"tiny_d: value \(none\) relative error (1|1\.22) at element \[0\]: got (0|1\.1102230246251\d*e-16), "
                        r"expected (5\.0000000|4\.9999999)\d*e-17", f) for f in plain.failures), plain.failures
    assert results["accurate"].ok, results["accurate"].failures


def test_cli_verify_is_per_element_by_default(monkeypatch):
    """`losscc verify` passes strict=True to the run unless --norm-only; --strict is accepted."""
    from losscc import cli

    seen = []
    monkeypatch.setattr(verify, "run", lambda *a, **kw: seen.append(kw["strict"]) or [])
    for argv, want in ((["verify", "specs/mse.yaml"], True), (["verify", "specs/mse.yaml", "--strict"], True),
                       (["verify", "specs/mse.yaml", "--norm-only"], False)):
        assert cli.main(argv + ["--format", "json"]) == 0
        assert seen.pop() is want, argv


def test_error_line_unwraps_framework_errors():
    import mindspore as ms
    import paddle

    class Bad(paddle.nn.Layer):
        def forward(self, x):
            y = x * 2
            return paddle.reshape(y, [7, 3])

    try:
        paddle.jit.to_static(Bad(), full_graph=True)(paddle.ones([4]))
    except Exception as exc:
        line = verify.error_line(exc)
    assert line.startswith("ValueError: (InvalidArgument) The 'shape' in ReshapeOp is invalid"), line
    assert line.endswith("(at: return paddle.reshape(y, [7, 3]))")

    class BadCell(ms.nn.Cell):
        def construct(self, x):
            return ms.ops.reshape(x * 2, (7, 3))

    try:
        ms.jit(BadCell())(ms.Tensor(np.ones(4)))
    except Exception as exc:
        line = verify.error_line(exc)
    assert line.startswith("ValueError: For primitive[Reshape]"), line
    assert "C++ Call Stack" not in line and line.endswith("(at: return ms.ops.reshape(x * 2, (7, 3)))")


def test_extreme_suite_has_ties_and_tiny_differences():
    from losscc.cases import extreme_cases

    spec = load_spec(ROOT / "specs/huber.yaml", "specs/huber.yaml")
    cases = {c.id: c for c in extreme_cases(spec)}
    eq, ulp = cases["extreme_input_eq_target"], cases["extreme_input_ulp_target"]
    assert np.array_equal(eq.inputs["input"], eq.inputs["target"])
    assert np.all(np.nextafter(ulp.inputs["input"], np.inf) == ulp.inputs["target"])
    near = cases["extreme_input_near_target_1e-08"]
    d = near.inputs["target"] - near.inputs["input"]
    assert np.allclose(np.abs(d), 1e-8, rtol=1e-7)
    tiny = cases["extreme_input_near_target_1e-20"]
    assert np.all((np.abs(tiny.inputs["input"]) >= 5e-21) & (np.abs(tiny.inputs["input"]) <= 1e-20))
    # the where boundary |input - target| < delta, with delta = 1: hit exactly on every other entry
    tie = cases["extreme_input_tie0"]
    gap = np.abs(tie.inputs["input"] - tie.inputs["target"]).reshape(-1)
    assert np.all(gap[::2] == 1.0) and np.all(gap[1::2] != 1.0)


def test_extreme_suite_puts_half_bounded_inputs_large_together():
    """Counts at their mean (a negative binomial's y and mu both 1e6) are where lgamma
    differences cancel in float32; the suite scales every half-bounded input at once."""
    from losscc.cases import extreme_cases
    from tests.codegen_util import spec_of

    spec = spec_of("""
        name: nb
        summary: Counts.
        inputs:
          mu: {dtype: float, shape: [N], domain: "(0, inf)"}
          y: {dtype: float, shape: [N], domain: "[0, inf)"}
          z: {dtype: float, shape: [N]}
        formula: |
          loss = lgamma(y + mu) - lgamma(mu) + z
        """)
    cases = {c.id: c for c in extreme_cases(spec)}
    big = cases["extreme_large_together"]
    for name in ("mu", "y"):
        assert np.all(big.inputs[name] >= 1e5) and np.all(big.inputs[name] <= 1e8), big.inputs[name]
    assert np.all(np.abs(big.inputs["z"]) < 1e3)  # the others stay ordinary
    assert "extreme_large_together" not in {c.id for c in extreme_cases(load_spec(ROOT / "specs/huber.yaml"))}


def test_perturbed_expected_value_fails(tmp_path):
    doc = json.loads((ROOT / "tests/data/conformance/mse.json").read_text())
    doc["cases"] = doc["cases"][:1]
    doc["cases"][0]["expected"]["mean"] *= 1 + 1e-7
    bad = tmp_path / "mse_perturbed.json"
    bad.write_text(json.dumps(doc))
    args = ["verify", "specs/mse.yaml", "--cases", str(bad), "--random", "0", "--dtype", "float64",
            "--mode", "eager"]
    r = subprocess.run([sys.executable, "-m", "losscc", *args], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "random_2d: value (mean) off by" in r.stdout
    # and the unperturbed file passes
    doc["cases"][0]["expected"]["mean"] /= 1 + 1e-7
    bad.write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, "-m", "losscc", *args], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def _rows_with_backend(spec, backend, tmp_path):
    path = tmp_path / f"{spec.name}_{backend.name}.py"
    path.write_text(compile_spec(spec, backend))
    mod = verify.load_module(path, f"mutant_{backend.name}_{spec.name}_{abs(hash(str(tmp_path)))}")
    runner = verify.runner(backend.name)
    cases = verify.collect_cases(spec, ROOT, [], 2, 0)
    return verify.verify_spec(spec, {backend.name: mod}, {backend.name: runner}, ("float64",), ("eager",), cases)


def test_swapped_operator_mapping_fails(tmp_path):
    """log lowered as log1p: verify must fail, while the true table passes."""
    spec = load_spec(ROOT / "specs/kl_div.yaml", "specs/kl_div.yaml")
    for name in AVAILABLE:
        good = get(name)
        helpers = dict(good.helpers)
        if "log1p" in helpers:  # log1p spelled through a helper function: log needs it too
            helpers["log"] = helpers["log1p"]
        bad = dataclasses.replace(good, ops={**good.ops, "log": good.ops["log1p"]}, helpers=helpers)
        assert all(r.ok for r in _rows_with_backend(spec, good, tmp_path))
        rows = _rows_with_backend(spec, bad, tmp_path)
        assert not any(r.ok for r in rows)
        assert any("value" in f for r in rows for f in r.failures)


def test_missing_guard_fails(tmp_path):
    """Without the untaken-branch guard, smooth_l1's gradient at beta == 0 is NaN (0 * inf from
    d**2 / beta in the branch not taken): verify says so."""
    from losscc import pipeline

    spec = load_spec(ROOT / "specs/smooth_l1.yaml", "specs/smooth_l1.yaml")
    assert all(r.ok for r in _rows_with_backend(spec, get("paddle"), tmp_path))
    original = pipeline.BUNDLES
    pipeline.BUNDLES = tuple(b for b in original if b.name != "branch-guards")
    try:
        rows = _rows_with_backend(spec, get("paddle"), tmp_path)
    finally:
        pipeline.BUNDLES = original
    msgs = [f for r in rows for f in r.failures if "gradient" in f and "edge_beta0_is_l1" in f]
    assert msgs
    # the message says NaN, for which input, at which element
    assert any(re.match(r"edge_beta0_is_l1: gradient d/d(input|target) is NaN at element \[\d+\]", f) for f in msgs), msgs


def test_json_report_and_exit_status():
    r = subprocess.run([sys.executable, "-m", "losscc", "verify", "specs/huber.yaml", "--random", "1",
                        "--dtype", "float32", "--mode", "eager", "--format", "json"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(r.stdout)
    assert {(x["backend"], x["dtype"], x["mode"]) for x in rows} == {(b, "float32", "eager") for b in AVAILABLE}
    assert all(x["verdict"] == "pass" and x["cases"] > 0 for x in rows)
    tol = rows[0]["tolerances"]
    assert tol["value"]["per_element_rtol"] == 1e-5 and tol["gradient"]["per_element_rtol"] == 4e-5
    assert "reason" in tol["value"] and rows[0]["max_elem_rel_value"] <= 1e-5


def test_gradient_condition_is_the_row_sum_of_the_scaled_hessian(monkeypatch):
    """C_i = sum_j |x_j dg_i/dx_j|, exact from the whole Hessian up to _EXACT_CONDITION entries,
    a lower bound from random probes beyond; a well-conditioned wrong gradient still fails."""
    from losscc import reference as ref
    from losscc.parse import build_program
    from tests.codegen_util import spec_of

    spec = spec_of("""
        name: cond_probe
        summary: x y + x^3, whose gradient condition is known.
        inputs:
          x: {dtype: float, shape: [N]}
          y: {dtype: float, shape: [N]}
        formula: |
          loss = x * y + x**3
    """)
    prog = build_program(spec)
    x, y = np.array([0.5, -2.0, 3.0]), np.array([1.5, 0.25, -4.0])
    inputs = {"x": x, "y": y}
    exact = ref.gradient_condition(prog, inputs, {}, {}, ["x", "y"])
    # g_x = y + 3x^2: x * 6x and y * 1; g_y = x: x * 1
    assert np.allclose(exact["x"], 6 * x**2 + np.abs(y), rtol=1e-12)
    assert np.allclose(exact["y"], np.abs(x), rtol=1e-12)
    monkeypatch.setattr(ref, "_EXACT_CONDITION", 0)
    probed = ref.gradient_condition(prog, inputs, {}, {}, ["x", "y"])
    for n in ("x", "y"):
        assert np.all(probed[n] <= exact[n] * (1 + 1e-12)) and np.all(probed[n] > 0.05 * exact[n])
    # the condition floor lets eps-sized errors of an ill-conditioned entry through, not a wrong value
    g = y + 3 * x**2
    floor = np.maximum(verify.gradient_floor(g), exact["x"])
    assert verify.check(g + 1e-6 * exact["x"], g, "float32", "gradient", floor=floor, truth=None).ok
    assert not verify.check(g * (1 + 1e-2), g, "float32", "gradient", floor=floor, truth=None).ok


def test_equal_inputs_of_a_cosine_pass_by_their_condition():
    """At equal inputs the gradient of 1 - cos is 0 (the reference's central difference leaves
    ~1e-27) while float32 code leaves an ulp of 1/|x|: C_i ~ 1/|x| is that entry's floor."""
    from losscc.parse import build_program
    from losscc.reference import gradient_condition, reference

    spec = load_spec(ROOT / "specs/cosine_similarity.yaml")
    prog = build_program(spec)
    a = np.array([[-1.326, 0.298], [1.507, -2.301], [0.752, 0.774]]).astype(np.float32).astype(float)
    inputs = {"input": a, "target": a.copy()}
    r = reference(prog, inputs, {}, {}, ["input", "target"])
    assert np.max(np.abs(r.grads["input"])) < 1e-20
    cond = gradient_condition(prog, inputs, {}, {}, ["input", "target"])
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    assert np.all(cond["input"] > 0.1 / norms) and np.all(cond["input"] < 10 / norms)
    got = np.full(a.shape, 2.0 ** -23)  # what the frameworks return at [0, 0]
    c = verify.check(got, r.grads["input"], "float32", "gradient", truth=None)
    assert not c.ok and c.per_element
    assert verify.check(got, r.grads["input"], "float32", "gradient", truth=None,
                        floor=np.maximum(verify.gradient_floor(r.grads["input"]), cond["input"])).ok


def test_an_empty_sample_that_an_eps_guard_defines_beside_another(tmp_path):
    """A hand case batches an empty Dice sample (0/0, which the eps guard makes 1) with a
    regular one: the values are compared with the case's; the empty sample's gradients (NaN in
    the reference, the formula being singular where the guard defines it) are skipped, and the
    regular sample's are compared (they were skipped too, beside the NaN element, until a
    red-team showed that one such element let zeroed gradients of every other sample pass)."""
    from losscc.casedata import CaseData
    from tests.codegen_util import check, modules, spec_of

    spec = spec_of("""
        name: dice_empty
        summary: Dice with an eps guard.
        inputs:
          probs: {dtype: float, shape: [N, P], domain: "[0, 1]"}
          target: {dtype: float, shape: [N, P], domain: "[0, 1]"}
        formula: |
          loss = 1 - 2 * sum(probs * target, axis=P) / (sum(probs, axis=P) + sum(target, axis=P))
        guards: {eps: 1.0e-7}
    """)
    inputs = {"probs": np.array([[0.5, 0.0, 0.0], [0.0, 0.0, 0.0]]),
              "target": np.array([[1.0, 0.0, 0.5], [0.0, 0.0, 0.0]])}
    mixed = CaseData("mixed", "test", inputs, {}, {}, {"none": np.array([0.5, 1.0])})
    rows = check(spec, modules(spec, tmp_path), [mixed], dtypes=("float64", "float32"))
    assert rows and all(r.skipped_kinks == 6 and not r.failures for r in rows)


def test_a_tie_with_a_float_hyperparameter_is_a_tie_in_float32(tmp_path):
    """The generated code holds tol = 1e-3 as a float32 tensor, so an input of float32(1e-3)
    ties with it and takes the else branch; the reference reads the parameter as float32
    holds it too (it compared with the exact 1e-3 and took the other branch: got 1,
    expected 2)."""
    from losscc.casedata import CaseData
    from tests.codegen_util import check, modules, spec_of

    spec = spec_of("""
        name: tie_param
        summary: A select on a float hyperparameter.
        inputs:
          input: {dtype: float, shape: [N]}
        params:
          tol: {default: 1.0e-3, min: 0}
        formula: |
          loss = where(input > tol, 2 * input - tol, input)
    """)
    x = np.array([float(np.float32(1e-3)), 0.5, -0.25])
    tie = CaseData("tie", "test", {"input": x}, {"tol": 1e-3}, {}, from_reference=True)
    check(spec, modules(spec, tmp_path), [tie], dtypes=("float32", "float64"))


def test_float32_hyperparameters_stay_inside_their_bounds():
    """max: 0.1 rounds to 0.10000000149 in float32, which the generated function refuses; a
    strict bound (gt, lt) is not reached either."""
    from losscc.spec import Param
    from losscc.verify import _param32

    def par(lo, hi, lo_open=False, hi_open=False):
        return Param("p", "float", 0.5, min=lo, max=hi, min_open=lo_open, max_open=hi_open)

    for v, p in ((0.1, par(0.0, 0.1)), (0.3, par(0.3, 1.0)), (0.05, par(0.0, 0.1)), (0.7, None),
                 (0.1, par(0.1, None, lo_open=True)), (1e-46, par(0.0, None, lo_open=True)),
                 (0.1, par(None, 0.1, hi_open=True)), (0.10000000149, par(None, 0.1, hi_open=True))):
        got = _param32(v, p)
        assert float(np.float32(got)) == got
        assert p is None or p.admits(got), (v, got)
        assert abs(got - v) <= 2 * np.spacing(np.float32(v)) or v < 1e-40
    assert _param32(0.1, par(0.0, 0.1)) < 0.1 < float(np.float32(0.1))
    assert _param32(1e-46, par(0.0, None, lo_open=True)) > 0


def test_a_mean_whose_denominator_sums_to_zero_is_nan_not_a_crash():
    import mpmath

    from losscc.refarrays import ieee_divide
    assert mpmath.isnan(ieee_divide(mpmath.mpf(0), 0))
    assert ieee_divide(mpmath.mpf(3), mpmath.mpf(0)) == mpmath.inf
    assert ieee_divide(mpmath.mpf(-3), 0) == -mpmath.inf
    assert ieee_divide(mpmath.mpf(3), 2) == 1.5


def test_the_gradient_condition_widens_the_norm_wise_bound_too():
    """Nearly parallel embeddings under a scale of 80 (a new user's circle loss): an ulp of
    the inputs moves the exact gradient by 3e-5, more than the norm-wise bound of 1e-5, so no
    float32 code passed however it computed; the condition C_i widens both checks by
    rtol * C_i, and a wrong gradient where C_i is small still fails."""
    want = np.array([-3.29e-4, 1.0e-4, 2.0e-4])
    cond = np.array([40.0, 0.0, 0.0])  # float32 gradients: 4e-5 * 40 = 1.6e-3 allowed at [0]
    got = want + np.array([2.24e-5, 0.0, 0.0])
    assert not verify.check(got, want, "float32", "gradient", truth=None).ok
    floor = np.maximum(verify.gradient_floor(want), cond)
    assert not verify.check(got, want, "float32", "gradient", truth=None, floor=floor).ok  # norm-wise
    assert verify.check(got, want, "float32", "gradient", truth=None, floor=floor, spread=cond).ok
    wrong = want + np.array([0.0, 2e-5, 0.0])
    assert not verify.check(wrong, want, "float32", "gradient", truth=None, floor=floor, spread=cond).ok
