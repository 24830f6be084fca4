"""Value specialisation prepares the program again for at most MAX_RERUNS parameters
(red-team round 14, finding 6: 32 float parameters with `min: 0` ran every pass 33 times)."""

from __future__ import annotations

from losscc import pipeline, specialise
from losscc.spec import spec_from_text

N = 12


def _spec() -> str:
    params = "".join(f"  p{k}: {{default: 1.0, min: 0}}\n" for k in range(N))
    terms = " + ".join(f"x / (p{k} + 1)" for k in range(N))
    return ("name: many\nsummary: many hyperparameters at 0.\ninputs:\n  x: {dtype: float, shape: [N]}\n"
            f"params:\n{params}formula: |\n  loss = {terms}\n")


def test_the_passes_run_at_most_max_reruns_more_times(monkeypatch):
    calls = []
    real = pipeline.run

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "run", counting)
    pipeline.prepare(spec_from_text(_spec(), "many.yaml"))
    assert 1 < len(calls) <= 1 + specialise.MAX_RERUNS

