"""Smoke tests for examples/*_train.py: a few training steps must lower the loss.

Each script runs in its own subprocess, so that framework-global state (MindSpore's
jit caches and context, Paddle's to_static programs) does not leak into other tests.
"""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STEPS = 30

FIRST_LAST = re.compile(r"^(focal|multitask): first loss (\S+)\s+last loss (\S+)$", re.M)
LOG_VARS = re.compile(r"^multitask: log_vars (\S+) (\S+)$", re.M)


def run_example(script):
    env = dict(os.environ, GLOG_minloglevel="2")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), "--steps", str(STEPS), "--seed", "0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{script} failed (rc={proc.returncode}):\n{output[-4000:]}"
    losses = {name: (float(first), float(last)) for name, first, last in FIRST_LAST.findall(proc.stdout)}
    log_vars = [tuple(float(v) for v in m) for m in LOG_VARS.findall(proc.stdout)]
    assert set(losses) == {"focal", "multitask"}, f"unexpected output of {script}:\n{output[-4000:]}"
    assert len(log_vars) == 1, f"unexpected output of {script}:\n{output[-4000:]}"
    return losses, log_vars[0], proc.stdout


@pytest.fixture(scope="module", params=["mindspore_train.py", "paddle_train.py"])
def example(request):
    return request.param, run_example(request.param)


def test_focal_loss_decreases(example):
    script, (losses, _, stdout) = example
    first, last = losses["focal"]
    assert math.isfinite(first) and math.isfinite(last), stdout
    assert first > 0 and last >= 0, stdout  # the focal loss is non-negative
    assert last < 0.5 * first, f"{script}: focal loss {first} -> {last}\n{stdout}"


def test_multitask_loss_decreases(example):
    script, (losses, _, stdout) = example
    first, last = losses["multitask"]
    assert math.isfinite(first) and math.isfinite(last), stdout
    # At log_vars = 0 the loss is bce1 + bce2, about 2*log(2) for an untrained model.
    assert 0.5 < first < 3.0, stdout
    assert last < first - 0.5, f"{script}: multitask loss {first} -> {last}\n{stdout}"


def test_multitask_log_vars_are_learned(example):
    script, (_, log_vars, stdout) = example
    assert all(math.isfinite(v) for v in log_vars), stdout
    # Initialised to 0; both task losses are below 1, so both log-variances go negative.
    assert all(v < -0.1 for v in log_vars), f"{script}: log_vars {log_vars}\n{stdout}"
    # Task 2 has noisier labels (higher loss), so it ends with the larger log-variance.
    assert log_vars[1] > log_vars[0], f"{script}: log_vars {log_vars}\n{stdout}"
