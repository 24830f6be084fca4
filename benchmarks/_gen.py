"""Load the generated modules under unique names (registered in sys.modules for ms.jit)."""

from __future__ import annotations

from pathlib import Path

from losscc.verify import load_module

ROOT = Path(__file__).resolve().parents[1]


def load(backend: str, name: str):
    return load_module(ROOT / "generated" / backend / f"{name}.py", f"benchmarks_gen_{backend}_{name}")
