"""Shared fixtures.  MindSpore must be imported before Paddle in one process (both
ship libdnnl; the other order fails to load MindSpore's CPU kernels)."""

import os
import sys
from pathlib import Path

os.environ.setdefault("GLOG_minloglevel", "2")
# Tests import generated/ modules; bytecode caches there would make `losscc check` fail.
sys.dont_write_bytecode = True

import mindspore  # noqa: E402,F401  (first, see above)
import paddle  # noqa: E402,F401
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# CI runs the property tests on a fixed sequence of examples (HYPOTHESIS_PROFILE=ci, set by
# .ci/run), so a landing run cannot fail on a new random draw; by hand they explore afresh.
settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
