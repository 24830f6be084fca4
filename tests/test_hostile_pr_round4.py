"""Attacks a pull request can make, found by a fourth red-team review (2026-12-05): a long
formula that holds `docs --check` for minutes at a small case, fixed axes whose random case
is too large to hold, a folder too large for the sibling scan, an output path through a
link and back (`lnk/../generated`), and nesting deep enough to exhaust Python's stack."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from losscc import docplots, limits, outtree
from losscc.parse import build_program
from losscc.reference import reference_work
from tests.cli_util import run
from tests.codegen_util import spec_of
from tests.test_hostile_pr import _proj

HEAD = "name: t\nsummary: s.\ninputs:\n"


def _chain(links: int) -> str:
    """A pairwise loss over N, M and D whose formula is `links` bindings of four functions
    each (side by side: the limit 'tree_depth' refuses them nested)."""
    lines = ["  t0 = a - b"] + [f"  t{k} = t{k - 1} + log(1 + exp(sin(a * {k} - b) * 0.5))" for k in range(1, links + 1)]
    return (HEAD + "  a: {dtype: float, shape: [N, D]}\n  b: {dtype: float, shape: [M, D]}\n"
            "formula: |\n" + "\n".join(lines) + f"\n  loss = sum(t{links}, axis=D)\nreduction: sum\n")


def test_the_reference_work_counts_the_formula_not_only_the_layout():
    """The work was elements x evaluations x digits**2, whatever the formula: a chain of 30
    bindings counted as one subtraction, and `docs --check` took its 16 x 16 x 8 case (123
    evaluations) for minutes."""
    rng = np.random.default_rng(0)
    inputs = {"a": rng.normal(size=(16, 8)), "b": rng.normal(size=(16, 8))}
    short, long = (reference_work(build_program(spec_of(_chain(k))), inputs, {}, 123) for k in (1, 30))
    assert long > 25 * short
    assert long > docplots.PLOT_WORK  # the plot does not take this case


def test_the_plot_leaves_a_heavy_case_for_the_random_one_and_a_heavy_random_case_out(tmp_path):
    rng = np.random.default_rng(0)
    a, b = (json.dumps(rng.normal(size=(16, 8)).round(3).tolist()) for _ in range(2))
    spec = spec_of(_chain(30) + f"cases:\n  - id: big\n    inputs: {{a: {a}, b: {b}}}\n    expected: {{sum: 0.0}}\n")
    data = docplots.plot_data(spec, tmp_path)
    assert data is not None and data["case"] == "random0"
    # fixed axes of 16 * 16 * 16 make the random case itself too heavy for a plot: none
    heavy = spec_of(HEAD + "  a: {dtype: float, shape: [A=16, B=16]}\n  b: {dtype: float, shape: [C=16]}\n"
                    "formula: |\n" + "\n".join(f"  t{k} = sin(exp({'a - b' if k == 0 else f't{k - 1}'}))"
                                                 for k in range(12)) + "\n  loss = t11\nreduction: sum\n")
    assert docplots.plot_data(heavy, tmp_path) is None


def test_fixed_axes_that_multiply_past_the_limit_are_refused(tmp_path, monkeypatch, capsys):
    """Four fixed axes of 64 made verify's random case 16.7M elements per node (a
    MemoryError, exit 1, in `docs --check`)."""
    root = _proj(tmp_path, names=())
    (root / "specs" / "t.yaml").write_text(
        HEAD + "  a: {dtype: float, shape: [A=64, B=64]}\n  b: {dtype: float, shape: [C=64, D=64]}\n"
        "formula: |\n  loss = a * b\n")
    rc, out, err = run(monkeypatch, capsys, root, "generate")
    assert rc == 2 and "E104" in err and "'fixed_elements'" in err and "t.yaml:5:" in err, err
    assert not (root / "generated").exists()


def test_bindings_nested_past_the_limit_are_refused_not_an_internal_error(tmp_path, monkeypatch, capsys):
    """62 bindings of sin(exp(sin(exp(sin(...))))) hit Python's recursion limit in the
    lowering (E900, exit 3), 60 in `explain`."""
    root = _proj(tmp_path, names=())
    lines = ["  b0 = x"] + [f"  b{k} = sin(exp(sin(exp(sin(b{k - 1})))))" for k in range(1, 62)]
    (root / "specs" / "t.yaml").write_text(HEAD + "  x: {dtype: float, shape: [N]}\nformula: |\n"
                                              + "\n".join(lines) + "\n  loss = b61\n")
    for args in (("generate",), ("explain", "specs/t.yaml"), ("verify", "specs/t.yaml")):
        rc, out, err = run(monkeypatch, capsys, root, *args)
        assert rc == 2 and "E104" in err and "'tree_depth'" in err and "Traceback" not in err, (args, err)


def test_deeply_nested_committed_json_is_a_diagnostic(tmp_path, monkeypatch, capsys):
    """`docs --check` read docs/verify.json with json.loads and caught only ValueError: a
    file nested 200,000 deep was a RecursionError, exit 3."""
    root = _proj(tmp_path, names=("mse",))
    (root / "docs").mkdir()
    (root / "docs" / "verify.json").write_text("[" * 200_000 + "]" * 200_000)
    rc, out, err = run(monkeypatch, capsys, root, "docs", "--check")
    assert rc == 2 and "E175" in err and "json_depth" in err, err


def test_a_folder_too_large_for_the_sibling_scan_fails_closed(tmp_path, monkeypatch, capsys):
    """With more entries beside the output folder than the scan reads (100,000; 3 here), a
    `generated.py` among the unread ones was missed and `check` exited 0."""
    root = _proj(tmp_path)
    assert run(monkeypatch, capsys, root, "generate", "-q")[0] == 0
    assert run(monkeypatch, capsys, root, "check")[0] == 0
    monkeypatch.setattr(outtree, "_SIBLINGS_READ", 3)
    for k in range(5):
        (root / f"note{k}.txt").write_text("x\n")
    rc, out, err = run(monkeypatch, capsys, root, "check")
    assert rc == 1 and "more than 3 entries" in out, out


def test_an_output_path_through_a_link_and_back_is_refused(tmp_path, monkeypatch, capsys):
    """`-o lnk/../generated`: the normalised text names no link, but the path passes through
    `lnk`, and the kernel resolves `lnk/..` to the link target's parent."""
    root = _proj(tmp_path / "proj")
    (root / "elsewhere" / "deep").mkdir(parents=True)
    (root / "lnk").symlink_to("elsewhere/deep", target_is_directory=True)
    rc, out, err = run(monkeypatch, capsys, root, "generate", "-o", "lnk/../generated")
    assert rc == 2 and "E172" in err and "lnk is a symbolic link" in err, err
    assert not (root / "generated").exists() and not (root / "elsewhere" / "generated").exists()
    assert run(monkeypatch, capsys, root, "generate", "-q", "-o", "elsewhere/../generated")[0] == 0


