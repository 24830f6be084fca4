"""Attacks a pull request can make, found by a third red-team review (2026-12-05): a linked
output folder beside which a module is judged under the link's target name, extension
modules of other interpreters beside the output, file names in `check --diff`'s patch
headers, linked docs data and image folders, a forged built-in curve, cases that hold the
reference evaluator for an hour, and spec names whose class is a builtin."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from losscc.errors import SpecError
from tests.cli_util import run
from tests.codegen_util import spec_of
from tests.test_hostile_pr import _proj

ROOT = Path(__file__).resolve().parent.parent


def test_a_linked_output_folder_is_refused(tmp_path, monkeypatch, capsys):
    """`generated -> gen_real` with a `generated.py` beside it: the sibling check looked for
    `gen_real.py`, Python imports `generated.py`, and `check` exited 0."""
    root = _proj(tmp_path)
    assert run(monkeypatch, capsys, root, "generate", "-q")[0] == 0
    (root / "generated").rename(root / "gen_real")
    (root / "generated").symlink_to("gen_real", target_is_directory=True)
    (root / "generated.py").write_text("print('PWNED')\n")
    for args in (("check",), ("generate",), ("check", "specs/mse.yaml")):
        rc, out, err = run(monkeypatch, capsys, root, *args)
        assert rc == 2 and "E172" in err and "generated is a symbolic link" in err, (args, out, err)
    assert (root / "generated.py").read_text() == "print('PWNED')\n"
    (root / "pyproject.toml").write_text('[tool.losscc]\nspecs = "specs"\noutput = "gen_real"\n')
    (root / "generated.py").unlink()
    assert run(monkeypatch, capsys, root, "check")[0] == 0  # the real folder, named


@pytest.mark.parametrize("name", ["generated.cpython-312-x86_64-linux-gnu.so", "generated.cp311-win_amd64.pyd",
                                  "generated.cpython-311d-aarch64-linux-gnu.so", "generated.pyw"])
def test_a_module_of_another_interpreter_beside_the_output_is_reported(tmp_path, monkeypatch, capsys, name):
    root = _proj(tmp_path)
    assert run(monkeypatch, capsys, root, "generate", "-q")[0] == 0
    (root / name).write_bytes(b"\x7fELF")
    (root / "generated.md").write_text("notes\n")  # not importable: not reported
    rc, out, err = run(monkeypatch, capsys, root, "check")
    assert rc == 1 and f"unexpected: {name} (file, imported instead of the output package" in out, out
    assert "generated.md" not in out


def test_check_diff_escapes_file_names_in_patch_headers(tmp_path, monkeypatch, capsys):
    root = _proj(tmp_path)
    assert run(monkeypatch, capsys, root, "generate", "-q")[0] == 0
    name = "ev\x1b[31mRED\x1b[0m\n@@ -0,0 +1 @@\n+INJECTED LINE.py"
    shutil.copy(root / "generated" / "jax" / "mse.py", root / "generated" / "jax" / name)
    rc, out, err = run(monkeypatch, capsys, root, "check", "--diff")
    assert rc == 1
    assert "\x1b" not in out + err and "\n+INJECTED LINE.py" not in out
    assert "ev\\x1b[31mRED" in out


@pytest.mark.parametrize("linked", ["data", "img"])
def test_docs_check_does_not_read_through_linked_folders(tmp_path, monkeypatch, capsys, linked):
    root = _proj(tmp_path / "proj", names=("mse",))
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "docs" / "losses").mkdir(parents=True)
    (root / "docs" / "losses" / linked).symlink_to(outside, target_is_directory=True)
    for args in (("docs", "--check"), ("docs",)):
        rc, out, err = run(monkeypatch, capsys, root, *args)
        assert rc == 2 and "E173" in err and f"docs/losses/{linked}" in err, (args, out, err)
    assert list(outside.iterdir()) == []


def test_committed_record_text_is_one_cell():
    from losscc.docpages import _extreme_rows
    spec = spec_of("name: t\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N]}\nformula: |\n  loss = x**2\n")
    rows = _extreme_rows(spec, [{"spec": "t", "backend": "paddle\n\n## Verify\n<script>x</script>", "mode": "a|b",
                                 "kind": "k", "passed": 1, "total": 2}])
    assert rows == [r"| paddle ## Verify &lt;script>x&lt;/script> | a\|b | k | 1 / 2 |"]


BIG = """
name: big_case
summary: s.
inputs:
  x: {dtype: float, shape: [N]}
  y: {dtype: float, shape: [N]}
