"""Attacks a pull request can make, found by a red-team review (2026-12-05), each fixed in the
stage it belongs to: a folder name that declares the modules' encoding, a link at the
docs writer's temporary name, two specs with one class name, a module beside the output
folder that Python imports in its place, and bindings whose tree triples per line.
"""

from __future__ import annotations

import ast
import io
import shutil
import tokenize
from pathlib import Path

import pytest

from losscc import docpages
from tests.cli_util import run
from tests.test_hostile_specs import assert_clean, cli, project, spec_text

ROOT = Path(__file__).resolve().parent.parent


def _proj(base: Path, folder: str = "specs", names=("l1", "mse")) -> Path:
    (base / folder).mkdir(parents=True)
    for n in names:
        shutil.copy(ROOT / "specs" / f"{n}.yaml", base / folder / f"{n}.yaml")
    (base / "pyproject.toml").write_text(f'[tool.losscc]\nspecs = "{folder}"\n')
    return base


def test_a_specs_folder_named_like_an_encoding_declaration_declares_nothing(tmp_path, monkeypatch, capsys):
    """Line 1 shows the spec's path; `coding=unicode_escape` there made Python decode the module
    with that codec, which turns the docstring's escaped quotes back into quotes, so a summary
    ran as code while `check` agreed with the tree."""
    root = _proj(tmp_path, "losses/coding=unicode_escape", names=("l1",))
    (root / "losses/coding=unicode_escape/evil.yaml").write_text(
        "name: evil\nsummary: Squared error x\"\"\";__import__('os').system('echo PWNED');\"\"\"\n"
        "inputs:\n  input: {dtype: float, shape: [\"*S\"]}\n  target: {dtype: float, shape: [\"*S\"]}\n"
        "formula: |\n  loss = (input - target)**2\n")
    rc, out, err = run(monkeypatch, capsys, root, "generate", "-q")
    assert rc == 0, err
    for path in sorted((root / "generated").rglob("*.py")):
        data = path.read_bytes()
        assert tokenize.detect_encoding(io.BytesIO(data).readline)[0] == "utf-8", path
        assert b"coding=unicode_escape" not in data.split(b"\n", 2)[0] + data.split(b"\n", 2)[1]
        calls = [n for n in ast.walk(ast.parse(data)) if isinstance(n, ast.Attribute) and n.attr == "system"]
        assert not calls, path
    first = (root / "generated" / "jax" / "evil.py").read_text().split("\n")[0]
    assert "coding =unicode_escape" in first  # the path still shown, one space apart


def test_docs_never_write_through_a_link_at_a_temporary_name(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / ".mse.md.tmp").symlink_to(victim)
    docpages._atomic(pages / "mse.md", b"the page")
    assert victim.read_text() == "original"
    assert (pages / "mse.md").read_bytes() == b"the page" and not (pages / "mse.md").is_symlink()
    assert sorted(p.name for p in pages.iterdir()) == [".mse.md.tmp", "mse.md"]  # no temporary left


def test_a_docs_folder_linked_out_of_the_project_is_refused(tmp_path, monkeypatch, capsys):
    root = _proj(tmp_path / "proj")
    outside = tmp_path / "outside"
    (outside / "losses").mkdir(parents=True)
    (root / "docs").symlink_to(outside)
    for args in (("docs",), ("docs", "--check")):
        rc, out, err = run(monkeypatch, capsys, root, *args)
        assert rc == 2 and "E172" in err and "docs/losses" in err, (args, out, err)
    assert list((outside / "losses").iterdir()) == []


@pytest.mark.parametrize("names, clash", [(("mse", "mse_"), "mse_"), (("a_b", "a__b"), "a_b")])
def test_two_specs_with_one_class_name_are_refused(tmp_path, monkeypatch, capsys, names, clash):
    """`mse_` also gives the class `Mse`: its import in the package __init__ came after mse's and
    replaced it in the exports and in LOSSES, so get_loss("mse") ran the other formula."""
    root = _proj(tmp_path, names=())
    text = (ROOT / "specs" / "mse.yaml").read_text()
    for n in names:
        (root / "specs" / f"{n}.yaml").write_text(text.replace("name: mse", f"name: {n}", 1))
    for command in ("generate", "check"):
        rc, out, err = run(monkeypatch, capsys, root, command)
        assert rc == 2 and "E162" in err and f"specs/{clash}.yaml" in err, (command, err)
    assert not (root / "generated").exists()


@pytest.mark.parametrize("name", ["generated.py", "generated.pyc", "generated.abi3.so",
                                  "generated.cpython-311-x86_64-linux-gnu.so"])
def test_a_module_beside_the_output_folder_is_reported(tmp_path, monkeypatch, capsys, name):
    """The output folder is a namespace package (no __init__.py), and Python imports a module of
    the same name in the same folder instead of it."""
    root = _proj(tmp_path)
    assert run(monkeypatch, capsys, root, "generate", "-q")[0] == 0
    (root / name).write_bytes(b"print('PWNED')\n")
    for args in (("check",), ("check", "specs/mse.yaml")):
        rc, out, err = run(monkeypatch, capsys, root, *args)
        assert rc == 1 and f"unexpected: {name} (file, imported instead of the output package" in out, (args, out)
    (root / name).unlink()
    assert run(monkeypatch, capsys, root, "check")[0] == 0


