"""Language features along an axis: axes of a fixed size and their components (box[0]),
gathers from a table (centers[label]), norm, normalize, cos and sin.

Typing errors are checked with their positions; values and gradients of the reference
evaluator against NumPy; one compiled run per backend against the reference; and the
gradient at the guarded point (the norm of a zero vector)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from losscc.errors import SpecError
from losscc.parse import build_program
from losscc.reference import reference
from losscc.spec import spec_from_text


def make_spec(inputs: str, formula: str, extra: str = "", name: str = "t"):
    text = f"name: {name}\nsummary: a test spec\ninputs:\n"
    text += textwrap.indent(textwrap.dedent(inputs).strip("\n"), "  ") + "\n"
    if extra:
        text += textwrap.dedent(extra).strip("\n") + "\n"
    text += "formula: |\n" + textwrap.indent(textwrap.dedent(formula).strip("\n"), "  ") + "\n"
    return spec_from_text(text, "<test>")


def error_of(inputs: str, formula: str, extra: str = ""):
    with pytest.raises(SpecError) as info:
        build_program(make_spec(inputs, formula, extra))
    (d,) = info.value.diagnostics
    return d.code, d.loc.line, d.loc.col, d.message


BOXES = """
    a: {dtype: float, shape: ["*B", "K=4"]}
    b: {dtype: float, shape: ["*B", K]}
"""
TABLE = """
    x: {dtype: float, shape: [N, D]}
    label: {dtype: int, shape: [N], domain: "[0, C)"}
    table: {dtype: float, shape: [C, D]}
