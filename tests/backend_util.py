"""The backends the tests run on: discovered by :mod:`losscc.backends`, each skipped (with the
reason) where its framework is not installed."""

import pytest

from losscc.backends import all_backends


def _skip_reason(backend) -> str:
    return f"backend {backend.name}: {', '.join(backend.missing())} cannot be imported"


# the backends whose frameworks are installed, in discovery order
AVAILABLE = tuple(b.name for b in all_backends() if not b.missing())
# for @pytest.mark.parametrize("backend", BACKENDS): every backend, skipped where unavailable
BACKENDS = tuple(pytest.param(b.name, id=b.name, marks=pytest.mark.skipif(bool(b.missing()), reason=_skip_reason(b)))
                 for b in all_backends())
