"""Modules by pipeline stage, none much over 400 lines: every module of the package at most 450."""

from __future__ import annotations

from pathlib import Path

import losscc

LIMIT = 450
PACKAGE = Path(losscc.__file__).parent


def module_lengths() -> dict[str, int]:
    return {p.relative_to(PACKAGE.parent).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
            for p in sorted(PACKAGE.rglob("*.py"))}


def test_the_count_sees_every_module_and_subpackage():
    lengths = module_lengths()
    assert "losscc/spec.py" in lengths and "losscc/backends/__init__.py" in lengths
    assert all(n > 0 for n in lengths.values())


def test_every_module_is_at_most_450_lines():
    over = {path: n for path, n in module_lengths().items() if n > LIMIT}
    assert not over, f"modules over {LIMIT} lines: " + ", ".join(f"{p} ({n})" for p, n in sorted(over.items()))
