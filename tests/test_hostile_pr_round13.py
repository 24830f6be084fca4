"""Red-team round 13: the reference's trigamma of a large negative number (mpmath steps
up to the positive axis one unit at a time: a constant -1e11 - 0.5 hung the compiler's
constant folding, a case input hung verify's reference)."""

from __future__ import annotations

import signal
import time

import mpmath
import pytest

from losscc.backends import all_backends
from losscc.emit import compile_spec
from losscc.gamma import mp_trigamma
from tests.codegen_util import spec_of


def _alarm(*_):
    raise TimeoutError


@pytest.fixture
def within():
    old = signal.signal(signal.SIGALRM, _alarm)
    yield lambda s: signal.alarm(s)
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_trigamma_of_a_large_negative_number_is_immediate_and_accurate(within):
    within(10)
    for dps in (15, 60, 400):
        with mpmath.workdps(dps):
            for x in (-1e6 - 0.5, -1e11 - 0.5, -4503599627370495.5):
                start = time.monotonic()
                v = mp_trigamma(mpmath.mpf(x))
                assert time.monotonic() - start < 1
                assert abs(v - mpmath.pi ** 2 / mpmath.sinpi(mpmath.mpf(x)) ** 2) < 1e-5
            for x in (-0.5, -1.5, -2.25, -1e-10, -0.9999999999, -170.3, -1000.5):
                x = mpmath.mpf(x)
                with mpmath.workdps(dps + 30):
                    want = mpmath.polygamma(1, x)
                assert abs(mp_trigamma(x) - want) <= 1e-14 * want


def test_a_constant_trigamma_of_a_large_negative_number_compiles(within):
    spec = spec_of("""
        name: tg_const
        summary: s.
        inputs:
          x: {dtype: float, shape: [N]}
        formula: |
          loss = x * trigamma(-100000000000.5)
    """)
    within(20)
    for b in all_backends():
        assert "def tg_const" in compile_spec(spec, b)
