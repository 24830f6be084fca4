"""Shared fixtures.  The installed backends' frameworks are imported here, before any test
module, in their load order (``Backend.load_order``: MindSpore before Paddle in one process,
as both ship libdnnl and the other order fails to load MindSpore's CPU kernels); a backend
whose framework is missing is skipped by the tests parametrised over it (tests/backend_util.py)."""

import os
import sys
from pathlib import Path

# Tests import generated/ modules; bytecode caches there would make `losscc check` fail.
sys.dont_write_bytecode = True
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from losscc.verify import import_frameworks  # noqa: E402
from tests.backend_util import AVAILABLE  # noqa: E402

import_frameworks(AVAILABLE)  # with each backend's quiet_env (Paddle's glog level)

# CI runs the property tests on a fixed sequence of examples (HYPOTHESIS_PROFILE=ci, set by
# .ci/run), so a landing run cannot fail on a new random draw; by hand they explore afresh.
settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
