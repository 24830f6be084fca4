"""``losscc new``: the starter spec generates and verifies, ``--from`` copies a catalogue
spec under a new name, and bad requests exit 2 without writing anything."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from losscc import scaffold
from losscc.errors import SpecError
from losscc.resources import catalogue
from losscc.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent


def cli(*args, cwd: Path, timeout: int = 120):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "losscc", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def tree(d: Path) -> dict:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_starter_generates_and_verifies(tmp_path):
    r = cli("new", "my_loss", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "specs" / "my_loss.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.count("#") >= 8  # a commented starter
    assert load_spec(path).name == "my_loss"
    r = cli("generate", "specs", "-o", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "paddle" / "my_loss.py").is_file()
    assert (tmp_path / "out" / "mindspore" / "my_loss.py").is_file()
    r = cli("check", "specs", "-o", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("verify", "specs/my_loss.yaml", "--backend", "paddle", "--dtype", "float64", "--mode", "graph",
            cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "my_loss  paddle   float64  graph" in r.stdout and "1 passed, 0 failed" in r.stdout
    # not a terminal: one progress line per spec, and none of Paddle's known warnings
    # (to_static's "Tensor do not have 'place' interface", "No ccache found", glog lines)
    assert re.fullmatch(r"verify: my_loss: 1 passed \(\d+s\)\n", r.stderr), r.stderr


def test_verify_filters_framework_noise_only_inside_its_runs():
    import warnings

    from losscc import verify
    from losscc.backends import get
    from losscc.spec import spec_from_text

    quiet = get("paddle").quiet_warnings
    spec = spec_from_text(scaffold.starter("quiet_demo"), "quiet_demo.yaml")
    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        rows = verify.run([spec], ("paddle",), ("float64",), ("graph",), n_random=1)
        assert rows and all(r.ok for r in rows)
        assert not [w for w in seen if any(q in str(w.message) for q in quiet)]
        warnings.warn(quiet[0] + ", try not to use it.", UserWarning, stacklevel=1)  # the user's own
    assert [str(w.message) for w in seen][-1].startswith(quiet[0])
    assert warnings.filters == before


def test_starter_commented_case_is_right():
    # the example case in the starter's comments holds the starter's true value
    from losscc.cases import spec_cases
    from losscc.parse import build_program
    from losscc.reference import reference
    from losscc.spec import spec_from_text

    text = scaffold.starter("demo").replace("# cases:", "cases:").replace("#   ", "    ")
    spec = spec_from_text(text, "demo.yaml")
    (case,) = spec_cases(spec)
    ref = reference(build_program(spec), case.inputs, case.params, case.learnable, [])
    assert abs(float(ref.values["sum"]) - case.expected["sum"]) < 1e-12


def test_from_catalogue_renames_and_drops_references(tmp_path):
    path = scaffold.new_spec("my_huber", tmp_path / "losses", "huber")
    assert path == tmp_path / "losses" / "my_huber.yaml"
    spec = load_spec(path)
    original = load_spec(ROOT / "specs" / "huber.yaml")
    assert original.references and not spec.references  # the catalogue's case files are not shipped
    assert spec.name == "my_huber"
    assert [(b.name, b.text) for b in spec.bindings] == [(b.name, b.text) for b in original.bindings]
    assert [c.expected for c in spec.cases] == [c.expected for c in original.cases]


@pytest.mark.parametrize("name", sorted(catalogue()))
def test_every_catalogue_spec_copies(tmp_path, name):
    spec = load_spec(scaffold.new_spec("copy", tmp_path, name))
    assert spec.name == "copy" and not spec.references


def test_catalogue_is_the_specs_folder():
    assert sorted(catalogue()) == sorted(p.stem for p in (ROOT / "specs").glob("*.yaml"))


@pytest.mark.parametrize("args, code, text", [
    (["new", "focal"], "E196", "exists already"),
    (["new", "class"], "E195", "Python keyword"),
    (["new", "Bad-Name"], "E195", "snake_case"),
    (["new", "self"], "E195", "reserved"),
    (["new", "sum"], "E195", "formula function"),
    (["new", "x", "--from", "focl"], "E197", "did you mean 'focal'"),
    (["new", "x", "--from", "no_such_thing_at_all"], "E197",
     "the catalogue has: " + ", ".join(sorted(p.stem for p in (ROOT / "specs").glob("*.yaml"))[:3])),
])
def test_bad_requests_exit_2_and_write_nothing(tmp_path, args, code, text):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "focal.yaml").write_text("name: focal  # the user's own\n", encoding="utf-8")
    before = tree(tmp_path)
    r = cli(*args, cwd=tmp_path)
    assert r.returncode == 2
    assert f"[{code}]" in r.stderr and text in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert tree(tmp_path) == before


def test_refuses_symlinks(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    (project / "specs").symlink_to(outside, target_is_directory=True)
    with pytest.raises(SpecError) as exc:
        scaffold.new_spec("mine", project / "specs", None)
    assert exc.value.diagnostics[0].code == "E198"
    (project / "specs").unlink()
    (project / "specs").mkdir()
    (project / "specs" / "mine.yaml").symlink_to(outside / "target.yaml")  # dangling
    with pytest.raises(SpecError) as exc:
        scaffold.new_spec("mine", project / "specs", None)
    assert exc.value.diagnostics[0].code == "E196"
    assert list(outside.iterdir()) == []


def test_write_is_atomic_and_leaves_no_temporary(tmp_path):
    path = scaffold.new_spec("mine", tmp_path, None)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.yaml"]
    assert path.read_text(encoding="utf-8") == scaffold.starter("mine")


def test_unwritable_specs_folder_is_a_clean_error(tmp_path):
    (tmp_path / "specs").write_text("a file where the folder should be\n", encoding="utf-8")
    before = tree(tmp_path)
    r = cli("new", "mine", cwd=tmp_path)
    assert r.returncode == 2 and "[E198]" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert tree(tmp_path) == before


def test_links_above_the_current_folder_are_the_users_business(tmp_path, monkeypatch):
    real = tmp_path / "real"
    (real / "project").mkdir(parents=True)
    (tmp_path / "home").symlink_to(real, target_is_directory=True)  # like macOS /tmp -> /private/tmp
    project = tmp_path / "home" / "project"
    monkeypatch.chdir(project)
    monkeypatch.setenv("PWD", str(project))  # as a shell that cd'ed through the link sets it
    path = scaffold.new_spec("mine", project / "specs", None)
    assert (real / "project" / "specs" / "mine.yaml").is_file() and path.name == "mine.yaml"
    (real / "project" / "linked").symlink_to(real, target_is_directory=True)
    with pytest.raises(SpecError) as exc:  # a link inside the project still is refused
        scaffold.new_spec("mine", project / "linked" / "specs", None)
    assert exc.value.diagnostics[0].code == "E198"
