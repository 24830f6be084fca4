"""Attacks a pull request can make, found by a ninth red-team review (2026-12-06), and the
two items the eighth left open: the custom backward's wrapper used fixed names (an input
`dout` replaced the upstream gradient in the PyLayer; `bprop(self, ..., out, dout)` with an
input `out` was a duplicate argument that `ast.parse` accepts and the import refuses)."""

from __future__ import annotations

import pytest

from losscc import emit
from losscc.backends import get
from losscc.emit import compile_spec
from losscc.spec import spec_from_text
from tests.codegen_util import case
from tests.test_fuzz_found import _check

# every name the wrappers once used as a fixed local, context attribute or cell attribute
CLASH = """name: clash
summary: s.
inputs:
  dout: {dtype: float, shape: [N]}
  ctx: {dtype: float, shape: [N]}
  out: {dtype: float, shape: [N]}
  d_dout: {dtype: float, shape: [N]}
  need_out: {dtype: float, shape: [N], optional: true}
params:
  grads: {default: 0.5}
  need_ctx: {default: 0.25}
  bprop: {default: 0.75}
  saved_tensor: {default: 1.5}
  save_for_backward: {default: 2.0}
formula: |
  loss = grads * (dout - ctx)**2 + need_ctx * out * d_dout + bprop * saved_tensor * dout * need_out + save_for_backward * ctx
backward: custom
"""


@pytest.mark.parametrize("backend", ["paddle", "mindspore"])
def test_the_custom_backward_takes_any_input_and_parameter_names(backend, tmp_path):
    pytest.importorskip(backend)
    spec = spec_from_text(CLASH, "clash.yaml")
    source = compile_spec(spec, get(backend))
    assert "Backward" in source  # the custom backward is emitted, not the autograd fallback
    _check(spec, backend, [case(spec, {"N": (5,)}, seed=4), case(spec, {"N": (3,)}, seed=5, none=("need_out",))],
           tmp_path)


def test_a_module_the_python_compiler_refuses_is_never_written(monkeypatch):
    """A duplicate argument parses (ast) and fails only at compile: compile_spec compiles."""
    spec = spec_from_text(CLASH.replace("backward: custom\n", ""), "clash.yaml")
    monkeypatch.setattr(emit, "render_module", lambda *a, **k: "def f(a, a):\n    return a\n")
    with pytest.raises(SyntaxError, match="duplicate argument"):
        compile_spec(spec, get("paddle"))