@pytest.mark.parametrize("line", ["b{i} = where(b{j} > {i}, b{j} - y, b{j} + y)",
                                  "b{i} = (b{j} - y) if b{j} > {i} else (b{j} + y)",
                                  "b{i} = max(b{j}, y) + min(b{j}, y) * b{j}"])
def test_bindings_that_triple_the_tree_fail_fast(tmp_path, line):
    """Each binding uses the one before three times: the tree triples per line (3**30 nodes at
    line 30) while the DAG grows by a few nodes; the limit 'tree' is checked per binding."""
    lines = ["b0 = x"] + [line.format(i=i, j=i - 1) for i in range(1, 30)] + ["loss = b29"]
    proj = project(tmp_path, {"tree": spec_text("tree", "\n".join(lines))})
    rc, out, err = cli(["generate", "specs", "-o", "out"], proj)
    assert_clean(rc, out, err, 2)
    assert "E104" in err and "limit 'tree'" in err


def test_a_called_spec_is_found_beside_its_caller_from_any_folder(tmp_path, monkeypatch, capsys):
    """The caller's path is shown relative to the root; the callee was looked up relative to the
    working directory, so a run from `deep/` read `deep/specs/mse.yaml`, a file outside the specs."""
    root = _proj(tmp_path, names=("mse",))
    (root / "specs" / "twice.yaml").write_text(
        "name: twice\nsummary: Twice the squared error.\n"
        "inputs:\n  input: {dtype: float, shape: [\"*S\"]}\n  target: {dtype: float, shape: [\"*S\"]}\n"
        "formula: |\n  loss = 2 * mse(input, target, reduction=none)\n")
    assert run(monkeypatch, capsys, root, "generate", "-q")[0] == 0
    decoy = root / "deep" / "specs"
    decoy.mkdir(parents=True)
    (decoy / "mse.yaml").write_text((ROOT / "specs" / "mse.yaml").read_text().replace(
        "(input - target)**2", "-1000 * (input - target)**2"))
    rc, out, err = run(monkeypatch, capsys, root / "deep", "check")
    assert rc == 0, (out, err)
    assert "1000" not in (root / "generated" / "paddle" / "twice.py").read_text()


@pytest.mark.parametrize("formula", ["loss = (\uff58 - y)**2", "loss = (x - y)**2 + \U0001d432", "a = x - y\nloss = x * \u017fum(a**2, axis=N)"])
def test_a_formula_with_letters_python_normalises_is_refused(tmp_path, formula):
    """Python's parser reads identifiers in NFKC: a fullwidth x is x, a bold y is y, a long s is s,
    so a reviewer reads one formula and the compiler builds another."""
    proj = project(tmp_path, {"nfkc": spec_text("nfkc", formula)})
    rc, out, err = cli(["generate", "specs", "-o", "out"], proj)
    assert_clean(rc, out, err, 2)
    assert "E201" in err and "is not ASCII" in err


def test_a_comment_in_a_formula_may_hold_any_letter(tmp_path):
    proj = project(tmp_path, {"ok": spec_text("ok", "loss = (x - y)**2  # \u03c3 and \uff58 in a comment")})
    assert_clean(*cli(["generate", "specs", "-o", "out"], proj), 0)


# a second round (2026-12-05): rewrites that copy their argument into two branches, conditions
# holding a Piecewise, and drop-in class names that rebind the module's own names

@pytest.mark.parametrize("formula", [
    "b0 = log(cosh(x))\n" + "".join(f"b{i} = log(cosh(b{i - 1} + 1))\n" for i in range(1, 8)) + "loss = b7",
    "loss = log(cosh(log(cosh(log(cosh(log(cosh(x))))))))",
    "loss = log(cosh(x - log(cosh(x - log(cosh(x - log(cosh(x - log(cosh(x))))))))))",
    "a = relu(x - 1)\nb = log(cosh(a + 1))\nloss = log(cosh(b + relu(b)))",
])
def test_nested_log_cosh_is_bounded(tmp_path, formula):
    """Each log-cosh rewrite holds its argument in two branches and a condition: the tree grew
    5x a level (4 levels took 282 s, as SymPy rewrote a condition holding a Piecewise into
    ITE and simplified it; other nestings were internal errors, E900)."""
    proj = project(tmp_path, {"lc": spec_text("lc", formula, "x")})
    rc, out, err = cli(["generate", "specs", "-o", "out"], proj)
    assert rc in (0, 2), err
    assert_clean(rc, out, err, rc)
    assert "E900" not in err
    if rc == 2:
        assert "E104" in err and "rewritten_tree" in err


@pytest.mark.parametrize("alias", ["ValueError", "TypeError", "Exception"])
def test_a_dropin_class_may_not_rebind_a_builtin(tmp_path, monkeypatch, capsys, alias):
    root = _proj(tmp_path, names=())
    text = (ROOT / "specs" / "l1.yaml").read_text()
    text = text.split("\ndropin:")[0].rstrip("\n") + f"\ndropin:\n  paddle: {{classes: [{alias}]}}\n"
    (root / "specs" / "l1.yaml").write_text(text)
    rc, out, err = run(monkeypatch, capsys, root, "generate")
    assert rc == 2 and "E128" in err and alias in err, err
