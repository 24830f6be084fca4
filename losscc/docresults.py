"""The verify results a reference page shows, from the committed ``docs/verify.json``.

``python -m benchmarks.record_verify SPEC...`` runs ``losscc verify`` and ``losscc verify
--extreme`` on each spec and records a summary of their rows there, with the date, the
commit and the spec's ``source_sha256``.  ``losscc docs`` only reads the file (it never
runs verify), so the pages stay a deterministic function of the committed files; a page
whose spec changed after its record says so.
"""

from __future__ import annotations

import math
from pathlib import Path

from .errors import Diagnostic, Location, SpecError
from .casefile import loads_bounded
from .files import read_bounded
from .spec import Spec

VERIFY = "docs/verify.json"
MAX_BYTES = 16 * 1024 * 1024


def load(root: Path) -> dict:
    """Spec name -> record; {} where the file is absent.  A file that is not JSON is E175."""
    path = root / VERIFY
    if not path.is_file():
        return {}
    try:
        data = loads_bounded(read_bounded(path, MAX_BYTES, "verify results", VERIFY))
    except ValueError as exc:  # not JSON (or not UTF-8): a bad committed file, not a bug
        line, col = getattr(exc, "lineno", 1), getattr(exc, "colno", 1)
        raise SpecError([Diagnostic(Location(VERIFY, line, col), "E175", f"not valid JSON: {exc}")]) from None
    specs = data.get("specs") if isinstance(data, dict) else None
    return {k: v for k, v in specs.items() if isinstance(v, dict)} if isinstance(specs, dict) else {}


def cell(v) -> str:
    """A committed file's value as one table cell: one line, no cell break, no HTML tag."""
    return " ".join(str(v).split()).replace("|", r"\|").replace("<", "&lt;")


def _err(v) -> str:
    return f"{v:.1e}" if isinstance(v, (int, float)) and math.isfinite(v) else cell(v)


def _rows(rows) -> list[str]:
    out = []
    for r in rows if isinstance(rows, list) else []:
        if isinstance(r, dict):
            out.append("| " + " | ".join([*(cell(r.get(k)) for k in ("backend", "dtype", "mode", "cases")),
                                          _err(r.get("max_rel_value")), _err(r.get("max_rel_grad")),
                                          cell(r.get("verdict"))]) + " |")
    return sorted(out)


HEAD = ["| backend | dtype | mode | cases | value err | grad err | verdict |", "|---|---|---|---|---|---|---|"]


def section(spec: Spec, records: dict) -> list[str]:
    """The page's "Verify" section: the spec's recorded rows, or a line saying there are none."""
    lines = ["## Verify", ""]
    rec = records.get(spec.name)
    if rec is None:
        return lines + [f"Not recorded in `{VERIFY}` (`python -m benchmarks.record_verify specs/{spec.name}.yaml`).",
                        ""]
    lines.append(f"Recorded in `{VERIFY}` on {cell(rec.get('date'))} at commit `{cell(rec.get('commit'))}` "
                 "by `python -m benchmarks.record_verify`: `losscc verify` (every case of the spec, its "
                 "reference files and random draws, against the reference evaluator) and `losscc verify "
                 "--extreme` (float32, extreme inputs: finite and correct). Errors are the largest norm-wise "
                 "error measures of the values and gradients (docs/verify.md).")
    if rec.get("spec_sha256") != spec.source_sha256:
        lines.append("The spec has changed since: these rows are of its earlier text.")
    for key, title in (("verify", "`losscc verify`"), ("extreme", "`losscc verify --extreme`")):
        rows = _rows(rec.get(key))
        lines += ["", f"{title}:", ""] + (HEAD + rows if rows else ["no rows."])
    return lines + [""]
