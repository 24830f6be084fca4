"""losscc docs: reference pages with LaTeX and a plot, the data check, determinism."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from losscc.docpages import DOCS_DIR, build_docs, latex, page, stale, write_docs
from losscc.docplots import sweep_interval
from losscc.spec import load_spec
from tests.backend_util import AVAILABLE

ROOT = Path(__file__).resolve().parent.parent
CHEAP = ("huber", "log_cosh")  # specs whose plot data is quick to compute


def _specs(names=CHEAP):
    return [load_spec(ROOT / "specs" / f"{n}.yaml", f"specs/{n}.yaml") for n in names]


@pytest.fixture(scope="module")
def docs():
    return build_docs(_specs(), ROOT)


def test_page_has_latex_signature_parameters_and_plot(docs):
    text = docs.texts["huber.md"]
    assert text.count("$$") >= 4  # as written and as computed
    assert r"\min" in text  # the rewritten form (linear-tail) differs from the Piecewise as written
    assert r"\begin{cases}" in text
    assert "def huber(input, target" in text and "class Huber(" in text
    assert "| `delta` | float | `1.0` | >= 0 |" in text
    assert "![huber: loss and gradient](img/huber.png)" in text
    assert "`paddle.nn.SmoothL1Loss`" in text


def test_committed_pages_exist_for_every_spec_with_their_images():
    for spec_file in sorted((ROOT / "specs").glob("*.yaml")):
        page_file = ROOT / DOCS_DIR / f"{spec_file.stem}.md"
        assert page_file.is_file(), page_file
        text = page_file.read_text()
        assert "$$" in text
        assert f"](img/{spec_file.stem}.png)" in text
        png = ROOT / DOCS_DIR / "img" / f"{spec_file.stem}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_data_is_the_reference_loss_and_gradient(docs):
    data = json.loads(docs.texts["data/huber.json"])
    # huber case paper_values: input [x, 0.5, 3], target [0, 0, 1], delta 1: the sum is
    # huber(x) + 0.125 + 1.5; the gradient in x is clip(x, -1, 1)
    for x, loss, grad in zip(data["x"], data["loss"], data["gradient"]):
        h = 0.5 * x * x if abs(x) < 1 else abs(x) - 0.5
        assert loss == pytest.approx(h + 1.625, rel=1e-10)
        assert grad == pytest.approx(max(-1.0, min(1.0, x)), abs=1e-9)
    assert data["x"][0] == -3.0 and data["x"][-1] == 3.0


def test_sweep_stays_inside_the_domain():
    dice = load_spec(ROOT / "specs" / "dice.yaml", "specs/dice.yaml")
    probs = dice.input("probs")
    a, b = sweep_interval(probs, 0.5)
    lo, hi = probs.domain.lo, probs.domain.hi
    assert lo < a < 0.01 and 0.99 < b < hi


def test_output_is_deterministic(docs):
    again = build_docs(_specs(), ROOT)
    assert again.texts == docs.texts
    assert page(_specs(("huber",))[0], None, []) == page(_specs(("huber",))[0], None, [])


def test_check_detects_stale_missing_and_foreign_files(docs, tmp_path):
    out = tmp_path / "losses"
    changed = write_docs(docs, out)
    assert "img/huber.png" in changed and (out / "img" / "huber.png").is_file()
    assert stale(docs, out) == []
    png = (out / "img" / "huber.png").read_bytes()
    # rewriting with unchanged data leaves the images alone; a fresh draw gives the same bytes
    assert write_docs(docs, out) == []
    (out / "img" / "huber.png").unlink()
    write_docs(docs, out)
    assert (out / "img" / "huber.png").read_bytes() == png
    page_file = out / "huber.md"
    page_file.write_text(page_file.read_text().replace("Huber", "Hubert"))
    (out / "data" / "log_cosh.json").unlink()
    (out / "extra.md").write_text("hand-written\n")
    assert stale(docs, out) == [("data/log_cosh.json", "missing"), ("huber.md", "out of date"),
                                ("extra.md", "not written by losscc docs")]
    write_docs(docs, out)
    assert stale(docs, out) == [] and not (out / "extra.md").exists()


def test_latex_of_the_language_nodes():
    from losscc.pipeline import prepare

    spec = load_spec(ROOT / "specs" / "cross_entropy.yaml", "specs/cross_entropy.yaml")
    text = latex(prepare(spec).prog.loss)
    # the language's names, reductions by their axis, names with underscores whole
    assert r"\operatorname{log\_softmax}_{C}\left(input\right)_{[target]}" in text
    assert r"\mathit{label\_smoothing}" in text and "Reduce" not in text and "Gather" not in text


def _cli(*args, cwd=ROOT):
    """Run the CLI in `cwd`; exit status 99 if it imported matplotlib."""
    script = ("import sys\nfrom losscc.cli import main\nrc = main(sys.argv[1:])\n"
              "sys.exit(99 if 'matplotlib' in sys.modules else rc)")
    return subprocess.run([sys.executable, "-c", script, *args],
                          cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_cli_check_exits_1_on_a_stale_project_without_matplotlib(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "huber.yaml").write_text((ROOT / "specs" / "huber.yaml").read_text()
                                                   .replace("references:\n  - file: tests/data/conformance/huber.json\n", ""))
    (tmp_path / "pyproject.toml").write_text('[tool.losscc]\nspecs = "specs"\n')
    r = _cli("docs", "--check", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert _cli("generate", "-q", cwd=tmp_path).returncode == 0  # nor do generate and check import it
    assert _cli("check", "-q", cwd=tmp_path).returncode == 0
    assert "missing: docs/losses/huber.md" in r.stdout and "missing: docs/losses/img/huber.png" in r.stdout


def test_cli_bad_spec_exits_2(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "bad.yaml").write_text("name: bad\nsummary: [\n")
    (tmp_path / "pyproject.toml").write_text('[tool.losscc]\nspecs = "specs"\n')
    r = _cli("docs", "--check", cwd=tmp_path)
    assert r.returncode == 2 and "specs/bad.yaml:" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "docs").exists()


def test_index_lists_builtins_and_the_specs_a_spec_calls():
    import dataclasses

    from losscc.docpages import index
    from losscc.specmodel import Binding

    huber, log_cosh = _specs()
    composed = dataclasses.replace(log_cosh, name="combo", bindings=(
        Binding("loss", "huber(input, target, reduction=none) + 0.5 * log(cosh(input - target))", log_cosh.bindings[0].loc),))
    text = index([composed, huber])
    row = next(line for line in text.splitlines() if line.startswith("| [combo]"))
    assert row.endswith("| [huber](huber.md) |")
    row = next(line for line in text.splitlines() if line.startswith("| [huber]"))
    assert "`paddle.nn.SmoothL1Loss`" in row and row.endswith("| - |")


def test_named_specs_leave_the_other_pages_alone(docs, tmp_path):
    out = tmp_path / "losses"
    write_docs(docs, out)
    one = build_docs(_specs(("huber",)), ROOT, full=False)
    assert "index.md" not in one.texts and stale(one, out) == []
    assert write_docs(one, out) == [] and (out / "log_cosh.md").is_file() and (out / "index.md").is_file()


def test_bad_stability_report_exits_2(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "huber.yaml").write_text((ROOT / "specs" / "huber.yaml").read_text()
                                                   .replace("references:\n  - file: tests/data/conformance/huber.json\n", ""))
    (tmp_path / "pyproject.toml").write_text('[tool.losscc]\nspecs = "specs"\n')
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "stability.json").write_text('{"records": [\n')
    r = _cli("docs", "--check", cwd=tmp_path)
    assert r.returncode == 2 and "docs/stability.json:2:" in r.stderr and "[E175]" in r.stderr, r.stderr


def test_page_shows_the_recorded_verify_rows_and_a_changed_spec():

    huber = _specs(("huber",))[0]
    row = {"backend": "paddle", "dtype": "float32", "mode": "graph", "cases": 7, "max_rel_value": 1.25e-7,
           "max_rel_grad": 3e-8, "verdict": "pass"}
    rec = {"date": "2026-12-03", "commit": "abc1234", "spec_sha256": huber.source_sha256,
           "verify": [row], "extreme": [dict(row, verdict="FAIL")]}
    text = page(huber, None, [], {"huber": rec})
    assert "## Verify" in text and "on 2026-12-03 at commit `abc1234`" in text
    assert "| paddle | float32 | graph | 7 | 1.2e-07 | 3.0e-08 | pass |" in text
    assert "| paddle | float32 | graph | 7 | 1.2e-07 | 3.0e-08 | FAIL |" in text
    assert "has changed since" not in text
    assert "has changed since" in page(huber, None, [], {"huber": dict(rec, spec_sha256="0" * 64)})
    assert "Not recorded in `docs/verify.json`" in page(huber, None, [], {})


def test_bad_verify_results_exit_2(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "huber.yaml").write_text((ROOT / "specs" / "huber.yaml").read_text()
                                                   .replace("references:\n  - file: tests/data/conformance/huber.json\n", ""))
    (tmp_path / "pyproject.toml").write_text('[tool.losscc]\nspecs = "specs"\n')
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "verify.json").write_text('{"specs": {\n  "huber": [\n')
    r = _cli("docs", "--check", cwd=tmp_path)
    assert r.returncode == 2 and "docs/verify.json:3:" in r.stderr and "[E175]" in r.stderr, r.stderr


def test_builtin_curve_is_carried_only_for_the_same_sweep(docs):
    from losscc.docbuiltin import carried

    huber, log_cosh = _specs()
    data = json.loads(docs.texts["data/huber.json"])
    # built without frameworks: the committed file's built-in series is carried over
    assert data["builtin"]["call"] == "paddle.nn.functional.smooth_l1_loss"
    data.pop("builtin")
    series = {"call": "paddle.nn.functional.smooth_l1_loss", "loss": data["loss"], "gradient": data["gradient"]}
    assert carried(data, dict(data, builtin=series), huber) == series
    assert carried(data, dict(data, x=data["x"][::-1], builtin=series), huber) is None  # another sweep
    assert carried(data, dict(data, builtin=dict(series, loss=data["loss"][:3])), huber) is None
    assert carried(data, data, huber) is None
    # a data file cannot name another built-in, add fields, put text in the series, or give
    # a curve to a spec that stands in for none (its page would print the name)
    forged = dict(series, call="torch.nn.CauchyLoss\n\n<script>alert(1)</script>")
    assert carried(data, dict(data, builtin=forged), huber) is None
    assert carried(data, dict(data, builtin=dict(series, note="x")), huber) is None
    assert carried(data, dict(data, builtin=dict(series, loss=["1"] * len(data["x"]))), huber) is None
    other = json.loads(docs.texts["data/log_cosh.json"])
    assert "builtin" not in other
    assert carried(other, dict(other, builtin=dict(series, loss=other["loss"], gradient=other["gradient"])),
                   log_cosh) is None


@pytest.mark.skipif("paddle" not in AVAILABLE, reason="Paddle is not installed")
def test_builtin_curve_is_paddles_function_beside_the_reference():
    """Paddle's smooth_l1_loss is Huber: its curve and the reference's agree; a spec without
    a Paddle function gets none."""
    specs = _specs()
    got = build_docs(specs, ROOT, full=False, frameworks=True)
    data = json.loads(got.texts["data/huber.json"])
    b = data["builtin"]
    assert b["call"] == "paddle.nn.functional.smooth_l1_loss"
    assert b["loss"] == pytest.approx(data["loss"], rel=1e-12)
    assert b["gradient"] == pytest.approx(data["gradient"], rel=1e-12, abs=1e-12)
    assert "builtin" not in json.loads(got.texts["data/log_cosh.json"])