def test_the_limits_table_lists_every_limit():
    text = (Path(__file__).resolve().parent.parent / "docs" / "errors.md").read_text()
    for name in ("tree_depth", "fixed_elements", "reference_work"):
        assert f"| `{name}` | {getattr(limits, 'MAX_' + name.upper())} |" in text


def test_docs_check_reports_files_of_any_type_in_the_pages_folder(tmp_path, monkeypatch, capsys):
    """Only .md, data/*.json and img/*.png were compared: an .html page, an .svg image or a
    subfolder that a site generator publishes beside them passed `docs --check`."""
    root = _proj(tmp_path, names=())
    (root / "specs" / "t.yaml").write_text(HEAD + "  x: {dtype: float, shape: [N]}\nformula: |\n  loss = x**2\n")
    assert run(monkeypatch, capsys, root, "docs")[0] == 0
    assert run(monkeypatch, capsys, root, "docs", "--check")[0] == 0
    pages = root / "docs" / "losses"
    (pages / "evil.html").write_text("<script>alert(1)</script>\n")
    (pages / "img" / "x.svg").write_text("<svg/>\n")
    (pages / "sub").mkdir()
    (pages / "sub" / "a.md").write_text("# a\n")
    rc, out, err = run(monkeypatch, capsys, root, "docs", "--check")
    assert rc == 1
    for name in ("docs/losses/evil.html", "docs/losses/img/x.svg", "docs/losses/sub/"):
        assert f"not written by losscc docs: {name}" in out + err, out + err
    assert run(monkeypatch, capsys, root, "docs")[0] == 0  # the writer removes the files, not the folder
    assert not (pages / "evil.html").exists() and (pages / "sub" / "a.md").exists()


