"""Specs that call specs: inlining, the errors of a bad call, staleness, verify end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from losscc.errors import SpecError
from losscc.parse import build_program
from losscc.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent

HEAD = "summary: s.\ninputs:\n  x: {dtype: float, shape: [N, C]}\n  y: {dtype: float, shape: [N, C], domain: \"[0, 1]\"}\n"


def _program(tmp_path: Path, name: str, formula: str, extra: dict[str, str] | None = None):
    for other, text in (extra or {}).items():
        (tmp_path / f"{other}.yaml").write_text(text)
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\n{HEAD}formula: |\n  loss = {formula}\n")
    return build_program(load_spec(path))


def _codes(tmp_path, name, formula, extra=None) -> list[str]:
    with pytest.raises(SpecError) as exc:
        _program(tmp_path, name, formula, extra)
    return [d.code for d in exc.value.diagnostics]


def test_multitask_inlines_to_the_hand_written_loss(tmp_path):
    composed = build_program(load_spec(ROOT / "specs" / "uncertainty_multitask.yaml"))
    text = (ROOT / "specs" / "uncertainty_multitask.yaml").read_text()
    for k in ("1", "2"):
        text = text.replace(f"bce_with_logits(logits{k}, labels{k}, reduction=none)",
                            f"-(labels{k} * log(sigmoid(logits{k})) + (1 - labels{k}) * log(1 - sigmoid(logits{k})))")
    (tmp_path / "uncertainty_multitask.yaml").write_text(text)
    by_hand = build_program(load_spec(tmp_path / "uncertainty_multitask.yaml"))
    assert composed.loss == by_hand.loss
    assert composed.spec.composes == ("bce_with_logits",)
    assert composed.spec.source_sha256 != by_hand.spec.source_sha256


def test_reductions_of_a_call(tmp_path):
    none = _program(tmp_path, "a", "mse(x, y, reduction=none)")
    assert none.typeof(none.loss).axes == ("N", "C")
    # mse's mean divides by sum(weight); weight omitted is 1 everywhere: the element count
    mean = _program(tmp_path, "b", "mse(x, y, reduction=mean)")
    assert repr(mean.loss) == "ReduceSum(ReduceSum((x - y)**2, C), N)/(Size(C)*Size(N))"
    plain = _program(tmp_path, "d", "huber(x, y, reduction=mean)")
    assert repr(plain.loss).startswith("ReduceMean(ReduceMean(")
    summed = _program(tmp_path, "c", "mse(x, y, reduction=sum)")
    assert repr(summed.loss) == "ReduceSum(ReduceSum((x - y)**2, C), N)"
    assert not summed.typeof(summed.loss).axes


def test_params_by_keyword_and_a_variadic_group_of_no_axis(tmp_path):
    prog = _program(tmp_path, "h", "huber(x, y, reduction=none, delta=2.0)")
    assert prog.typeof(prog.loss).axes == ("N", "C")
    assert "2.0" in str(prog.loss) and "delta" not in str(prog.loss)


def test_missing_spec(tmp_path):
    assert _codes(tmp_path, "a", "no_such_loss(x, y)") == ["E208"]


def test_cycle(tmp_path):
    b = f"name: b\n{HEAD}formula: |\n  loss = a(x, y, reduction=none)\n"
    assert "E260" in _codes(tmp_path, "a", "b(x, y, reduction=none)", {"b": b})


def test_self_call_is_a_cycle(tmp_path):
    assert "E260" in _codes(tmp_path, "a", "a(x, y, reduction=none)")


def test_wrong_arity_and_keywords(tmp_path):
    assert _codes(tmp_path, "a", "mse(x, reduction=none)") == ["E262"]
    assert _codes(tmp_path, "a", "mse(x, y, x, y, reduction=none)") == ["E262"]
    assert _codes(tmp_path, "a", "mse(x, y, bogus=1.0, reduction=none)") == ["E262"]


def test_bad_reduction(tmp_path):
    assert _codes(tmp_path, "a", "mse(x, y, reduction=batchmean)") == ["E263"]


def test_shape_mismatch(tmp_path):
    # dice needs [N, P] for both inputs; a reduced argument has only [N]
    assert _codes(tmp_path, "a", "dice(sum(x, axis=C), y, reduction=none) + 0 * x") == ["E264"]
    # two callee axes may not be one axis of the caller: probs [N, P] vs target [C, ...]
    assert _codes(tmp_path, "a", "kl_div(x, sum(y, axis=C), reduction=none)") == ["E264"]


def test_position_of_the_error(tmp_path):
    with pytest.raises(SpecError) as exc:
        _program(tmp_path, "a", "mse(x, reduction=none)")
    d = exc.value.diagnostics[0]
    assert (d.loc.line, d.loc.col) == (7, 10) and d.loc.path.endswith("a.yaml")


def test_callee_change_changes_the_digest(tmp_path):
    callee = f"name: sq\n{HEAD}formula: |\n  loss = (x - y) ** 2\n"
    first = _program(tmp_path, "a", "sq(x, y, reduction=none)", {"sq": callee})
    second = _program(tmp_path, "a", "sq(x, y, reduction=none)", {"sq": callee + "# a comment\n"})
    assert first.loss == second.loss
    assert first.spec.source_sha256 != second.spec.source_sha256


def test_check_notices_a_callee_change(tmp_path):
    spec_dir = tmp_path / "specs"
    spec_dir.mkdir()
    (spec_dir / "sq.yaml").write_text(f"name: sq\n{HEAD}formula: |\n  loss = (x - y) ** 2\n")
    (spec_dir / "a.yaml").write_text(f"name: a\n{HEAD}formula: |\n  loss = sq(x, y, reduction=none)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(*args):
        return subprocess.run([sys.executable, "-m", "losscc", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300, check=False)

    assert run("generate", "specs", "-o", "out").returncode == 0
    assert run("check", "specs", "-o", "out").returncode == 0
    with open(spec_dir / "sq.yaml", "a") as f:
        f.write("# the callee changes\n")
    got = run("check", "specs", "-o", "out")
    assert got.returncode != 0 and "a.py" in got.stdout + got.stderr


@pytest.mark.parametrize("name", ["bce_dice", "distill_kd", "uncertainty_multitask"])
def test_verify_composed(name):
    pytest.importorskip("paddle")
    got = subprocess.run([sys.executable, "-m", "losscc", "verify", f"specs/{name}.yaml", "--backend", "paddle",
                          "--dtype", "float64", "--mode", "eager"], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300, check=False)
    assert got.returncode == 0, got.stdout + got.stderr
    assert "1 passed" in got.stdout + got.stderr or "passed, 0 failed" in got.stdout + got.stderr


def test_nesting_is_bounded(tmp_path):
    from losscc import limits
    n = limits.MAX_COMPOSE_DEPTH + 1
    chain = {f"s{k}": f"name: s{k}\n{HEAD}formula: |\n  loss = s{k + 1}(x, y, reduction=none)\n" for k in range(1, n)}
    chain[f"s{n}"] = f"name: s{n}\n{HEAD}formula: |\n  loss = (x - y) ** 2\n"
    assert "E261" in _codes(tmp_path, "s0", "s1(x, y, reduction=none)", chain)


def test_a_linked_spec_is_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "sq.yaml").write_text(f"name: sq\n{HEAD}formula: |\n  loss = (x - y) ** 2\n")
    inner = tmp_path / "p"
    inner.mkdir()
    (inner / "sq.yaml").symlink_to(outside / "sq.yaml")
    assert _codes(inner, "a", "sq(x, y, reduction=none)") == ["E208"]


def test_a_callee_with_errors(tmp_path):
    bad = f"name: bad\n{HEAD}formula: |\n  loss = (x - nope) ** 2\n"
    assert _codes(tmp_path, "a", "bad(x, y, reduction=none)", {"bad": bad}) == ["E265"]


def test_a_callee_with_learnable_tensors_is_refused(tmp_path):
    lr = (f"name: lr\n{HEAD}learnable:\n  w: {{shape: [2], init: 0.0}}\nformula: |\n"
          f"  loss = (x - y) ** 2 * exp(w[0])\n")
    assert _codes(tmp_path, "a", "lr(x, y, reduction=none)", {"lr": lr}) == ["E265"]


def test_param_values_are_checked(tmp_path):
    assert _codes(tmp_path, "a", "huber(x, y, reduction=none, delta=-1.0)") == ["E262"]
    assert _codes(tmp_path, "a", "huber(x, y, reduction=none, delta=x)") == ["E262"]


def test_a_callee_is_built_once_per_compile(tmp_path, monkeypatch):
    from losscc import parse
    calls = []
    real = parse.build_program
    monkeypatch.setattr(parse, "build_program", lambda spec: calls.append(spec.name) or real(spec))
    _program(tmp_path, "a", "mse(x, y, reduction=none) + mse(y, x, reduction=none)")
    assert calls.count("mse") == 1


_HOSTILE = """
import resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from losscc.cli import main
root = Path(sys.argv[1])
head = "summary: s.\\ninputs:\\n  x: {dtype: float, shape: [N]}\\n  y: {dtype: float, shape: [N]}\\n"
pairs = [("exp(x)", "y"), ("x", "exp(y)"), ("y", "x"), ("x * y", "y")]
calls = " + ".join(f"s{{k}}({a}, {b}, reduction=none)" for a, b in pairs)
(root / "s0.yaml").write_text("name: s0\\n" + head + "formula: |\\n  loss = x * exp(y)\\n")
for k in range(1, 8):
    (root / f"s{k}.yaml").write_text(f"name: s{k}\\n" + head + "formula: |\\n  loss = "
                                     + calls.format(k=k - 1) + "\\n")
