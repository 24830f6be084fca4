"""Property-based tests: random formulas either compile and verify or fail cleanly, and
random mutations of valid specs never crash the compiler."""

from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from losscc import verify
from losscc.backends import all_backends, get
from losscc.cases import random_cases
from losscc.emit import compile_spec
from losscc.errors import SpecError
from losscc.parse import build_program
from losscc.pipeline import prepare
from losscc.spec import spec_from_text

ROOT = Path(__file__).resolve().parent.parent

HEADER = """name: prop
summary: A random formula.
inputs:
  x: {dtype: float, shape: [N, C]}
  y: {dtype: float, shape: [N, C], domain: "(0, 1)"}
  label: {dtype: int, shape: [N], domain: "[0, C)"}
params:
  a: {default: 0.5, min: 0}
formula: |
"""

LEAVES = st.sampled_from(["x", "y", "a", "1", "2.5", "0.5", "C"])
UNARY = st.sampled_from(["exp", "log", "log1p", "expm1", "sqrt", "abs", "sigmoid", "softplus", "tanh",
                         "log_sigmoid", "relu", "square", "-"])
BINARY = st.sampled_from(["+", "-", "*", "/", "**", "min", "max"])
AXIS_OPS = st.sampled_from(["sum", "mean", "logsumexp", "softmax", "log_softmax", "max"])


def expressions(depth=3):
    def extend(inner):
        return st.one_of(
            st.tuples(UNARY, inner).map(lambda t: f"-({t[1]})" if t[0] == "-" else f"{t[0]}({t[1]})"),
            st.tuples(BINARY, inner, inner).map(
                lambda t: f"{t[0]}({t[1]}, {t[2]})" if t[0] in ("min", "max") else f"({t[1]}) {t[0]} ({t[2]})"),
            st.tuples(AXIS_OPS, inner).map(lambda t: f"{t[0]}({t[1]}, axis=C)"),
            st.tuples(inner, inner).map(lambda t: f"where(({t[0]}) > 0, {t[1]}, {t[0]})"),
            inner.map(lambda s: f"softmax({s}, axis=C)[label]"),
        )
    return st.recursive(LEAVES, extend, max_leaves=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions())
def test_random_formulas_compile_or_fail_cleanly(expr):
    text = HEADER + f"  loss = {expr}\n"
    try:
        spec = spec_from_text(text, "prop.yaml")
        for backend in all_backends():
            code = compile_spec(spec, backend)
            compile(code, f"prop_{backend.name}.py", "exec")  # the output is valid Python
    except SpecError as exc:
        assert exc.diagnostics and all(d.loc.path == "prop.yaml" for d in exc.diagnostics)


@pytest.mark.parametrize("expr", ["abs(exp(x))", "abs(softmax(x, axis=C)[label])", "log(cosh(exp(x)))",
                                  "abs(exp(x) * y) + abs(x)"])
def test_abs_of_a_positive_expression_compiles(expr):
    """Found by the property above: SymPy writes Abs(exp(x)) as exp(re(x)) for symbols without
    assumptions; IR values are real, so the parser and the rewrites drop re()."""
    spec = spec_from_text(HEADER + f"  loss = {expr}\n", "prop.yaml")
    prep = prepare(spec)
    assert not prep.loss.has(sp.re, sp.im) and not build_program(spec).loss.has(sp.re, sp.im)
    for backend in all_backends():
        compile(compile_spec(spec, backend), f"prop_{backend.name}.py", "exec")


@pytest.mark.parametrize("expr,values", [
    ("softmax(where((sqrt(a)) > 0, x, sqrt(a)), axis=C)[label]", (0.0, 0.5)),
    ("softmax(where((log(a)) > 0, x, log(a)), axis=C)[label] * y", (0.5, 2.0)),
])
def test_a_hyperparameter_at_zero_that_leaves_a_constant_to_gather(expr, values, tmp_path):
    """Found by the property above: at a = 0 the softmax of a constant is 1/C along C, and its
    gather by the label lowered to `lookup` with an empty index (a SyntaxError in MindSpore);
    log(a) > 0 at a = 0 made SymPy compare zoo (a TypeError). A gather of an operand without
    the gathered axis is that operand broadcast; each compiled side runs and matches the
    reference."""
    from tests.codegen_util import case, check, modules

    spec = spec_from_text(HEADER + f"  loss = {expr}\n", "prop.yaml")
    mods = modules(spec, tmp_path)
    check(spec, mods, [case(spec, {"N": (3,), "C": (4,)}, seed=5, params={"a": v}) for v in values])


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(expr=expressions())
def test_random_formulas_that_compile_pass_verify(tmp_path_factory, expr):
    """Generated Paddle code (float64, eager) agrees with the reference wherever the reference
    is finite; random draws outside the formula's domain are not this test's business."""
    text = HEADER + f"  loss = {expr}\n"
    try:
        spec = spec_from_text(text, "prop.yaml")
        prepare(spec)
    except SpecError:
        return
    path = tmp_path_factory.mktemp("prop") / "prop.py"
    path.write_text(compile_spec(spec, get("paddle")))
    mod = verify.load_module(path, f"prop_{abs(hash(expr))}")
    prog = build_program(spec)
    case = random_cases(spec, 1, 0)[0]
    exp_vals, exp_grads, kinks = verify.expectations(prog, case)
    if not all(np.all(np.isfinite(v)) for v in exp_vals.values()):
        return
    vals, grads = verify.runner("paddle").run(mod, spec, case, "float64", "eager", list(spec.reduction_names))
    for red in spec.reduction_names:
        ok, err = verify.compare(vals[red], exp_vals[red], "float64", magnitude=verify._magnitude(case))
        assert ok, (expr, red, err)
    for name, g in exp_grads.items():
        if np.all(np.isfinite(g)):
            ok, err = verify.compare(grads[name], g, "float64", kinks.get(name), magnitude=verify._magnitude(case))
            assert ok or np.any(kinks.get(name, False)), (expr, name, err)


VALID = sorted((ROOT / "specs").glob("*.yaml"))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(VALID), st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(
    ["delete", "insert", "replace"]), st.sampled_from(list("()[]{}:,-*+/=_ \n'\"#&|!0123456789aeNCx."))),
    min_size=1, max_size=4))
def test_mutated_specs_never_crash(path, edits):
    text = path.read_text()
    for pos, kind, ch in edits:
        k = pos % (len(text) + 1)
        if kind == "delete":
            text = text[:k] + text[k + 1:]
        elif kind == "insert":
            text = text[:k] + ch + text[k:]
        else:
            text = text[:k] + ch + text[k + 1:]
    try:
        spec = spec_from_text(text, path.name)
        prepare(spec)
        for backend in all_backends():
            compile(compile_spec(spec, backend), "mutant.py", "exec")
    except SpecError as exc:
        for d in exc.diagnostics:
            assert d.loc.path == path.name and d.code.startswith("E")