# --------------------------------------------------------------- round 5 (2026-12-06)

def test_periodic_functions_of_numbers_beyond_every_float_end_at_once(tmp_path, monkeypatch, capsys):
    """sin(exp(exp(exp(x)))) made mpmath reduce an argument of 10**(2*10**8) modulo pi: pi to
    hundreds of millions of bits, verify and `docs --check` ran for hours.  Past 2**1100 the
    reference takes exp's, sin's and pow's values at infinity, as a float argument there is."""
    import subprocess
    import sys
    root = _proj(tmp_path, names=())
    (root / "specs" / "t.yaml").write_text(HEAD + "  x: {dtype: float, shape: [N]}\nformula: |\n"
                                           "  loss = sin(exp(exp(exp(x)))) + cos(1.5**exp(exp(x)))\n"
                                           "cases:\n  - id: big\n    inputs: {x: [20.0]}\n    expected: {sum: 0.0}\n")
    code = ("import resource, sys\nresource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
            "from losscc.docplots import plot_data\nfrom losscc.spec import load_spec\nfrom pathlib import Path\n"
            "print(plot_data(load_spec('specs/t.yaml'), Path('.'))['loss'][:1])\n")
    got = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr[-2000:]
    from losscc.functions import mp_exp
    import mpmath
    assert mp_exp(mpmath.mpf(10) ** 400) == mpmath.inf and mp_exp(-mpmath.mpf(10) ** 400) == 0


def test_an_evaluation_past_its_seconds_is_e181_naming_the_spec(tmp_path, monkeypatch, capsys):
    """erf at hundreds of digits costs 80 times what the work estimate counts: a deadline is
    the backstop, and its E181 names the spec file (a drawn case named neither)."""
    from losscc import limits as lim
    monkeypatch.setattr(lim, "MAX_REFERENCE_SECONDS", 0)
    root = _proj(tmp_path, names=())
    (root / "specs" / "t.yaml").write_text(HEAD + "  x: {dtype: float, shape: [N]}\nformula: |\n  loss = erf(x)\n")
    rc, out, err = run(monkeypatch, capsys, root, "verify", "--backend", "jax", "--dtype", "float64",
                       "--mode", "eager", "specs/t.yaml")
    assert rc == 2 and "specs/t.yaml: error: random case 'random0'" in err and "'reference_seconds'" in err, err


def test_a_selection_the_loss_does_not_feel_hides_no_gradient():
    """w * max(x, x + 1e-16 x sin(1e12 x)) at w = 0: its sides are a near tie everywhere and
    their slopes differ, so every entry was a kink and a wrong gradient of sin passed.  The
    loss does not feel that selection at w = 0: no kink; at w = 1 it does."""
    from losscc import verify
    spec = spec_of(HEAD + "  x: {dtype: float, shape: [N]}\nparams:\n  w: {default: 0.0}\nformula: |\n"
                   "  loss = sin(x) + w * max(x, x + 1.0e-16 * x * sin(1.0e12 * x))\n")
    prog = build_program(spec)
    x = np.array([0.3, -0.7, 1.1])
    for w, want in ((0.0, False), (1.0, True)):
        case = verify.CaseData("c", "test", {"x": x}, {"w": w}, from_reference=True)
        kinks = verify.expectations(prog, case)[2]["x"]
        assert list(kinks) == [want] * 3, (w, kinks)