sys.exit(main(["explain", "s7.yaml"]))
"""


def test_exponential_composition_is_refused_within_bounds(tmp_path):
    got = subprocess.run([sys.executable, "-c", _HOSTILE, "."], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert got.returncode == 2, got.stdout + got.stderr
    assert ("limit 'tree'" in got.stderr or "limit 'inlined'" in got.stderr) and "Traceback" not in got.stderr


def test_a_named_reduction_and_a_variadic_group_of_several_axes(tmp_path):
    (tmp_path / "a.yaml").write_text(
        "name: a\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N, H, W]}\n"
        "  y: {dtype: float, shape: [N, H, W], domain: \"[0, inf)\"}\n"
        "formula: |\n  loss = kl_div(x, y, reduction=batchmean) + mse(x, y, reduction=none)\n")
    prog = build_program(load_spec(tmp_path / "a.yaml"))
    text = repr(prog.loss)
    # batchmean: the sum over N and the group *D = (H, W), divided by N's size
    assert "/Size(N)" in text and text.count("ReduceSum(") == 3
    assert prog.typeof(prog.loss).axes == ("N", "H", "W")


def test_a_called_specs_ignored_positions_give_zero_and_do_not_count(tmp_path):
    pytest.importorskip("paddle")
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "ce_skip_one.yaml").write_text(
        "name: ce_skip_one\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N, C]}\n"
        "  t: {dtype: int, shape: [N], domain: \"[0, C)\"}\n"
        "formula: |\n  loss = cross_entropy(x, t, ignore_index=1, reduction=none)\n"
        "reductions:\n  mean: {denominator: \"where(t != 1, 1.0, 0.0)\"}\n"
        "cases:\n  - id: hand\n    # rows with class 1 are ignored: log(2), 0, 0; the mean counts one row\n"
        "    inputs: {x: [[0.0, 0.0], [0.0, 0.0], [0.0, 1.0986122886681098]], t: [0, 1, 1]}\n"
        "    expected: {none: [0.6931471805599453, 0.0, 0.0], mean: 0.6931471805599453}\n")
    got = subprocess.run([sys.executable, "-m", "losscc", "verify", "specs/ce_skip_one.yaml", "--backend", "paddle",
                          "--dtype", "float64", "--mode", "eager"], cwd=tmp_path, check=False,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0 and "1 passed, 0 failed" in got.stdout + got.stderr, got.stdout + got.stderr
    summed = build_program(load_spec(specs / "ce_skip_one.yaml"))
    assert "Ne(t, 1)" in repr(summed.loss)
    # the callee's own mean: the weighted mean over the positions not ignored
    (specs / "ce_mean.yaml").write_text(
        "name: ce_mean\nsummary: s.\ninputs:\n  x: {dtype: float, shape: [N, C]}\n"
        "  t: {dtype: int, shape: [N], domain: \"[0, C)\"}\n"
        "formula: |\n  loss = cross_entropy(x, t, ignore_index=1, reduction=mean)\n"
        "cases:\n  - id: hand\n"
        "    inputs: {x: [[0.0, 0.0], [0.0, 0.0], [0.0, 1.0986122886681098]], t: [0, 1, 1]}\n"
        "    expected: {none: 0.6931471805599453}\n")
    got = subprocess.run([sys.executable, "-m", "losscc", "verify", "specs/ce_mean.yaml", "--random", "0", "--backend", "paddle",
                          "--dtype", "float64", "--mode", "eager"], cwd=tmp_path, check=False,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0 and "1 passed, 0 failed" in got.stdout + got.stderr, got.stdout + got.stderr


_FAN_OUT = (_HOSTILE
            .replace('pairs = [("exp(x)", "y"), ("x", "exp(y)"), ("y", "x"), ("x * y", "y")]',
                     'pairs = [(f"x + {j}", f"y * {j + 1}") for j in range(30)]')
            .replace("loss = x * exp(y)", "loss = log(cosh(x - y)) + (x * y)**2")
            .replace("range(1, 8)", "range(1, 4)").replace('"s7.yaml"', '"s3.yaml"'))


def test_composition_fan_out_is_refused_within_bounds(tmp_path):
    """30 calls of 30 calls of a log-cosh, each with other arguments: 900 distinct copies that
    SymPy evaluates one by one (23 s at two levels, over 120 s at three), though the inlined
    tree stays under the limit 'tree'; the limit 'inlined' counts distinct nodes."""
    assert "range(30)" in _FAN_OUT and "s3.yaml" in _FAN_OUT
    got = subprocess.run([sys.executable, "-c", _FAN_OUT, "."], cwd=tmp_path, capture_output=True,
                         text=True, timeout=20, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert got.returncode == 2, got.stdout + got.stderr
    assert "limit 'inlined'" in got.stderr and "Traceback" not in got.stderr
