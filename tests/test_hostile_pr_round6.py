"""Attacks a pull request can make, found by a sixth red-team review (2026-12-06): a lint
whose numeric zero test let SymPy evaluate expm1 of expm1 of ... of a number (`check` did
not end), tanh of a number beyond every float in the reference (gigabytes, or an internal
error), and formulas that folded to complex infinity, the imaginary unit, NaN in a
comparison or a constant beyond every float, each an internal error (E900, exit 3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mpmath
import pytest
import sympy as sp

from losscc import bounded
from tests.cli_util import run
from tests.test_hostile_pr import _proj

HEAD = "name: t\nsummary: s.\ninputs:\n  input: {dtype: float, shape: [N]}\n  target: {dtype: float, shape: [N]}\n"


def _bounded_run(root, *args, seconds=60, gigabytes=2):
    """`losscc ARGS` in a subprocess held to `gigabytes` of address space and `seconds`."""
    code = ("import resource, sys\n"
            f"resource.setrlimit(resource.RLIMIT_AS, ({gigabytes} << 30, {gigabytes} << 30))\n"
            "from losscc import cli\n"
            f"sys.exit(cli.main({list(args)!r}))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}  # this checkout's losscc
    return subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=seconds,
                          env=env)


def test_the_continuity_lint_does_not_evaluate_a_tower_of_exponentials(tmp_path):
    """where(input > 0, expm1(expm1(expm1(expm1(expm1(target))))), 0): the lint's zero test
    put 1.29 into the tree, and SymPy asked mpmath for log(2) to 10**117000 digits
    (`check`, `generate` and `explain` were killed after 120 s).  The substitution now
    stops at the first number beyond 1e300."""
    root = _proj(tmp_path, names=())
    (root / "specs" / "t.yaml").write_text(
        HEAD + "formula: |\n  loss = where(input > 0, expm1(expm1(expm1(expm1(expm1(target))))), 0)\n")
    got = _bounded_run(root, "generate", seconds=60)
    assert got.returncode == 0, got.stderr[-2000:]
    assert "W301" in got.stderr  # still decided: a jump from the branch's value to 0
    t = sp.Symbol("t")
    tower = t
    for _ in range(5):
        tower = sp.exp(tower) - 1
    assert bounded.substitute(tower, {t: sp.Float(1.29)}) is None


def test_tanh_and_erf_of_numbers_beyond_every_float_end_at_once(tmp_path):
    """tanh(exp(exp(x))) at x = 23: mpmath's cosh_sinh allocated a 2**(3.8e10)-bit integer
    (`docs --check` 68 s and 4.2 GB; at 24 a MemoryError, at larger ones 'too many digits in
    integer', both internal errors).  Past 2**1100 they take their values at infinity."""
    from losscc.functions import FUNCTIONS
    ref = {f.name: f.reference for f in FUNCTIONS}
    big = mpmath.mpf(2) ** 2000
    assert ref["tanh"](big) == 1 and ref["tanh"](-big) == -1 and ref["erf"](-big) == -1
    root = _proj(tmp_path, names=())
    (root / "specs" / "t.yaml").write_text(
        "name: t\nsummary: s.\ninputs:\n  input: {dtype: float, shape: [N], domain: \"[23, 23.2]\"}\n"
        "  target: {dtype: float, shape: [N]}\nformula: |\n  loss = tanh(exp(exp(input))) * (input - target)**2\n"
        "cases:\n  - id: big\n    inputs: {input: [700.0], target: [1.0]}\n    expected: {sum: 488601.0}\n")
    got = _bounded_run(root, "docs", seconds=120)
    assert got.returncode == 0, got.stderr[-2000:]
    assert (root / "docs" / "losses" / "t.md").is_file()


def test_formulas_that_fold_to_constants_no_float_holds_are_refused(tmp_path, monkeypatch, capsys):
    """1 / where(c, t, 0) folds to where(c, 1 / t, zoo); sqrt of a where with a -1 branch to I;
    a power of a where with a 1e30 branch to 1e1920: each reached the lowering (E900)."""
    root = _proj(tmp_path, names=())
    for formula, code, words in (
            ("input / where(input > 0, target, 0)", "E207", "division by zero in a branch of a where"),
            ("sqrt(where(input > target, input, -1.0))", "E203", "not a real number"),
            ("where(input > 0, 1e30, target)**64", "E203", "beyond 1e300")):
        (root / "specs" / "t.yaml").write_text(HEAD + f"formula: |\n  loss = {formula}\n")
        rc, out, err = run(monkeypatch, capsys, root, "generate")
        assert rc == 2 and code in err and words in err and "t.yaml:7:" in err and "E900" not in err, (formula, err)
        assert not (root / "generated").exists()


def test_a_power_of_zero_and_nan_defaults_compile_and_run(tmp_path, monkeypatch, capsys):
    """0**p in a select made the gradient guard's condition `0 > 0`, which the code held as a
    Python bool (paddle.where of a bool: AttributeError); an optional input's default that
    makes a comparison of NaN stopped the None variant with a TypeError (E900)."""
    root = _proj(tmp_path, names=())
    (root / "specs" / "t.yaml").write_text(
        HEAD + "  w: {dtype: float, shape: [N], optional: true}\nparams:\n  p: {default: 2.0, min: 0}\n"
        "formula: |\n  a = where(input > 0, 0**p, input)\n"
        "  loss = where(a > sin(w) / target, a, input**2)\n")
    rc, out, err = run(monkeypatch, capsys, root, "generate")
    assert rc == 0, err
    rc, out, err = run(monkeypatch, capsys, root, "verify", "--backend", "paddle", "--mode", "eager", "specs/t.yaml")
    assert rc == 0, out + err


# ---------------------------------------------------------------- round 7 (2026-12-06)

def test_an_optional_default_that_makes_a_huge_number_is_not_folded(tmp_path):
    """`y * sin(exp(exp(w)))` with w defaulting to 20, `w ** (w ** w)` with 9: substituting the
    default for the call without w asked mpmath for 10**8 digits or SymPy for the exact
    integer 9**387420489 (`generate` and `check` killed after 60 s); tanh(exp(w)) at 1e300
    an internal error. The None variant is not made where a number would pass 1e300."""
    root = _proj(tmp_path, names=())
    for k, (default, formula) in enumerate((("20", "y * sin(exp(exp(w)))"), ("9", "y * w ** (w ** w)"),
                                            ("1.0e300", "y * tanh(exp(w))"))):
        (root / "specs" / f"t{k}.yaml").write_text(
            f"name: t{k}\nsummary: s.\ninputs:\n  y: {{dtype: float, shape: [N]}}\n"
            f"  w: {{dtype: float, shape: [N], optional: true, default: {default}}}\nformula: |\n  loss = {formula}\n")
    got = _bounded_run(root, "generate", seconds=60)
    assert got.returncode == 0, got.stderr[-2000:]


def test_an_optional_input_before_a_required_one_gives_importable_code(tmp_path, monkeypatch, capsys):
    """inputs x, w (optional), v made `def forward(self, x, w=None, v)`, a SyntaxError that
    `generate` and `check` wrote and passed (exit 0)."""
    root = _proj(tmp_path, names=())
    (root / "specs" / "t.yaml").write_text(
        "name: t\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\n"
        "  w: {dtype: float, shape: [N], optional: true}\n  v: {dtype: float, shape: [N]}\n"
        "formula: |\n  loss = x * w * v\n")
    rc, out, err = run(monkeypatch, capsys, root, "generate")
    assert rc == 0, err
    import ast
    for f in (root / "generated").rglob("t.py"):
        ast.parse(f.read_text())
    rc, out, err = run(monkeypatch, capsys, root, "verify", "--backend", "paddle", "--mode", "eager",
                       "--dtype", "float64", "specs/t.yaml")
    assert rc == 0, out + err


def test_a_row_holding_nan_has_a_nan_maximum_in_the_reference():
    """max(sqrt(x), axis=C) over a row of negatives: no entry equals the row's maximum, and the
    reference divided 0 by 0 (an internal error in verify and docs); the frameworks give NaN."""
    import numpy as np
    from losscc.parse import build_program
    from losscc.reference import reference
    from tests.codegen_util import spec_of
    prog = build_program(spec_of("name: t\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N, C]}\n"
                                 "formula: |\n  loss = max(sqrt(x), axis=C)\n"))
    r = reference(prog, {"x": np.array([[-1.0, -2.0], [4.0, 1.0], [-1.0, 9.0]])}, {}, {})
    got = np.asarray(r.values["none"], dtype=float)
    assert np.isnan(got[0]) and got[1] == 2.0 and np.isnan(got[2]), got


def test_integers_past_int64_are_refused_or_written_as_floats(tmp_path, monkeypatch, capsys):
    """An int parameter's default of 2**63 reached the random cases (OverflowError, exit 3)
    and the code (a SystemError in the framework); an integer constant of 10**30 was written
    as an int literal no framework takes."""
    root = _proj(tmp_path, names=())
    (root / "specs" / "t.yaml").write_text(
        "name: t\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\nparams:\n"
        "  n: {default: 9223372036854775808}\nformula: |\n  loss = where(x > n, x, 2 * x)\n")
    rc, out, err = run(monkeypatch, capsys, root, "generate")
    assert rc == 2 and "E113" in err and "int64" in err and "t.yaml:6:16" in err, err
    (root / "specs" / "t.yaml").write_text(
        "name: t\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\nformula: |\n"
        "  loss = (1000000000000000 * 1000000000000000) / x\n")
    rc, out, err = run(monkeypatch, capsys, root, "generate")
    assert rc == 0 and "1e+30" in (root / "generated/paddle/t.py").read_text()
    rc, out, err = run(monkeypatch, capsys, root, "verify", "--backend", "paddle", "--mode", "eager",
                       "--dtype", "float64", "specs/t.yaml")
    assert rc == 0, out + err


@pytest.mark.parametrize("inputs, params, formula", [
    ("z: {dtype: float, shape: [N]}\n  y: {dtype: float, shape: [N, C]}", "flag: {default: true}",
     "where(flag, 1.0, y) * z"),                                   # a branch without the select's axes
    ("x: {dtype: float, shape: [N]}", "a: {default: 0.0, min: 0}", "a * x"),  # the a == 0 branch is 0
    ("x: {dtype: float, shape: [N]}", "k: {default: 2}", "x * exp(k) + sqrt(k) * sin(k)"),  # functions of an int
    ("x: {dtype: float, shape: [N]}", "a: {default: 0.5}", "x * clip(1, a, 2)"),  # clip of a number
    ("x: {dtype: float, shape: [N]}", "k: {default: 3}", "x + round(stop_gradient(k))"),
    ("y: {dtype: float, shape: [N, C]}\n  w: {dtype: float, shape: [N, C], optional: true}", "k: {default: 2}",
     "sum(y, axis=C) + logsumexp(w - k, axis=C)"),               # a reduction of a number (w's default)
])
def test_hyperparameter_values_reach_the_framework_as_tensors(inputs, params, formula):
    """Each compiled and passed `check`, and its code crashed (a Python int given to exp,
    clip, amax or round) or returned [N] for an [N, C] loss (a bool branch of a number)."""
    from pathlib import Path as P
    from losscc import verify
    from tests.codegen_util import spec_of
    spec = spec_of(f"name: t\nsummary: s.\ninputs:\n  {inputs}\nparams:\n  {params}\nformula: |\n  loss = {formula}\n", "t")
    rows = verify.run([spec], ("paddle", "mindspore"), dtypes=("float64",), modes=("eager",), root=P("."))
    assert rows and all(r.ok for r in rows), [r.failures[:2] for r in rows]
