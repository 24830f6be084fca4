"""The generated code as users' tools see it: formatters leave it unchanged, linters accept
it, nothing formats it at generation time, the package's names do not shadow its modules,
and bad hyperparameters get messages that say what is wrong."""

import difflib
import os
import subprocess
import sys
from pathlib import Path

import black
import numpy as np
import pytest

from losscc import layout, lines, verify
from losscc.backends import names
from tests.backend_util import BACKENDS

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT / "generated"
SPECS = sorted(p.stem for p in (ROOT / "specs").glob("*.yaml"))


def tool(*args):
    """A formatter or linter with its default settings (no user or project configuration)."""
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


def test_black_default_style_leaves_generated_unchanged():
    r = tool("black", "--check", "-q", "--config", os.devnull, "generated")
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format_leaves_generated_unchanged():
    r = tool("ruff", "format", "--check", "--isolated", "generated")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("select", [[], ["--select", "E4,E7,E9,F"]], ids=["defaults", "E4,E7,E9,F"])
def test_ruff_check_accepts_generated(select):
    r = tool("ruff", "check", "--isolated", "--no-cache", *select, "generated")
    assert r.returncode == 0, r.stdout + r.stderr


def test_layout_agrees_with_black_at_other_widths(monkeypatch):
    """The layout is black's algorithm, not a fit to 88 columns: on the unformatted text of
    every module it splits as black does at each width (lines with a trailing comment
    aside: the layout moves a comment that does not fit above its statement)."""
    import losscc.render as render
    from losscc import emit

    monkeypatch.setattr(render, "layout", lambda text: text)
    files = emit.render_tree(emit.load_all(emit.find_specs([str(ROOT / "specs")])))
    assert "\n" in files["paddle/huber.py"]
    disagreements, splits = [], 0
    for width in (50,):
        monkeypatch.setattr(lines, "LINE_LENGTH", width)
        for rel, text in sorted(files.items()):
            mine = layout.layout(text)
            theirs = black.format_str(text, mode=black.Mode(line_length=width))
            splits += mine.count("\n") - text.count("\n")
            diff = [ln for ln in difflib.unified_diff(theirs.splitlines(), mine.splitlines(), lineterm="", n=0)
                    if ln.startswith(("-", "+")) and not ln.startswith(("---", "+++"))]
            if diff and not any("#" in ln for ln in diff):
                disagreements.append((width, rel, diff[:6]))
    assert splits > 200
    assert not disagreements, disagreements[:3]


SHAPES = '''
def very_long_function_name(input, target, weight=None, pos_weight=None, *, delta=1.0, reduction="mean"):
    value = first_argument_value if some_flag_is_set else (second_value + third_value * fourth_value)
    ok = alpha_value is not None and beta_value not in ("none", "mean", "sum") or gamma_value <= delta_value
    result = paddle.where(condition_tensor, paddle.full_like(other_tensor, 1), other_tensor[0]) ** gamma
    shape = (N, 1) + tuple(input_tensor.shape[2:]) + (1,) * len(trailing_dimensions_of_input)
    loss = -(alpha * picked * ops.where(t_1, ops.where(t_1, t, 1) ** gamma, frozen**gamma)) / total_count
    return ops.cast(result_value_tensor, input_dtype_value) if half_precision_flag else result_value_tensor
    if not isinstance(reduction, str) or reduction not in ("none", "mean", "sum", "batchmean", "other"):
        raise ValueError("a message that is fairly long: " + f"received: reduction={reduction!r} ({type(reduction).__name__})")
    x = a_long_name_number_one.attribute_access.method_call(argument_one, argument_two).other_method(arg)
    y = [element_number_one, element_number_two, element_number_three, element_number_four, five]
    z = some_function(keyword_argument_one=value_one, keyword_argument_two=-value_two, kw3=not flag_value)
    w = (a_value - b_value) * (c_value - d_value) / (e_value - f_value) - (g_value - h_value) ** 2 + i_value
    v = call_one(call_two(call_three(call_four(argument_value_one, argument_value_two), arg3), arg4), a5)
    self.log_vars = ms.Parameter(ops.full((2,), 0.0, dtype=dtype), name="log_vars_with_a_long_name_here")
    u = left_operand_value_number_one < right_operand_value_number_two <= third_operand_value_three_x
'''


def test_layout_agrees_with_black_on_other_shapes(monkeypatch):
    """Shapes the current specs do not produce (ternaries, chained comparisons, `not in`,
    `is not`, attribute chains, lists, keyword arguments, deep calls), at many widths."""
    text = SHAPES.strip("\n") + "\n"
    for width in range(40, 121, 8):
        monkeypatch.setattr(lines, "LINE_LENGTH", width)
        assert layout.layout(text) == black.format_str(text, mode=black.Mode(line_length=width)), width


def test_layout_moves_a_long_trailing_comment_above_its_statement():
    stmt = "    if weight is None and pos_weight is None:  # " + "x" * 60
    assert layout.split_line(stmt) == ["    # " + "x" * 60, "    if weight is None and pos_weight is None:"]
    assert layout.split_line("    if half:  # short") == ["    if half:  # short"]


BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "black" or name.startswith("black."):
            raise ImportError("black must not be imported while generating")
