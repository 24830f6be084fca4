"""Hostile specs, case files and reference files: bounded work, diagnostics, no tracebacks.

Every resource test runs the real CLI (or a small Python driver) in a subprocess under
``RLIMIT_AS`` = 2 GB and a 20 s timeout -- generous bounds that a run over an unbounded
read, expansion or precision would still exceed -- and asserts the exit status, the
message and its position.  Validation of case data is also tested in-process.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from losscc import limits
from losscc.cases import load_case_file, reference_cases
from losscc.errors import SpecError
from losscc.files import read_bounded
from losscc.spec import spec_from_text

ROOT = Path(__file__).resolve().parent.parent
MEMORY = 2 * 1024**3
TIMEOUT = 20


def _limit_memory():  # pragma: no cover - runs in the child
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONWARNINGS", None)
    return env


def bounded_run(argv: list[str], cwd: Path) -> tuple[int | None, str, str]:
    """(exit status or None on timeout, stdout, stderr) of argv under the bounds."""
    try:
        p = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, errors="replace",
                           timeout=TIMEOUT, preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {TIMEOUT} s"
    return p.returncode, p.stdout, p.stderr


def cli(args: list[str], cwd: Path):
    return bounded_run([sys.executable, "-m", "losscc", *args], cwd)


def python(code: str, cwd: Path):
    return bounded_run([sys.executable, "-c", textwrap.dedent(code)], cwd)


def spec_text(name: str, formula: str, inputs: str = "x y", extra: str = "") -> str:
    lines = [f"name: {name}", "summary: A hostile spec.", "inputs:"]
    lines += [f"  {n}: {{dtype: float, shape: [N]}}" for n in inputs.split()]
    return "\n".join(lines) + "\n" + extra + "formula: |\n" + textwrap.indent(formula.strip(), "  ") + "\n"


def project(tmp_path: Path, specs: dict[str, str]) -> Path:
    (tmp_path / "specs").mkdir()
    for name, text in specs.items():
        (tmp_path / "specs" / f"{name}.yaml").write_text(text, encoding="utf-8")
    return tmp_path


def assert_clean(rc, out, err, want_rc):
    assert rc == want_rc, f"exit {rc}, expected {want_rc}\n{out[-2000:]}\n{err[-4000:]}"
    assert "Traceback" not in out + err, err[-4000:]


# --------------------------------------------------------------------------- compile time

EIGHT = "x y z w a b c d"
def _balanced_sum(terms: list[str]) -> str:
    if len(terms) == 1:
        return terms[0]
    h = len(terms) // 2
    return f"({_balanced_sum(terms[:h])}+{_balanced_sum(terms[h:])})"


def _where_chain(lines: int) -> str:
    return "\n".join(["a0 = x - y"] + [
        f"a{i} = where(a{i - 1} > 0, a{i - 1} * exp(-a{i - 1}), tanh(a{i - 1}) * a{i - 1})" for i in range(1, lines + 1)]
        + [f"loss = a{lines} * y"])


def _select_chain(lines: int) -> str:
    """Selects nested in one branch, a log of a quotient in each: range rewrites that ran again
    under every enclosing condition took 2^depth runs (fresh-loss trial 15's first fix)."""
    return "\n".join(["a0 = x"] + [
        f"a{i} = where(x > {i}, log(y / (y + {i}.5)) + a{i - 1}, 2 * x + {i})" for i in range(1, lines + 1)]
        + [f"loss = a{lines}"])


COMPILE_ATTACKS = {
    # every constant subexpression is checked: 148 terms of log(k)*sigmoid(k), 300 sums of them
    "constant_sum": ("x", "loss = x * " + _balanced_sum([f"log({k})*sigmoid({k})" for k in range(2, 150)])),
    # sp.degree expanded the power inside the linear-tail rewrite
    "power64_eight_inputs": (EIGHT, "loss = where(x < 0, (x + y + z + w + a + b + c + d + 1)**64, x)"),
    "power64_both_branches": ("x y z w", "loss = where(x < y, (x + y + z + w + 1)**64, (x + y + z + w + 2)**64)"),
    "power64_product": ("x y z w", "loss = where(y + z < 1, (x + y + z + w + 1)**64 * (x + y + z + w + 2)**64, y + z)"),
    "nested_powers": ("x y z w", "loss = where(x < 0, ((x + y)**8 + (z + w)**8)**8, x)"),
    # a where in a condition: SymPy's piecewise_fold ran simplify_logic and simplify
    "where_in_condition": ("x y", "a = where(x < 0, " + "*".join(f"sigmoid(x+{k})" for k in range(30)) + ", "
                           + "*".join(f"tanh(y+{k})" for k in range(30)) + ")\nloss = where(y < a, x, y)"),
    # sp.simplify in the continuity lint
    "tanh_cosh_sum": ("x y", "loss = where(x < 0, " + " + ".join(
        f"tanh(y + {k})**2 + 1/cosh(y + {k})**2" for k in range(8)) + ", 8 * x)"),
    "tanh_cosh_kink": ("x y", "loss = where(x < 0, " + " + ".join(
        f"tanh(y + {k})**2 + 1/cosh(y + {k})**2" for k in range(3)) + ", 3 + x)"),
    # SymPy's evaluation of Abs and Max (signsimp, factor_terms) on chained bindings: 4x a line
    "chained_max_abs": ("x y", "\n".join(["b0 = x - y"] + [
        f"b{i} = max(b{i - 1}, exp(b{i - 1})) - log1p(abs(b{i - 1}))" for i in range(1, 8)] + ["loss = b7"])),
    # the symbolic backward's derivatives share every factor (the product rule): SymPy's
    # free_symbols walked them as trees
    "chained_product": ("x y", "\n".join(["a0 = x - y"] + [
        f"a{i} = sin(a{i - 1}) * a{i - 1}" for i in range(1, 12)] + ["loss = a11"])),
    "chained_where": ("x y", _where_chain(3)),
    "nested_select_quotients": ("x y", _select_chain(24)),
}


@pytest.mark.parametrize("name", sorted(COMPILE_ATTACKS))
def test_the_custom_backward_of_a_hostile_spec_is_bounded(tmp_path, name):
    inputs, formula = COMPILE_ATTACKS[name]
    proj = project(tmp_path, {name: spec_text(name, formula, inputs, extra="backward: custom\n")})
    rc, out, err = cli(["generate", "specs", "-o", "out"], proj)
    assert_clean(rc, out, err, 0)
    assert (proj / "out" / "paddle" / f"{name}.py").is_file()


def test_functions_of_large_arguments_are_built_without_sympy_evaluation(tmp_path):
    """Rebuilding exp(-a) over a chain of four selects ran SymPy's exp evaluation, whose
    logcombine asks tanh's is_real through Mod and gcd: 33 s before the E104 it ends in."""
    proj = project(tmp_path, {"where4": spec_text("where4", _where_chain(4))})
    rc, out, err = cli(["generate", "specs", "-o", "out"], proj)
    assert_clean(rc, out, err, 2)
    assert "limit 'rewritten_tree'" in err and "[E104]" in err and not (proj / "out").exists()


@pytest.mark.parametrize("name", sorted(COMPILE_ATTACKS))
@pytest.mark.parametrize("command", ["generate", "explain"])
def test_compile_time_is_bounded(tmp_path, name, command):
    inputs, formula = COMPILE_ATTACKS[name]
    proj = project(tmp_path, {name: spec_text(name, formula, inputs)})
    args = ["generate", "specs", "-o", "out"] if command == "generate" else ["explain", f"specs/{name}.yaml"]
    rc, out, err = cli(args, proj)
    assert_clean(rc, out, err, 0)
    if command == "generate":
        assert (proj / "out" / "paddle" / f"{name}.py").is_file()
    else:
        assert "after rewrites:" in out and ("where(" in out or name in ("constant_sum", "chained_max_abs", "chained_product"))


def test_calls_with_too_many_arguments_are_refused(tmp_path):
    """Each argument of max becomes a nested call; Python reads at most ~200 nested brackets."""
    formula = "a = abs(x - y)\nloss = max(" + ", ".join(f"a*{k} - {k}" for k in range(1, 300)) + ")"
    proj = project(tmp_path, {"wide": spec_text("wide", formula, "x y")})
    rc, out, err = cli(["generate", "specs", "-o", "out"], proj)
    assert_clean(rc, out, err, 2)
    assert "max: 299 arguments exceed the limit 'call_args' (32)" in err and "[E104]" in err


def test_continuity_lint_decides_identities_without_simplify(tmp_path):
    """tanh**2 + 1/cosh**2 = 1: the three-term branch equals 3 + x at x = 0 (continuous) but
    its slope is 0, not 1 (a kink); eight terms against 8x jump."""
    proj = project(tmp_path, {n: spec_text(n, COMPILE_ATTACKS[n][1]) for n in ("tanh_cosh_sum", "tanh_cosh_kink")})
    rc, out, err = cli(["generate", "specs", "-o", "out"], proj)
    assert_clean(rc, out, err, 0)
    assert "specs/tanh_cosh_kink.yaml:7:10: warning: the first derivative jumps at x = 0" in err
    assert "[W302]" in err and "specs/tanh_cosh_kink.yaml:7:10: warning: the loss is discontinuous" not in err
    assert "specs/tanh_cosh_sum.yaml:7:10: warning: the loss is discontinuous at x = 0" in err


# --------------------------------------------------------------------------- constants


def test_constants_of_sigmoid_and_softplus_fold(tmp_path):
    specs = {
        "cmp": spec_text("cmp", "loss = where(softplus(1) > x, x, y)"),
        "clipped": spec_text("clipped", "loss = clip(x, sigmoid(2), 3)"),
        "folded": spec_text("folded", "loss = where(softplus(1) > 0.5, x, y) * sign(softplus(1))"),
    }
    proj = project(tmp_path, specs)
    rc, out, err = cli(["generate", "specs", "-o", "out"], proj)
    assert_clean(rc, out, err, 0)
    assert "1.3132616875182228" in (proj / "out/paddle/cmp.py").read_text()       # softplus(1)
    assert "0.8807970779778824" in (proj / "out/paddle/clipped.py").read_text()  # sigmoid(2)
    assert "where" not in (proj / "out/paddle/folded.py").read_text().split('"""')[-1]


CONSTANT_CONTEXTS = {  # constants where a tensor, a condition or a clip bound is expected
    "clip_of_constant": "loss = clip(sigmoid(1), 0, 1) * x",
    "max_of_constants": "loss = max(sigmoid(1), softplus(1)) + x",
    "param_compared": "loss = where(k > softplus(1), x, sigmoid(3))",
    "ternary_on_constant": "loss = x if softplus(1) > 1 else -x",
    "exact_equality": "loss = x if log(2) + log(3) == log(6) else -x",
    "int_compared": "loss = where(label == softplus(1), x, 0)",
    "stop_gradient_where": "loss = stop_gradient(where(sigmoid(2) > a, 1, 2)) * x",
    "constant_conditions": "loss = Piecewise((x, softplus(1) < 0), (x * 2, softplus(1) > 0))",
    "floor_of_constant": "loss = round(stop_gradient(x)) * floor(sigmoid(2)) + x",
}
CONTEXT_SPEC = """name: {name}
summary: Constants in every context.
inputs:
  x: {{dtype: float, shape: [N, C]}}
  label: {{dtype: int, shape: [N], domain: "[0, C)"}}
params:
  a: 0.5
  k: 2
formula: |
  {formula}
"""


def test_constants_in_every_context_compile(tmp_path):
    specs = {n: CONTEXT_SPEC.format(name=n, formula=f) for n, f in CONSTANT_CONTEXTS.items()}
    proj = project(tmp_path, specs)
    rc, out, err = cli(["generate", "specs", "-o", "out"], proj)
    assert_clean(rc, out, err, 0)
    assert "E900" not in err and "error" not in err
    assert "0.7310585786300049" in (proj / "out/mindspore/clip_of_constant.py").read_text()  # sigmoid(1)
    code = (proj / "out/paddle/exact_equality.py").read_text()
    assert 'result = x\n' in code and "-x" not in code.split("Returns:")[1]  # log(2) + log(3) == log(6) held


@pytest.mark.parametrize("formula,col,message", [
    ("loss = x / (log(2) + log(3) - log(6))", 10, "division by a constant that is zero [E207]"),
    ("loss = x / (sigmoid(0) - 0.5)", 10, "division by a constant that is zero [E207]"),
    ("loss = x + log(log(2) + log(3) - log(6))", 14, "log of a constant that is zero [E203]"),
    ("loss = x + log1p(sigmoid(0) - 1.5)", 14, "log1p of a constant that is -1 [E203]"),
    ("loss = where(log(2) + log(3) < log(6), x, y) / (exp(log(3)) - 3)", 10, "division by"),
    ("loss = x * exp(exp(exp(10)))", 18, "constant overflows a float"),
])
def test_constant_zero_and_overflow_are_errors(tmp_path, formula, col, message):
    proj = project(tmp_path, {"k": spec_text("k", formula)})
    rc, out, err = cli(["generate", "specs", "-o", "out"], proj)
    assert_clean(rc, out, err, 2)
    assert f"specs/k.yaml:7:{col}: error: formula: " in err and message in err
    assert not (proj / "out").exists()


# --------------------------------------------------------------------------- bounded reads


def test_huge_spec_is_not_read(tmp_path):
    proj = project(tmp_path, {})
    with open(proj / "specs/huge.yaml", "wb") as f:
        f.truncate(819 * 1024 * 1024)  # sparse: no disk used, but 819 MB if read whole
    rc, out, err = cli(["generate", "specs", "-o", "out"], proj)
    assert_clean(rc, out, err, 2)
    assert "specs/huge.yaml:1:1: error: file exceeds the limit 'file_bytes' (65536)" in err and "[E104]" in err


@pytest.mark.parametrize("kind", ["dev_zero_link", "fifo", "directory"])
def test_spec_that_is_not_a_regular_file(tmp_path, kind):
    proj = project(tmp_path, {})
    target = proj / "specs/odd.yaml"
    if kind == "dev_zero_link":
        target.symlink_to("/dev/zero")
        want = "spec path leaves the project root (after resolving symbolic links) [E172]"
    elif kind == "fifo":
        os.mkfifo(target)
        want = "not a regular file [E100]"
    else:
        target.mkdir()
        want = "explain takes one spec file [E100]"  # a folder holds specs; this one none
    rc, out, err = cli(["explain", "specs/odd.yaml"], proj)
    assert_clean(rc, out, err, 2)
    assert "specs/odd.yaml: error: " + want in err


REFERENCE_DRIVER = """
    import sys
    from pathlib import Path
    from losscc.cases import reference_cases
    from losscc.errors import SpecError
    from losscc.spec import load_spec
    spec = load_spec("specs/r.yaml", "specs/r.yaml")
    try:
        reference_cases(spec, Path("."))
    except SpecError as exc:
        print(exc, file=sys.stderr)
        sys.exit(2)
"""


def _reference_project(tmp_path: Path) -> Path:
    extra = "references:\n  - file: data/r.json\n"
    proj = project(tmp_path, {"r": spec_text("r", "loss = x - y", extra=extra)})
    (proj / "data").mkdir()
    return proj


@pytest.mark.parametrize("kind,message", [
    ("dev_zero_link",
     "specs/r.yaml:7:5: error: reference file 'data/r.json' leaves the project root (through a symbolic link) [E150]"),
    ("sparse_huge", "specs/r.yaml:7:5: error: data/r.json: file exceeds the limit 'case_file_bytes' (1048576)"),
    ("deep", "specs/r.yaml:7:5: error: cannot read case file r.json: nested more deeply than the limit 'json_depth'"),
    ("huge_int", "specs/r.yaml:7:5: error: cannot read case file r.json: integer of 5001 digits"),
    ("dir_link_out",
     "specs/r.yaml:7:5: error: reference file 'data/r.json' leaves the project root (through a symbolic link) [E150]"),
])
def test_reference_file_reads_are_bounded(tmp_path, kind, message):
    proj = _reference_project(tmp_path)
    target = proj / "data/r.json"
    if kind == "dev_zero_link":
        target.symlink_to("/dev/zero")
    elif kind == "sparse_huge":
        with open(target, "wb") as f:
            f.truncate(2 * 1024**3)
    elif kind == "deep":
        target.write_text("[" * 100000 + "]" * 100000)
    elif kind == "huge_int":
        target.write_text('{"cases": [{"id": "a", "inputs": {"x": {"data": [1' + "0" * 5000 + "]}}}]}")
    else:
        outside = tmp_path.parent / (tmp_path.name + "_outside")
        outside.mkdir()
        (outside / "r.json").write_text('{"cases": []}')
        (proj / "data").rmdir()
        (proj / "data").symlink_to(outside)
    rc, out, err = python(REFERENCE_DRIVER, proj)
    assert_clean(rc, out, err, 2)
    assert message in err


def test_read_bounded_reads_at_most_the_limit(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"a" * 100)
    assert read_bounded(p, 100) == b"a" * 100
    with pytest.raises(SpecError, match=r"file exceeds the limit 'file_bytes' \(99\)"):
        read_bounded(p, 99)
    (tmp_path / "link").symlink_to(p)
    with pytest.raises(SpecError, match="symbolic link"):
        read_bounded(tmp_path / "link", 100)
    assert read_bounded(tmp_path / "link", 100, follow_links=True) == b"a" * 100


# --------------------------------------------------------------------------- case files

CLASSES = """name: classes
summary: Classes.
inputs:
  logits: {dtype: float, shape: [N, C]}
  label: {dtype: int, shape: [N], domain: "[0, C)", ignore: ignore_index}
params:
  ignore_index: -100
  gamma: {default: 1.0, min: 0}
  flag: false
formula: |
  loss = -gamma * log_softmax(logits, axis=C)[label]
"""


def _file_case(tmp_path, case: dict, name="c.json") -> list:
    p = tmp_path / name
    p.write_text(json.dumps({"cases": [case]}))
    return load_case_file(p, spec_from_text(CLASSES, "classes.yaml"))


def _t(data, dtype="float64"):
    return {"dtype": dtype, "data": data}


GOOD = {"id": "ok", "inputs": {"logits": _t([[1.0, 2.0, 0.5], [0.0, 0.0, 1.0]]), "label": _t([2, -100], "int64")},
        "params": {"gamma": 2.0}, "expected": {"mean": 1.0}}


@pytest.mark.parametrize("change,message", [
    ({"inputs": {"logits": _t([[1.0, 2.0], [3.0]]), "label": _t([0, 1], "int64")}}, "inputs.logits: ragged data"),
    ({"inputs": {"logits": _t([[1.0, 2.0]]), "label": _t([0, 1], "int64")}}, "axis N has size 2 here but 1"),
    ({"inputs": {"logits": _t([1.0, 2.0]), "label": _t([0], "int64")}}, "does not fit the declared shape"),
    ({"inputs": {"logits": _t([[1.0, 2.0]]), "label": _t([2], "int64")}},
     "2 is outside the domain [0, C) (with C = 2)"),
    ({"inputs": {"logits": _t([[1.0, 2.0]]), "label": _t([0.5])}}, "dtype float64 does not fit the int input"),
    ({"inputs": {"logits": {"dtype": "float64", "shape": [3], "data": [[1.0, 2.0]]}, "label": _t([0], "int64")}},
     "data does not have shape [3]"),
    ({"params": {"gamma": "big"}}, "params.gamma: expected a number for the parameter 'gamma', got str"),
    ({"params": {"gamma": -1.0}}, "params.gamma: -1.0 is outside the bounds of 'gamma' (>= 0)"),
    ({"params": {"flag": 1}}, "expected true or false for the boolean parameter 'flag'"),
    ({"params": {"ignore_index": 0.5}}, "expected an integer for the int parameter"),
    ({"expected": {"none": [[1.0], 2.0]}}, "expected.none: ragged data"),
    ({"expected": {"mean": "x"}}, "expected.mean: expected numbers"),
    ({"inputs": 5}, "inputs: expected an object"),
    ({"inputs": {"logits": [1.0]}}, "expected a tensor object"),
    ({"expected": {"sum": True}}, "expected.sum: expected numbers or nested lists of numbers, got bool"),
    ({"inputs": {"logits": _t([[20000.0, 1.0]]), "label": _t([0], "int64")}},
     "an input of magnitude 20000 needs 8735 digits in the reference evaluator, above the limit 'reference_dps' (500)"),
])
def test_case_file_data_is_checked_against_the_spec(tmp_path, change, message):
    case = dict(GOOD, **change)
    with pytest.raises(SpecError) as info:
        _file_case(tmp_path, case)
    (d,) = info.value.diagnostics
    assert d.code == "E181" and message in d.message, d.format()
    assert "c.json: case 'ok': " in d.message


def test_expected_per_element_values_have_the_loss_shape(tmp_path):
    from losscc.cases import spec_cases

    extra = "cases:\n  - inputs: {x: [1, 2], y: [1, 2]}\n    expected: {none: [0, 0, 0]}\n"
    spec = spec_from_text(spec_text("shapes", "loss = x - y", extra=extra), "specs/shapes.yaml")
    with pytest.raises(SpecError) as info:
        spec_cases(spec)
    assert info.value.diagnostics[0].format() == (
        "specs/shapes.yaml:8:16: error: cases[0]: expected.none has shape [3], but the loss for these "
        "inputs has shape [2] [E117]")
    with pytest.raises(SpecError, match=r"case 'ok': expected.none has shape \[1\], but the loss .* \[2\]"):
        _file_case(tmp_path, dict(GOOD, expected={"none": [1.0]}))


@pytest.mark.parametrize("case,pos,message", [
    ("{logits: [[1, 2]], label: [2]}", "13:32", "cases[0].inputs.label: 2 is outside the domain [0, C) (with C = 2)"),
    ("{logits: [[1, 2]], label: [0.5]}", "13:32", "cases[0].inputs.label: 0.5 is not an integer"),
    ("{logits: [[1, 2]], label: [-100]}", "", ""),  # the ignored value
    ("{logits: [[1, 2]], label: null}", "13:32", "cases[0].inputs.label: missing"),
    ("{logits: [1, 2], label: [0]}", "13:14", "cases[0].inputs.logits: shape [2] does not fit the declared shape"),
])
def test_spec_cases_are_checked_against_the_spec(case, pos, message):
    text = CLASSES + f"cases:\n  - inputs: {case}\n    expected: {{mean: 1.0}}\n"
    if not message:
        assert len(spec_from_text(text, "classes.yaml").cases) == 1
        return
    with pytest.raises(SpecError) as info:
        spec_from_text(text, "classes.yaml")
    (d,) = info.value.diagnostics
    assert d.format().startswith(f"classes.yaml:{pos}: error: {message}"), d.format()
    assert d.code == "E117"


def test_a_good_case_file_loads(tmp_path):
    (c,) = _file_case(tmp_path, GOOD)
    assert c.inputs["label"].tolist() == [2, -100] and c.params == {"gamma": 2.0}


@pytest.mark.parametrize("text,message", [
    ("[1, 2]", "expected an object with a list 'cases'"),
    ('{"cases": {"a": 1}}', "expected an object with a list 'cases'"),
    ('{"cases": [{"id": [1]}]}', "cases[0]: 'id' must be a string"),
    ('{"cases": ["abc"]}', "case 'case0': expected an object"),
    ('{"cases": [{"id": "a", "expected": {"mean": NaN}}]}', "NaN is not allowed"),
    ('{"cases": [{"id": "a", "expected": {"mean": Infinity}}]}', "Infinity is not allowed"),
    ("\xff", "cannot read case file"),
])
def test_malformed_case_files(tmp_path, text, message):
    p = tmp_path / "c.json"
    p.write_text(text, encoding="latin-1")
    with pytest.raises(SpecError) as info:
        load_case_file(p, spec_from_text(CLASSES, "classes.yaml"))
    assert any(message in d.message for d in info.value.diagnostics), info.value


def test_reference_gradients_are_bounded_in_size(tmp_path):
    n = limits.MAX_REFERENCE_GRAD_ELEMENTS // 3 + 1
    case = dict(GOOD, inputs={"logits": _t([[0.5, 1.0, 2.0]] * n), "label": _t([0] * n, "int64")})
    with pytest.raises(SpecError, match="above the limit 'reference_grad_elements'"):
        _file_case(tmp_path, case)
    case["grad_of_sum"] = {"logits": [[0.0, 0.0, 0.0]] * n}  # given: the reference computes none
    assert len(_file_case(tmp_path, case)) == 1


def test_every_committed_reference_file_still_loads():
    from losscc.spec import load_spec

    total = 0
    for path in sorted((ROOT / "specs").glob("*.yaml")):
        spec = load_spec(path, f"specs/{path.name}")
        total += len(reference_cases(spec, ROOT))
    assert total >= 60


# --------------------------------------------------------------------------- fuzzer

FUZZ_DRIVER = r"""
    import io, contextlib, sys, tempfile
    from pathlib import Path
    from hypothesis import given, settings, seed, strategies as st, HealthCheck
    from losscc import cli
    from losscc.cases import load_case_file, spec_cases
    from losscc.errors import SpecError
    from losscc.spec import load_spec

    SPEC = Path("specs/huber.yaml").read_text()
    TOKENS = ["1:30", "0x1F", "017", "1_000", ".inf", ".nan", "yes", "- - - ", "[[[[", "{{", "&a ", "*a",
              "!!python/object:os.system ", "'", '"', ",", ": ", "\n", "\n  ", "#", "9" * 400, "1e999",
              "(x + y + 1)**64", "softplus(1)", "sigmoid(2) > ", "log(2) + log(3) - log(6)", "/ 0", "\\n",
              "where(", "Piecewise(", ")", "**", "input", "target", "delta", "N", "*S", "-1 for, ",
              "[[1, 2], [3]]", "[20000]", "hello", "null", "~", "\t", "9" * 5000, "softplus(1) > d, ",
              "clip(d, sigmoid(2), 3) + ", " / (sigmoid(0) - 0.5)", "[" * 40, "x\\n"]

    ANCHORS = ["0.5 * d**2", "d < delta", "abs(input - target)", "delta * (d - 0.5 * delta)", "default: 1.0",
               "[0.0, 0.5, 3.0]", "mean: 0.54", "shape: [\"*S\"]", "min: 0", "doc: Predictions."]

    def mutate(text, edits, anchors):
        # a hostile token at a random place, or near a place where it matters
        for anchor, pos, tok, replace in edits:
            at = text.find(anchors[anchor]) if anchor is not None else -1
            k = at + pos % len(anchors[anchor]) if at >= 0 else pos % (len(text) + 1)
            text = text[:k] + tok + text[k + len(tok) * replace:]
        return text

    def edits(tokens, anchors):
        return st.lists(st.tuples(st.none() | st.integers(0, len(anchors) - 1), st.integers(0, 10**6),
                                  st.sampled_from(tokens), st.booleans()), min_size=1, max_size=4)

    @seed(20261203)
    @settings(max_examples=int(sys.argv[1]), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(edits(TOKENS, ANCHORS))
    def fuzz(changes):
        text = mutate(SPEC, changes, ANCHORS)
        with tempfile.TemporaryDirectory() as tmp:
            spec = Path(tmp) / "specs" / "huber.yaml"
            spec.parent.mkdir()
            spec.write_text(text)
            for args in (["generate", str(spec.parent), "-o", tmp + "/out"], ["explain", str(spec)]):
                err = io.StringIO()
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                    rc = cli.main(args)
                assert rc in (0, 2), (rc, args, text, err.getvalue())
                if rc == 2:
                    assert "error: " in err.getvalue() and "[E" in err.getvalue(), (text, err.getvalue())
                    assert "E900" not in err.getvalue(), (text, err.getvalue())
            if rc == 0:  # what verify does first with the spec's own cases
                try:
                    spec_cases(load_spec(spec, "specs/huber.yaml"))
                except SpecError as exc:
                    assert all(d.code == "E117" for d in exc.diagnostics), str(exc)

    HUBER = load_spec("specs/huber.yaml", "specs/huber.yaml")
    CASES = Path("tests/data/conformance/huber.json").read_text()
    JSON_TOKENS = ["[", "]", "{", "}", ",", ":", '"', "null", "true", "NaN", "-Infinity", "1e999", "9" * 400,
                   '"int64"', '"shape"', '[[1, 2], [3]]', "[20000.0]", '"id"', '{"data": 5}', "-1", "0.5",
                   "[" * 5000 + "]" * 5000, '"cases": 5, "x": ', "[]"]
    JSON_ANCHORS = ['{\n  "loss"', '"cases": [', '"id": ', '"data": [', '"shape": [', '"dtype": ', '"params": {',
                    '"expected": {', '"grad_of_sum": {', '"delta": ']

    @seed(20261204)
    @settings(max_examples=int(sys.argv[1]), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(edits(JSON_TOKENS, JSON_ANCHORS))
    def fuzz_cases(changes):
        text = mutate(CASES, changes, JSON_ANCHORS)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "c.json"
            path.write_text(text)
            try:
                cases = load_case_file(path, HUBER)
            except SpecError as exc:
                assert all(d.code in ("E180", "E181", "E182") for d in exc.diagnostics), str(exc)
                return
            assert all(c.inputs["input"] is not None for c in cases)

    fuzz()
    fuzz_cases()
    print("fuzzed")
"""


def test_mutated_specs_exit_0_or_2_within_bounds():
    """Hostile tokens spliced into a valid spec: exit 0 or 2, never a traceback, an internal
    error (E900), exit 1 or 3; spliced into a case file: its cases or E180-E182, nothing
    else; all within 2 GB (the whole run within its timeout)."""
    code = textwrap.dedent(FUZZ_DRIVER)
    try:
        p = subprocess.run([sys.executable, "-c", code, "150"], cwd=ROOT, env=_env(), capture_output=True,
                           text=True, timeout=90, preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        pytest.fail("the fuzzer ran past 90 s")
    assert p.returncode == 0 and "fuzzed" in p.stdout, p.stderr[-6000:]