formula: |
  loss = log(cosh(x - y))
cases:
  - id: huge
    inputs: {x: %s, y: %s}
    expected: {}
"""


def _big_spec(tmp_path, n: int, magnitude: float):
    from losscc.spec import load_spec
    xs = json.dumps([magnitude - k for k in range(n)])
    ys = json.dumps([0.5 * k for k in range(n)])
    path = tmp_path / "big_case.yaml"
    path.write_text(BIG % (xs, ys))
    return load_spec(path)


def test_a_costly_case_gives_way_to_a_random_one_in_the_plot(tmp_path):
    """120 entries near 1000 need 474 digits; the plot's 123 evaluations of them took minutes."""
    from losscc.docplots import plot_data
    spec = _big_spec(tmp_path, 120, 1000.0)
    t = time.monotonic()
    data = plot_data(spec, tmp_path)
    assert time.monotonic() - t < 60
    assert data["case"] != "huge"
    small = _big_spec(tmp_path, 3, 1.0)
    assert plot_data(small, tmp_path)["case"] == "huge"  # an ordinary case is still the one plotted


def test_a_costly_case_is_a_clear_error_in_verify(tmp_path):
    from losscc import verify
    from losscc.cases import spec_cases
    from losscc.parse import build_program
    spec = _big_spec(tmp_path, 120, 1000.0)
    (case,) = spec_cases(spec)
    t = time.monotonic()
    with pytest.raises(SpecError) as info:
        verify.expectations(build_program(spec), case)
    assert time.monotonic() - t < 20
    (d,) = info.value.diagnostics
    assert d.code == "E181" and "case 'huge'" in d.message and "limit 'reference_work'" in d.message


PAIRS = """
    name: pairs
    summary: s.
    inputs:
      x: {dtype: float, shape: [N, D]}
    formula: |
      loss = logsumexp(sum(x * rename(x, N=M), axis=D), axis=M)
"""


def test_the_reference_work_counts_every_axis_of_a_pairwise_loss():
    from losscc.parse import build_program
    from losscc.reference import reference_work
    prog = build_program(spec_of(PAIRS))
    x = {"x": np.ones((50, 2))}
    assert reference_work(prog, x, {}, 1) >= 50 * 50 * 2 * (40 * 40 // 40)  # the product's N x M x D


@pytest.mark.parametrize("name,cls", [("value_error", "ValueError"), ("type_error", "TypeError"), ("f", "F"),
                                      ("nn", None), ("zero_division_error", "ZeroDivisionError")])
def test_a_spec_whose_class_is_a_builtin_or_an_import_is_refused(name, cls):
    with pytest.raises(SpecError) as info:
        spec_of(f"name: {name}\nsummary: s.\ninputs:\n  x: {{dtype: float, shape: [N]}}\nformula: |\n  loss = x**2\n")
    (d,) = info.value.diagnostics
    assert d.code == "E120", d.format()
    if cls:
        assert f"gives the class '{cls}'" in d.message


def test_the_gradient_condition_is_held_to_its_work_limit(monkeypatch):
    """The Hessian of 24 entries of a pairwise loss over 24 x 24 pairs is 1200 evaluations of
    576 elements: it gives way to probes, and with a smaller limit to no allowance at all."""
    from losscc import reference
    from losscc.parse import build_program
    prog = build_program(spec_of(PAIRS))
    x = {"x": np.random.default_rng(0).normal(size=(24, 1))}
    calls = []
    real = reference.Evaluator.run
    monkeypatch.setattr(reference.Evaluator, "run", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    dps = reference.digits_for(x, {}) + 30
    monkeypatch.setattr(reference, "CONDITION_WORK", 4 * 24 * reference._elements(prog, x) * (dps * dps // 40))
    got = reference.gradient_condition(prog, x, {}, {}, ["x"])
    assert len(calls) == 1 + 4 * 24 and np.max(got["x"]) > 0  # one probe, not the Hessian's 1200 runs
    calls.clear()
    monkeypatch.setattr(reference, "CONDITION_WORK", 10)
    got = reference.gradient_condition(prog, x, {}, {}, ["x"])
    assert calls == [] and not np.any(got["x"])
