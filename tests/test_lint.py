"""Functions without a gradient: round floor ceil sign argmax argmin (sort, topk refused).

They are errors (E230) on a value that carries a gradient from a float input or a
learnable tensor, and allowed on integer inputs, constants, parameters and anything
under stop_gradient.  Also: E231 for sort/topk used legally, E212 for comparisons used
as numbers, the reference evaluator's semantics (round half to even, argmax's first
index at ties, zero derivative under stop_gradient) and the lowering of both backends,
run with int32 and int64 labels.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest
import sympy as sp

from losscc import ir, verify
from losscc.backends import get
from losscc.emit import compile_spec
from losscc.errors import SpecError
from losscc.formula import formula_text
from losscc.parse import build_program
from losscc.reference import reference
from losscc.spec import spec_from_text

X = "x: {dtype: float, shape: [N]}"
NC = "x: {dtype: float, shape: [N, C]}"


def make_spec(inputs: str, formula: str, extra: str = ""):
    text = "name: t\nsummary: a test spec\ninputs:\n"
    text += textwrap.indent(textwrap.dedent(inputs).strip("\n"), "  ") + "\n"
    if extra:
        text += textwrap.dedent(extra).strip("\n") + "\n"
    text += "formula: |\n" + textwrap.indent(textwrap.dedent(formula).strip("\n"), "  ") + "\n"
    return spec_from_text(text, "<test>")


def program(inputs: str, formula: str, extra: str = ""):
    return build_program(make_spec(inputs, formula, extra))


def errors(inputs: str, formula: str, extra: str = ""):
    with pytest.raises(SpecError) as info:
        program(inputs, formula, extra)
    return [d for d in info.value.diagnostics if d.level == "error"]


def one_error(inputs, formula, extra=""):
    errs = errors(inputs, formula, extra)
    assert len(errs) == 1, [e.format() for e in errs]
    return errs[0]


# --------------------------------------------------------------------------- E230


@pytest.mark.parametrize("fname", ["round", "floor", "ceil", "sign"])
def test_piecewise_constant_of_a_float_input_is_e230(fname):
    d = one_error(X, f"loss = x * {fname}(x)")
    assert d.code == "E230"
    assert d.message == (f"formula: '{fname}' of 'x', which carries a gradient: '{fname}' is piecewise "
                         "constant (its derivative is 0 or undefined), so no gradient flows through it")
    assert d.hint.startswith(f"wrap the argument in stop_gradient: {fname}(stop_gradient(x))")
    assert f"v + stop_gradient({fname}(v) - v)" in d.hint
    assert (d.loc.path, d.loc.line, d.loc.col) == ("<test>", 6, 14)  # the call, in the formula's line


@pytest.mark.parametrize("fname", ["argmax", "argmin"])
def test_arg_extremum_of_a_float_input_is_e230(fname):
    d = one_error("logits: {dtype: float, shape: [N, C]}",
                  f"loss = -log_softmax(logits, axis=C)[{fname}(logits, axis=C)]")
    assert d.code == "E230"
    assert d.message.startswith(f"formula: '{fname}' of 'logits', which carries a gradient: an index has no "
                                f"derivative, so no gradient flows through '{fname}'")
    assert d.hint == f"wrap the argument in stop_gradient: {fname}(stop_gradient(logits), axis=...)"


def test_e230_names_the_expression_and_the_inputs_it_depends_on():
    d = one_error("a: {dtype: float, shape: [N]}\nb: {dtype: float, shape: [N]}\nc: {dtype: float, shape: [N]}",
                  """
                  s = a * 2 + stop_gradient(b)
                  loss = c * floor(s + c)
                  """)
    assert d.code == "E230"
    assert "'floor' of 's + c', which carries a gradient (from 'a', 'c')" in d.message
    assert d.loc.line == 9


def test_e230_on_a_learnable_tensor():
    d = one_error(X, "loss = x * round(w) * w", "learnable:\n  w: {shape: [], init: 1.0}")
    assert d.code == "E230" and "'round' of 'w', which carries a gradient" in d.message


def test_e230_for_each_binding_without_follow_on_errors():
    errs = errors(X, """
        a = round(x)
        b = sign(x)
        loss = x * a * b
        """)
    assert [e.code for e in errs] == ["E230", "E230"]


def test_round_bound_outside_stop_gradient_is_e230():
    """The check is where the call is written: bind the whole straight-through term instead."""
    d = one_error(X, """
        r = round(x)
        loss = (x + stop_gradient(r - x)) ** 2
        """)
    assert d.code == "E230" and d.loc.line == 6


# --------------------------------------------------------------------------- accepted


def test_round_of_stop_gradient_is_accepted():
    prog = program(X, "loss = x * round(stop_gradient(x))")
    r = next(e for e in sp.preorder_traversal(prog.loss) if isinstance(e, ir.Round))
    t = prog.typeof(r)
    assert (t.dtype, t.axes, t.grad) == ("float", ("N",), False)
    assert prog.typeof(prog.loss).grad


def test_straight_through_inside_stop_gradient_is_accepted():
    prog = program(X, "loss = (x + stop_gradient(round(x) - x)) ** 2")
    assert prog.typeof(prog.loss).grad
    assert formula_text(prog.loss) == "(x + stop_gradient(-x + round(x)))**2"


def test_nested_calls_inside_stop_gradient_are_accepted():
    program(NC, "loss = x * stop_gradient(sign(x) * floor(ceil(x) + round(x)))")
    program(NC, "loss = -log_softmax(x, axis=C)[argmax(stop_gradient(x * 2) + 1, axis=C)]")


def test_argmax_type_indexes_the_removed_axis():
    prog = program("student: {dtype: float, shape: [N, C]}\nteacher: {dtype: float, shape: [N, C]}", """
        pseudo = argmax(stop_gradient(teacher), axis=C)
        loss = -log_softmax(student, axis=C)[pseudo]
        """)
    am = next(e for e in sp.preorder_traversal(prog.loss) if isinstance(e, ir.ArgMax))
    t = prog.typeof(am)
    assert (t.dtype, t.axes, t.index_of, t.grad) == ("int", ("N",), "C", False)
    assert isinstance(prog.loss.args[-1], ir.Gather) or any(isinstance(e, ir.Gather) for e in prog.loss.args)


def test_arg_extrema_of_integer_inputs_are_accepted():
    inputs = "x: {dtype: float, shape: [N, C]}\nvotes: {dtype: int, shape: [N, C], domain: \"[0, C)\"}"
    prog = program(inputs, "loss = x[argmin(votes, axis=C)] * sum(x * one_hot(argmax(votes, axis=C), C), axis=C)")
    assert prog.typeof(prog.loss).grad


def test_piecewise_constant_of_integers_and_parameters():
    inputs = "z: {dtype: float, shape: [N, C]}\nlabel: {dtype: int, shape: [N], domain: \"[0, C)\"}"
    extra = "params:\n  k: {default: -3}\n  s: {default: 0.7}"
    prog = program(inputs, "loss = z[label] * (sign(label) + round(label) + floor(k) + sign(k) + ceil(s))", extra)
    assert prog.typeof(prog.loss).grad
    text = formula_text(prog.loss)
    assert "floor" not in text  # floor of an integer parameter is the parameter
    assert "sign(k)" in text and "ceil(s)" in text


def test_comparison_with_argmax_is_a_condition():
    inputs = "x: {dtype: float, shape: [N, C]}\nlabel: {dtype: int, shape: [N], domain: \"[0, C)\"}"
    prog = program(inputs, "loss = where(argmax(stop_gradient(x), axis=C) == label, 0.0, 1.0) * x[label]")
    assert prog.typeof(prog.loss).axes == ("N",)


def test_constants_fold_half_to_even():
    assert ir.Round(sp.Float(2.5)) == 2 and ir.Round(sp.Float(-2.5)) == -2 and ir.Round(sp.Float(3.5)) == 4
    assert ir.Round(sp.Rational(-1, 2)) == 0 and ir.Round(sp.pi) == 3
    assert ir.Floor(sp.Float(-1.5)) == -2 and ir.Ceil(sp.Float(-1.5)) == -1
    assert ir.Sign(sp.Float(-0.25)) == -1 and ir.Sign(sp.Integer(0)) == 0 and ir.Sign(-sp.log(2)) == -1
    prog = program(X, "loss = x * round(2.5) + floor(-0.5) * x")
    assert prog.loss == sp.Symbol("x")


# --------------------------------------------------------------------------- other errors


def test_sort_and_topk_used_legally_are_e231():
    d = one_error(X, "loss = x * sort(stop_gradient(x))")
    assert d.code == "E231"
    assert d.message.startswith("formula: 'sort' is not supported by losscc yet: the losses that sort (the Lovasz hinge)")
    inputs = "x: {dtype: float, shape: [N, C]}\nvotes: {dtype: int, shape: [N, C], domain: \"[0, C)\"}"
    d = one_error(inputs, "loss = x * topk(votes, 2, axis=C)")
    assert d.code == "E231" and "'topk' is not supported by losscc yet" in d.message


def test_sort_on_a_float_path_is_e230():
    d = one_error(X, "loss = x * sort(x)")
    assert d.code == "E230"
    assert "losscc refuses 'sort' on values with a gradient" in d.message
    assert "not supported by losscc yet, also under stop_gradient" in d.hint


def test_comparison_used_as_a_number_is_e212():
    d = one_error(X, "loss = (x > 0) * x")
    assert d.code == "E212"
    assert d.message == ("formula: a condition is used as a number (operand); comparisons have no gradient, "
                         "so they may only choose between values")
    assert "where(condition, a, b)" in d.hint and "where(condition, 1.0, 0.0)" in d.hint
    d = one_error(X, "loss = x * round(x > 0)")
    assert d.code == "E212" and "(the argument of round)" in d.message


@pytest.mark.parametrize("formula, code, text", [
    ("loss = x * argmax(stop_gradient(x), axis=C)", "E213", "an integer tensor is used as a float"),
    ("loss = x * one_hot(argmax(stop_gradient(x)), C)", "E209", "argmax: needs axis="),
    ("loss = x * round(stop_gradient(x), axis=C)", "E209", "round: takes no axis"),
    ("loss = x * round(stop_gradient(x), 2)", "E210", "round takes 1 argument, got 2"),
    ("loss = x * argmax(stop_gradient(x), axis=K)", "E217", "argmax: unknown axis 'K'"),
    ("loss = x * argmax", "E205", "function 'argmax' used without calling it"),
    ("loss = x[argmax(stop_gradient(x), axis=C) + 1]", "E213", "an integer tensor is used as a float"),
])
def test_argument_errors(formula, code, text):
    d = one_error(NC, formula)
    assert d.code == code and text in d.message, d.format()


def test_argmax_over_a_variadic_group_is_e218():
    d = one_error('x: {dtype: float, shape: [N, "*D"]}',
                  "loss = x * where(argmax(stop_gradient(x), axis=D) == 0, 1.0, 2.0)")
    assert d.code == "E218"


def test_function_names_are_reserved_for_inputs():
    with pytest.raises(SpecError) as info:
        make_spec("round: {dtype: float, shape: [N]}", "loss = round * 2")
    assert any(d.code == "E120" and "formula function" in d.message for d in info.value.diagnostics)


# --------------------------------------------------------------------------- reference


def test_reference_rounds_half_to_even_and_freezes_stop_gradient():
    prog = program(X + "\nt: {dtype: float, shape: [N]}", "loss = (x + stop_gradient(round(x) - x) - t) ** 2")
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.4, 3.7])
    t = np.zeros_like(x)
    ref = reference(prog, {"x": x, "t": t}, {})
    q = np.array([0.0, 2.0, 2.0, 0.0, -2.0, 0.0, 4.0])
    np.testing.assert_allclose(ref.values["none"], q ** 2, rtol=1e-15)
    # the straight-through gradient: d/dx (q - t)^2 = 2 (q - t), even at the jumps of round
    np.testing.assert_allclose(ref.grads["x"], 2 * q, rtol=1e-12, atol=1e-14)
    assert not ref.kinks["x"].any()


def test_reference_floor_ceil_sign():
    prog = program(X, "loss = x * stop_gradient(floor(x) + 10 * ceil(x) + 100 * sign(x))")
    x = np.array([-1.5, -0.0, 0.0, 0.25, 2.0])
    ref = reference(prog, {"x": x}, {})
    factor = np.array([-2 - 10 - 100, 0, 0, 0 + 10 + 100, 2 + 20 + 100], dtype=float)
    np.testing.assert_allclose(ref.values["none"], x * factor, rtol=1e-15)
    np.testing.assert_allclose(ref.grads["x"], factor, rtol=1e-12)


def test_reference_argmax_takes_the_first_index_at_ties():
    prog = program("student: {dtype: float, shape: [N, C]}\nteacher: {dtype: float, shape: [N, C]}", """
        loss = -log_softmax(student, axis=C)[argmax(stop_gradient(teacher), axis=C)]
        """)
    student = np.array([[0.0, 1.0, 2.0], [0.5, -0.5, 0.0], [1.0, 1.0, 1.0]])
    teacher = np.array([[3.0, 3.0, 1.0], [0.0, 1.0, 1.0], [-1.0, -2.0, -1.0]])
    ref = reference(prog, {"student": student, "teacher": teacher}, {})
    labels = [0, 1, 0]
    logp = student - np.log(np.exp(student).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(ref.values["none"], -logp[np.arange(3), labels], rtol=1e-14)
    p = np.exp(logp)
    np.testing.assert_allclose(ref.grads["student"], p - np.eye(3)[labels], rtol=1e-10, atol=1e-14)
    assert np.all(ref.grads["teacher"] == 0)  # no gradient flows into the teacher


def test_reference_argmin_first_index_and_integer_inputs():
    inputs = "x: {dtype: float, shape: [N, C]}\nvotes: {dtype: int, shape: [N, C], domain: \"[0, C)\"}"
    prog = program(inputs, "loss = x[argmin(votes, axis=C)] + x[argmax(votes, axis=C)] * 10")
    votes = np.array([[2, 0, 0], [1, 1, 1], [0, 2, 2]])
    x = np.arange(9, dtype=float).reshape(3, 3)
    ref = reference(prog, {"x": x, "votes": votes}, {})
    lo, hi = [1, 0, 0], [0, 0, 1]
    np.testing.assert_allclose(ref.values["none"], x[np.arange(3), lo] + 10 * x[np.arange(3), hi])


# --------------------------------------------------------------------------- lowering


def test_lowering_spells_each_backend():
    spec = make_spec("x: {dtype: float, shape: [N, C]}\nlabel: {dtype: int, shape: [N], domain: \"[0, C)\"}", """
        top = argmax(stop_gradient(x), axis=C)
        low = argmin(stop_gradient(x), axis=C)
        loss = where(top == label, 1.0, 0.5) * x[low] * stop_gradient(round(x[top]) + floor(x[low]) + ceil(x[top]) + sign(x[low]))
        """)
    ms = compile_spec(spec, get("mindspore"))
    pd = compile_spec(spec, get("paddle"))
    for src, need in ((ms, ["ops.argmax(", "keepdim=True)", "ops.argmin(", "keepdims=True)", "ops.round(",
                            "ops.floor(", "ops.ceil(", "ops.sign(", "ops.cast(top, label.dtype) == label"]),
                      (pd, ["paddle.argmax(", "paddle.argmin(", "paddle.round(", "paddle.floor(", "paddle.ceil(",
                            "paddle.sign(", "paddle.cast(top, label.dtype) == label"])):
        for text in need:
            assert text in src, (text, src)
    assert "paddle.argmin(" in pd and pd.count("keepdim=True") >= 2


HARD = """
student: {dtype: float, shape: [N, C]}
teacher: {dtype: float, shape: [N, C]}
label: {dtype: int, shape: [N], domain: "[0, C)"}
"""
HARD_FORMULA = """
pseudo = argmax(stop_gradient(teacher), axis=C)
agree = where(pseudo == label, 1.0, 2.0)
loss = -log_softmax(student, axis=C)[pseudo] * agree + stop_gradient(round(student[label]) - student[label])
"""


def _load(source: str, name: str, tmp_path):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return verify.load_module(path, name)


def _expected():
    student = np.array([[0.0, 1.0, 2.0], [0.5, -0.5, 0.0], [1.5, 2.5, -0.5]])
    teacher = np.array([[3.0, 3.0, 1.0], [0.0, 1.0, 1.0], [-1.0, -2.0, 4.0]])
    label = np.array([1, 1, 0])
    pseudo = np.array([0, 1, 2])
    logp = student - np.log(np.exp(student).sum(axis=1, keepdims=True))
    agree = np.where(pseudo == label, 1.0, 2.0)
    picked = student[np.arange(3), label]
    loss = -logp[np.arange(3), pseudo] * agree + (np.round(picked) - picked)
    grad = (np.exp(logp) - np.eye(3)[pseudo]) * agree[:, None]
    return student, teacher, label, loss, grad


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_generated_paddle_runs_with_int32_and_int64_labels(label_dtype, dtype, tmp_path):
    import paddle

    spec = make_spec(HARD, HARD_FORMULA)
    mod = _load(compile_spec(spec, get("paddle")), f"lint_pd_{np.dtype(label_dtype).name}_{np.dtype(dtype).name}", tmp_path)
    student, teacher, label, loss, grad = _expected()
    s = paddle.to_tensor(student.astype(dtype), stop_gradient=False)
    out = mod.t(s, paddle.to_tensor(teacher.astype(dtype)), paddle.to_tensor(label.astype(label_dtype)),
                reduction="none")
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(out.numpy(), loss, rtol=tol, atol=tol)
    out.sum().backward()
    np.testing.assert_allclose(s.grad.numpy(), grad, rtol=tol, atol=tol)
    static = paddle.jit.to_static(mod.T(reduction="sum"), full_graph=True)
    got = static(paddle.to_tensor(student.astype(dtype)), paddle.to_tensor(teacher.astype(dtype)),
                 paddle.to_tensor(label.astype(label_dtype)))
    np.testing.assert_allclose(float(got), loss.sum(), rtol=tol)


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_generated_mindspore_runs_with_int32_and_int64_labels(label_dtype, dtype, tmp_path):
    import mindspore as ms

    spec = make_spec(HARD, HARD_FORMULA)
    mod = _load(compile_spec(spec, get("mindspore")), f"lint_ms_{np.dtype(label_dtype).name}_{np.dtype(dtype).name}", tmp_path)
    student, teacher, label, loss, grad = _expected()
    args = (ms.Tensor(student.astype(dtype)), ms.Tensor(teacher.astype(dtype)), ms.Tensor(label.astype(label_dtype)))
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(mod.t(*args, reduction="none").asnumpy(), loss, rtol=tol, atol=tol)
    cell = mod.T(reduction="sum")
    _, g = ms.value_and_grad(cell, grad_position=0)(*args)
    np.testing.assert_allclose(g.asnumpy(), grad, rtol=tol, atol=tol)
    got = ms.jit(cell)(*args)
    np.testing.assert_allclose(float(got.asnumpy()), loss.sum(), rtol=tol)
    assert math.isfinite(float(got.asnumpy()))
