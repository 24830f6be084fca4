"""Attacks a pull request can make, found by an eighth red-team review (2026-12-06): a spec's
`dropin.replaces` that `losscc docs` imported and called, line breaks that viewers do not
show (a key hidden in a comment), repeated keywords of which the last silently won, a spec
named like a Python builtin, hyperparameters named like the methods the class calls, and
clip bounds that the generated check printed with `math.` (never imported)."""

from __future__ import annotations

import sys

import pytest

from losscc import docbuiltin
from losscc.backends import get
from losscc.emit import compile_spec
from losscc.errors import SpecError
from losscc.parse import build_program
from losscc.spec import spec_from_text
from tests.codegen_util import case
from tests.test_fuzz_found import _check

HEAD = "name: t\nsummary: s.\ninputs:\n  input: {dtype: float, shape: [N]}\n  target: {dtype: float, shape: [N]}\n"


def _error(text: str) -> str:
    with pytest.raises(SpecError) as exc:
        build_program(spec_from_text(text, "t.yaml"))
    return str(exc.value)


@pytest.mark.parametrize("name", ["venv.__main__.x", "pr_helpers.f", "os.system", "paddle._C_ops.mean",
                                  "paddle.nn.functional.__getattribute__", "paddle"])
def test_docs_never_imports_a_module_a_spec_names(name, tmp_path, monkeypatch):
    """replaces: [venv.__main__.x] made `losscc docs` import venv's __main__ (it built a
    virtualenv in docs/); pr_helpers.f ran a committed module.  Only a public attribute
    of the drawing backend's framework is a built-in to draw."""
    (tmp_path / "pr_helpers.py").write_text("raise SystemExit('imported')\nf = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = spec_from_text(HEAD + "formula: |\n  loss = (input - target)**2\n"
                          f"dropin:\n  paddle:\n    replaces: [{name}]\n    function: [input, target, reduction]\n",
                          "t.yaml")
    assert docbuiltin.builtin_call(spec, get("paddle")) is None
    assert "pr_helpers" not in sys.modules


def test_a_framework_function_is_still_drawn():
    spec = spec_from_text(HEAD + "formula: |\n  loss = (input - target)**2\n"
                          "dropin:\n  paddle:\n    replaces: [paddle.nn.functional.mse_loss]\n"
                          "    function: [input, target, reduction]\n", "t.yaml")
    assert docbuiltin.builtin_call(spec, get("paddle")) == "paddle.nn.functional.mse_loss"


@pytest.mark.parametrize("brk", ["\x85", "\u2028", "\u2029", "\r"])
def test_line_breaks_that_viewers_do_not_show_are_refused(brk):
    """`summary: Squared error.<NEL>guards: {clip: 0.001}` reads as one summary in cat, an
    editor or a diff, and PyYAML reads a guards key: the loss became 1000 * clip(x)."""
    text = ("name: t\nsummary: Squared error." + brk + "guards: {clip: 0.001}\n"
            "inputs:\n  x: {dtype: float, shape: [N]}\nformula: |\n  loss = x**2\n")
    msg = _error(text)
    assert "t.yaml:2:24" in msg and "E101" in msg and "only LF and CRLF" in msg


def test_crlf_is_still_read():
    text = "name: t\r\nsummary: S.\r\ninputs:\r\n  x: {dtype: float, shape: [N]}\r\nformula: |\r\n  loss = x**2\r\n"
    assert spec_from_text(text, "t.yaml").name == "t"


@pytest.mark.parametrize("formula, code", [
    ("max(input, axis=N, axis=N)", "E209"),
    ("normalize(input, axis=N, eps=0.5, eps=1e-12)", "E209"),
    ("mse(input, target, reduction=sum, reduction=none)", "E209"),
    ("max(input, **target)", "E202"),
])
def test_a_repeated_keyword_is_an_error(formula, code):
    """Python refuses `f(a=1, a=2)`; the formula reader kept the last value, which a reviewer
    does not read."""
    msg = _error(HEAD + f"formula: |\n  loss = {formula}\n")
    assert code in msg and ("given twice" in msg or "'**'" in msg), msg


@pytest.mark.parametrize("name", ["map", "sorted"])
def test_a_spec_named_like_a_builtin_the_package_reads_is_refused(name):
    """A spec `map` rebound `map` in the package's __init__: get_loss raised TypeError."""
    msg = _error(HEAD.replace("name: t", f"name: {name}") + "formula: |\n  loss = input - target\n")
    assert "E120" in msg and "Python builtin" in msg


def test_the_builtins_the_package_reads_are_listed():
    """Every builtin the generated __init__ reads is one no spec may be named."""
    import ast
    import builtins
    from pathlib import Path

    from losscc.specnames import PACKAGE_READS
    for b in ("paddle", "mindspore", "jax"):
        tree = ast.parse((Path(__file__).resolve().parents[1] / "generated" / b / "__init__.py").read_text())
        read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and hasattr(builtins, n.id)}
        assert read and read <= PACKAGE_READS, read - PACKAGE_READS


@pytest.mark.parametrize("name", ["create_parameter", "init", "state_dict"])
def test_a_hyperparameter_named_like_a_method_the_class_calls_is_refused(name):
    """A float parameter `create_parameter` made Paddle's Lw() call a float; `init` replaced the
    JAX dataclass's init method."""
    msg = _error(HEAD + f"params:\n  {name}: {{default: 0.5}}\nlearnable:\n  w: {{shape: [1], init: 1.0}}\n"
                 f"formula: |\n  loss = w[0] * {name} * (input - target)**2\n")
    assert "E120" in msg and "method" in msg


@pytest.mark.parametrize("backend", ["jax", "paddle", "mindspore"])
def test_clip_bounds_with_a_constant_or_a_root_compile_to_running_code(backend, tmp_path):
    """clip(x, lo * pi, hi) printed `math.pi*lo` in the generated check, which imports no
    math: every call raised NameError.  sqrt(lo) gave math.sqrt the same way."""
    pytest.importorskip(backend)
    spec = spec_from_text(HEAD + "params:\n  lo: {default: 0.1, min: 0}\n  hi: {default: 2.0}\n"
                          "formula: |\n  loss = clip(input, lo * pi, hi) + clip(target, sqrt(lo), hi)\n", "t.yaml")
    assert "math." not in compile_spec(spec, get(backend))
    _check(spec, backend, [case(spec, {"N": (4,)}, seed=2)], tmp_path)