"""


# ---------------------------------------------------------------- typing

def test_fixed_size_is_read_and_shared():
    spec = make_spec(BOXES, "loss = a[0] - b[3]")
    assert spec.sizes == {"K": 4}
    assert spec.shape_text(spec.input("b")) == "[*B, K=4]"
    prog = build_program(spec)
    assert prog.typeof(prog.loss).axes == ("B",)


def test_fixed_size_errors_name_the_position():
    assert error_of("""
        a: {dtype: float, shape: [N, "K=4"]}
        b: {dtype: float, shape: [N, "K=5"]}
        """, "loss = a[0]")[:3] == ("E124", 5, 32)
    code, line, col, msg = error_of('a: {dtype: float, shape: [N, "K=0"]}', "loss = a[0]")
    assert (code, line, col) == ("E124", 4, 32) and "1 to 64" in msg


def test_constant_index_errors():
    assert error_of(BOXES, "loss = a[4]")[:3] == ("E219", 7, 12)
    code, line, col, msg = error_of("x: {dtype: float, shape: [N]}", "loss = x[0]")
    assert (code, line, col) == ("E219", 6, 10) and "K=4" in msg
    code, _, _, msg = error_of('x: {dtype: float, shape: ["J=2", "K=4"]}', "loss = sum(x[0], axis=J)")
    assert code == "E219" and "several axes of a fixed size" in msg


def test_normalize_keywords_are_checked():
    vec = "x: {dtype: float, shape: [N, D]}"
    assert error_of(vec, "loss = sum(normalize(x, axis=D, eps=0), axis=D)")[:3] == ("E225", 6, 39)
    assert error_of(vec, "loss = sum(normalize(x, axis=D, eps=x), axis=D)")[0] == "E225"
    code, line, col, msg = error_of(vec, "loss = norm(x, axis=D, eps=1)")
    assert (code, line, col) == ("E209", 6, 26) and "eps" in msg
    assert error_of(vec, "loss = norm(x)")[0] == "E209"


def test_function_names_are_reserved():
    code, line, col, msg = error_of("x: {dtype: float, shape: [N]}", "cos = x * 2\nloss = 1 - cos")
    assert (code, line, col) == ("E120", 6, 3) and "'cos'" in msg


def test_table_axes_and_global_order():
    prog = build_program(make_spec(TABLE, "loss = sum((x - table[label])**2, axis=D)"))
    assert prog.axes == ("N", "C", "D")  # the table's C goes before the shared D
    gathered = next(e for e in prog.types if type(e).__name__ == "Gather")
    assert prog.typeof(gathered).axes == ("N", "D")
    # first appearance where it fits every input
    assert build_program(make_spec(BOXES, "loss = a[0]")).axes == ("B", "K")


def test_table_with_a_variadic_axis_is_refused():
    code, _, _, msg = error_of("""
        x: {dtype: float, shape: [N, "*S"]}
        label: {dtype: int, shape: [N], domain: "[0, C)"}
        table: {dtype: float, shape: [C, "*S"]}
        """, "loss = sum(table[label] * x, axis=S)")
    assert code == "E224" and "variadic" in msg


# ---------------------------------------------------------------- reference

RNG = np.random.default_rng(7)
A = RNG.normal(size=(3, 4))
B = RNG.normal(size=(3, 4))


def test_reference_of_components_and_their_gradient():
    prog = build_program(make_spec(BOXES, "loss = (a[2] - a[0]) * b[1]"))
    ref = reference(prog, {"a": A, "b": B}, {})
    np.testing.assert_allclose(np.asarray(ref.values["none"], float), (A[:, 2] - A[:, 0]) * B[:, 1], rtol=1e-13)
    ga = np.zeros_like(A)
    ga[:, 2], ga[:, 0] = B[:, 1], -B[:, 1]
    np.testing.assert_allclose(np.asarray(ref.grads["a"], float), ga, rtol=1e-13)
    gb = np.zeros_like(B)
    gb[:, 1] = A[:, 2] - A[:, 0]
    np.testing.assert_allclose(np.asarray(ref.grads["b"], float), gb, rtol=1e-13)


def test_reference_of_a_table_gather():
    x, table, label = RNG.normal(size=(5, 3)), RNG.normal(size=(2, 3)), np.array([1, 0, 1, 1, 0])
    prog = build_program(make_spec(TABLE, "loss = sum((x - table[label])**2, axis=D) / 2"))
    ref = reference(prog, {"x": x, "label": label, "table": table}, {})
    d = x - table[label]
    np.testing.assert_allclose(np.asarray(ref.values["none"], float), (d**2).sum(1) / 2, rtol=1e-13)
    gt = np.zeros_like(table)
    np.add.at(gt, label, -d)  # repeated labels accumulate
    np.testing.assert_allclose(np.asarray(ref.grads["table"], float), gt, rtol=1e-13)


def test_reference_of_norm_normalize_cos_sin():
    vec = "x: {dtype: float, shape: [N, D]}\ny: {dtype: float, shape: [N, D]}"
    prog = build_program(make_spec(vec, """
        c = sum(normalize(x, axis=D) * normalize(y, axis=D, eps=0.5), axis=D)
        loss = cos(c) + sin(norm(x, axis=D))
        """))
    y = np.array([[0.1, 0.2, 0.0, 0.1], *B[1:]])  # norm below eps in the first row
    ref = reference(prog, {"x": A, "y": y}, {})
    nx = np.linalg.norm(A, axis=1)
    c = (A / nx[:, None] * y / np.maximum(np.linalg.norm(y, axis=1), 0.5)[:, None]).sum(1)
    np.testing.assert_allclose(np.asarray(ref.values["none"], float), np.cos(c) + np.sin(nx), rtol=1e-13)


def test_norm_of_a_zero_vector_has_gradient_zero():
    prog = build_program(make_spec("x: {dtype: float, shape: [N, D]}", "loss = norm(x, axis=D)"))
    x = np.array([[0.0, 0.0, 0.0], [3.0, 0.0, 4.0]])
    ref = reference(prog, {"x": x}, {})
    np.testing.assert_allclose(np.asarray(ref.values["none"], float), [0.0, 5.0])
    np.testing.assert_allclose(np.asarray(ref.grads["x"], float), [[0, 0, 0], [0.6, 0, 0.8]], atol=1e-15)


# ---------------------------------------------------------------- compiled, every backend

COMPILED = """
    boxes: {dtype: float, shape: [N, "K=4"]}
    label: {dtype: int, shape: [N], domain: "[0, C)"}
    table: {dtype: float, shape: [C, K]}