sys.meta_path.insert(0, Block())
from losscc.cli import main
code = main(["generate", "-o", sys.argv[1]])
assert "black" not in sys.modules
sys.exit(code)
"""


def test_generate_does_not_import_black_and_reproduces_the_tree(tmp_path):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-c", BLOCKER, str(out)], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    made = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*.py")}
    committed = {p.relative_to(GEN).as_posix(): p.read_bytes() for p in GEN.rglob("*.py")}
    assert made == committed


def test_version_line_names_no_formatter():
    from losscc.render import version_line

    assert "black" not in version_line()
    for backend in names():
        assert "black" not in (GEN / backend / "huber.py").read_text().split('"""')[0]


def test_imports_are_those_the_code_uses():
    """`F` only where a Paddle module calls paddle.nn.functional (ruff's F401 checks the rest)."""
    import re

    uses_f = {p.stem for p in (GEN / "paddle").glob("*.py") if re.search(r"\bF\.", p.read_text())}
    imports_f = {p.stem for p in (GEN / "paddle").glob("*.py")
                 if "import paddle.nn.functional as F\n" in p.read_text()}
    assert imports_f == uses_f and "mse" not in imports_f and "sigmoid_focal" in imports_f


@pytest.mark.parametrize("backend", BACKENDS)
def test_import_of_a_generated_module_gives_the_module(backend):
    import importlib
    import types

    sys.path.insert(0, str(ROOT))
    try:
        pkg = importlib.import_module(f"generated.{backend}")
        for name in SPECS:
            mod = importlib.import_module(f"generated.{backend}.{name}")
            assert isinstance(mod, types.ModuleType), name
            assert getattr(pkg, name) is mod, name
            cls = getattr(pkg, "".join(part.capitalize() for part in name.split("_")))
            assert cls is getattr(mod, cls.__name__) and isinstance(cls, type)
            assert callable(getattr(mod, name))
        assert not set(pkg.__all__) & set(SPECS)
    finally:
        sys.path.remove(str(ROOT))


def test_no_implicitly_joined_strings():
    """MindSpore's graph compiler re-parses the source text of an interpreted expression
    (the f-string of an error message); a string continued on the next line breaks it."""
    import io
    import tokenize

    for path in GEN.rglob("*.py"):
        toks = [t for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
                if t.type not in (tokenize.NL, tokenize.COMMENT)]
        for a, b in zip(toks, toks[1:]):
            assert not (a.type == b.type == tokenize.STRING), (path, a.start)


# ---------------------------------------------------------------- hyperparameter messages

def load(backend, name):
    import importlib.util

    path = GEN / backend / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"style_{backend}_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def raises(exc, call):
    with pytest.raises(exc) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_parameter_messages(backend):
    m = load(backend, "huber")
    assert raises(TypeError, lambda: m.Huber(delta="1e-1")) == \
        "huber: delta must be a float >= 0; received: delta='1e-1' (str)"
    assert raises(TypeError, lambda: m.Huber(delta=True)) == \
        "huber: delta must be a float >= 0; received: delta=True (bool)"
    assert raises(ValueError, lambda: m.Huber(delta=-0.5)) == \
        "huber: delta must be a float >= 0; received: delta=-0.5 (float)"
    assert raises(ValueError, lambda: m.Huber(delta=float("nan"))).endswith("received: delta=nan (float)")
    m.Huber(delta=2)  # an int is a float here
    t = verify.runner(backend).tensor(np.array([[0.5, -1.0]]), "float32")
    assert raises(TypeError, lambda: m.huber(t, t, delta="1")) == \
        "huber: delta must be a float >= 0; received: delta='1' (str)"
    c = load(backend, "cross_entropy")
    assert raises(ValueError, lambda: c.CrossEntropy(label_smoothing=1.5)) == (
        "cross_entropy: label_smoothing must be a float >= 0 and <= 1; "
        "received: label_smoothing=1.5 (float)")


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_parameter_messages(backend):
    m = load(backend, "cross_entropy")
    assert raises(TypeError, lambda: m.CrossEntropy(ignore_index=1.5)) == \
        "cross_entropy: ignore_index must be an int; received: ignore_index=1.5 (float)"
    assert raises(TypeError, lambda: m.CrossEntropy(ignore_index="-100")) == \
        "cross_entropy: ignore_index must be an int; received: ignore_index='-100' (str)"
    assert raises(TypeError, lambda: m.CrossEntropy(ignore_index=False)) == \
        "cross_entropy: ignore_index must be an int; received: ignore_index=False (bool)"
    m.CrossEntropy(ignore_index=-1)
    m.CrossEntropy(ignore_index=-1.0)  # a float without a fractional part


@pytest.mark.parametrize("backend", BACKENDS)
def test_bool_parameter_messages(backend):
    m = load(backend, "gaussian_nll")
    assert raises(TypeError, lambda: m.GaussianNll(full=1)) == \
        "gaussian_nll: full must be a bool; received: full=1 (int)"
    assert raises(TypeError, lambda: m.GaussianNll(full="False")) == \
        "gaussian_nll: full must be a bool; received: full='False' (str)"
    m.GaussianNll(full=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reduction_messages_list_the_valid_values(backend):
    m = load(backend, "kl_div")
    msg = raises(ValueError, lambda: m.KlDiv(reduction="avg"))
    assert msg == ("kl_div: reduction must be one of 'none', 'mean', 'sum', 'batchmean'; "
                   "received: reduction='avg' (str)")
    assert raises(ValueError, lambda: m.KlDiv(reduction=None)).endswith("received: reduction=None (NoneType)")
