"""The reference evaluator's working digits follow the formula: |x| / 2.3 more digits for
an input of magnitude |x| only where an exponential function may see it (1 - sigmoid(1000)
must not cancel), 1.3 log10 |x| more elsewhere.  Before, a count likelihood with lgamma was
refused for a count of 1e4 (E104: 4388 digits, above the limit 500), whatever its formula
did with it (fresh-loss trial 12)."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from losscc.casecheck import exponential, exponential_names
from losscc.errors import SpecError
from losscc.parse import build_program
from losscc.reference import reference
from tests.codegen_util import spec_of

POISSON = """
    name: exact_poisson
    summary: Poisson negative log-likelihood with log(y!).
    inputs:
      rate: {dtype: float, shape: [N], domain: "(0, inf)"}
      y: {dtype: float, shape: [N], domain: "[0, inf)"}
    formula: |
      loss = rate - y * log(rate) + lgamma(y + 1)
    cases:
      - id: large_counts
        inputs: {rate: [20000.5, 3.0e5], y: [20000.0, 2.9e5]}
        expected: {none: [%s, %s]}
"""


def _exact(rate, y):
    with mp.workdps(60):
        return mp.mpf(rate) - y * mp.log(rate) + mp.loggamma(mp.mpf(y) + 1)


def test_a_formula_without_exponentials_takes_large_counts():
    want = [_exact(20000.5, 20000.0), _exact(3.0e5, 2.9e5)]
    spec = spec_of(POISSON % tuple(mp.nstr(w, 17) for w in want))
    assert not exponential(spec)
    (case,) = spec.cases
    inputs = {k: np.asarray(v, float) for k, v in case.inputs.items()}
    ref = reference(build_program(spec), inputs, {}, {}, ["rate"])
    for got, w in zip(ref.values["none"], want):
        assert abs(got - float(w)) <= 1e-15 * abs(float(w)), (got, w)
    with mp.workdps(40):
        dwant = [float(1 - mp.mpf(y) / mp.mpf(r)) for r, y in ((20000.5, 20000.0), (3.0e5, 2.9e5))]
    assert np.allclose(ref.grads["rate"], dwant, rtol=1e-12, atol=0), (ref.grads["rate"], dwant)


def test_an_exponential_still_asks_for_its_digits():
    text = POISSON.replace("lgamma(y + 1)", "softplus(-rate)") % ("1.0", "2.0")
    with pytest.raises(SpecError) as info:
        spec_of(text)
    assert "needs 130474 digits in the reference evaluator" in str(info.value)
    assert "[E104]" in info.value.diagnostics[0].format()


@pytest.mark.parametrize("formula,exp", [
    ("loss = x ** 2 + lgamma(x) - log(t)", False),
    ("loss = abs(x - t) ** gamma", False),           # a hyperparameter exponent
    ("loss = x ** t", True),                          # exp(t log x)
    ("a = 2 * t\n      loss = 3 ** a", True),
    ("loss = where(x > t, tanh(x), 0)", True),
    ("loss = log_softmax(x, axis=N)", True),
    ("loss = other_spec(x, t)", True),               # another spec's formula: not known here
])
def test_which_formulas_count_as_exponential(formula, exp):
    text = f"""
    name: probe
    summary: A probe.
    inputs:
      x: {{dtype: float, shape: [N]}}
      t: {{dtype: float, shape: [N]}}
    params:
      gamma: {{default: 2.0}}
    formula: |
      {formula}
    """
    spec = spec_of(text)
    assert exponential(spec) is exp


LOG_RATE = """
    name: log_rate_poisson
    summary: Poisson negative log-likelihood of a log-rate, with log(y!).
    inputs:
      r: {dtype: float, shape: [N]}
      y: {dtype: float, shape: [N], domain: "[0, inf)"}
    formula: |
      rate = exp(r)
      loss = rate - y * r + lgamma(y + 1)
    cases:
      - id: large_counts
        inputs: {r: [8.5, 12.0], y: [5000.0, 1.6e5]}
        expected: {none: [%s, %s]}
"""


def test_a_count_that_no_exponential_sees_takes_the_cheaper_rule():
    """Fresh-loss trial 14, V5: the formula has exp, so every input took |x| / 2.3 digits and
    counts of 5000 were refused (2214 digits); only the log-rate meets exp, and the count's
    digits follow the other rule."""
    def exact(r, y):
        with mp.workdps(60):
            return mp.exp(r) - y * mp.mpf(r) + mp.loggamma(mp.mpf(y) + 1)

    want = [exact(8.5, 5000.0), exact(12.0, 1.6e5)]
    spec = spec_of(LOG_RATE % tuple(mp.nstr(w, 17) for w in want))  # refused before (E104)
    assert exponential(spec) and exponential_names(spec) == {"r"}
    (case,) = spec.cases
    inputs = {k: np.asarray(v, float) for k, v in case.inputs.items()}
    ref = reference(build_program(spec), inputs, {}, {}, ["r", "y"])
    for got, w in zip(ref.values["none"], want):
        assert abs(got - float(w)) <= 1e-15 * abs(float(w)), (got, w)
    with mp.workdps(40):
        dwant = [float(mp.exp(r) - y) for r, y in ((8.5, 5000.0), (12.0, 1.6e5))]
    assert np.allclose(ref.grads["r"], dwant, rtol=1e-12, atol=0), (ref.grads["r"], dwant)


@pytest.mark.parametrize("formula,names", [
    ("a = 2 * t\n      loss = exp(a) + x", {"a", "t"}),
    ("loss = x ** t", {"x", "t"}),                   # exp(t log x)
    ("loss = where(x > 0, exp(t), x)", {"t"}),       # a condition beside exp is not its argument
    ("loss = other_spec(x, t)", {"x", "t"}),         # another spec's formula: any of its arguments
    ("loss = x ** gamma + lgamma(t)", set()),
])
def test_which_names_an_exponential_sees(formula, names):
    text = f"""
    name: probe
    summary: A probe.
    inputs:
      x: {{dtype: float, shape: [N]}}
      t: {{dtype: float, shape: [N]}}
    params:
      gamma: {{default: 2.0}}
    formula: |
      {formula}
    """
    assert exponential_names(spec_of(text)) == names