"""
COMPILED_FORMULA = """
    w = boxes[2] - boxes[0]
    picked = normalize(table[label], axis=K)
    loss = cos(w) * sin(boxes[1]) + sum(picked * boxes, axis=K) + norm(boxes - table[label], axis=K)
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    from losscc import verify
    from losscc.backends import all_backends
    from losscc.emit import compile_spec

    spec = make_spec(COMPILED, COMPILED_FORMULA, name="axis_features")
    tmp = tmp_path_factory.mktemp("axis_features")
    mods = {}
    for b in all_backends():
        path = tmp / f"axis_features_{b.name}.py"
        path.write_text(compile_spec(spec, b))
        mods[b.name] = verify.load_module(path, f"axis_features_{b.name}")
    return spec, mods


def test_every_backend_agrees_with_the_reference(compiled):
    from losscc import verify
    from losscc.cases import CaseData

    spec, mods = compiled
    boxes = np.array([[0.5, 1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0], [1.0, -1.0, 0.5, 2.0]])
    table = np.array([[1.0, 0.0, 1.0, 0.0], [1.0, -1.0, 0.5, 2.0]])
    # the third box equals the row it subtracts: the norm's gradient is guarded to 0 there
    zero = CaseData("zero_norm", "test", {"boxes": boxes, "label": np.array([0, 0, 1]), "table": table}, {}, {},
                    from_reference=True)
    cases = verify.collect_cases(spec, Path("."), [], 1, 0) + [zero]
    for name, mod in mods.items():
        rows = verify.verify_spec(spec, {name: mod}, {name: verify.runner(name)}, ("float64",), ("eager",), cases)
        assert rows and all(r.ok for r in rows), (name, [r.failures for r in rows])


def test_generated_code_slices_and_checks_the_size(compiled):
    import jax.numpy as jnp

    spec, mods = compiled
    from losscc.backends import get
    from losscc.emit import compile_spec

    code = compile_spec(spec, get("jax"))
    assert "boxes[..., 2:3]" in code and "jnp.take(table, label * 4 + jnp.arange(4" in code
    with pytest.raises(ValueError, match=r"boxes must be of shape \[N, K=4\]; received: size 5 on axis K"):
        mods["jax"].axis_features(jnp.zeros((2, 5)), jnp.zeros((2,), jnp.int32), jnp.zeros((3, 4)))


def test_compiled_norm_of_a_zero_vector_has_gradient_zero(tmp_path):
    """The frameworks' own sqrt(sum(x**2)) gives NaN there; the guarded form gives 0."""
    import jax
    import jax.numpy as jnp

    from losscc import verify
    from losscc.backends import get
    from losscc.emit import compile_spec

    spec = make_spec("x: {dtype: float, shape: [N, D]}", "loss = norm(x, axis=D)", name="zero_norm")
    path = tmp_path / "zero_norm.py"
    path.write_text(compile_spec(spec, get("jax")))
    fn = verify.load_module(path, "zero_norm_jax").zero_norm
    x = jnp.array([[0.0, 0.0, 0.0], [3.0, 0.0, 4.0]], dtype=jnp.float32)
    g = jax.grad(lambda v: fn(v, reduction="sum"))(x)
    np.testing.assert_allclose(np.asarray(g), [[0, 0, 0], [0.6, 0, 0.8]], rtol=1e-6)


def test_a_called_spec_with_a_fixed_axis_needs_one_of_that_size():
    call = "loss = iou_loss(a, b, reduction=none)"
    code, _, _, msg = error_of("a: {dtype: float, shape: [N, J]}\nb: {dtype: float, shape: [N, J]}", call)
    assert code == "E264" and "fixed size 4" in msg
    prog = build_program(make_spec('a: {dtype: float, shape: [N, "J=4"]}\nb: {dtype: float, shape: [N, J]}', call))
    assert prog.typeof(prog.loss).axes == ("N",)
