"""``python -m benchmarks.record_verify SPEC.yaml ...``: record verify results for the pages.

For each spec file, runs ``losscc verify --format json SPEC`` (every backend, both dtypes,
eager and graph) and ``losscc verify --extreme --format json SPEC`` in a subprocess and
stores a summary of their rows in ``docs/verify.json`` under the spec's name, with the
date, the git commit (``-dirty`` when the work tree has changes) and the spec's
``source_sha256``.  Specs not named keep their earlier records, so the file is built one
spec (or a few) at a time.  ``losscc docs`` reads the file and never runs verify: a page
shows its spec's record, and says so when the spec changed after it was recorded.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

from losscc.emit import load_all

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "verify.json"
FIELDS = ("backend", "dtype", "mode", "cases", "max_rel_value", "max_rel_grad", "verdict")


def _git_commit() -> str:
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD")
    # the records' own file does not make the tree dirty: a run resumed after an earlier one
    return commit + ("-dirty" if git("status", "--porcelain", "--untracked-files=no", "--", ".",
                                     ":!docs/verify.json") else "")


def _verify(spec_file: str, extreme: bool) -> list[dict] | None:
    cmd = [sys.executable, "-m", "losscc", "verify", "--format", "json", *(["--extreme"] if extreme else []),
           spec_file]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if run.returncode not in (0, 1):  # 1: some row failed, still a result to record
        print(f"record_verify: {' '.join(cmd[2:])} exited {run.returncode}:\n{run.stderr[-2000:]}", file=sys.stderr)
        return None
    return [{k: row[k] for k in FIELDS} for row in json.loads(run.stdout)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("specs", nargs="+", help="spec files")
    args = ap.parse_args(argv)
    doc = json.loads(OUT.read_text()) if OUT.exists() else {}
    records = doc.get("specs", {})
    commit = _git_commit()
    errors = 0
    for spec_file in args.specs:
        (spec,) = load_all([Path(spec_file).resolve()], root=ROOT)
        rows, extreme = _verify(spec_file, False), _verify(spec_file, True)
        if rows is None or extreme is None:  # not run (a bad spec or case file): nothing recorded
            errors += 1
            continue
        record = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), "commit": commit,
                  "spec_sha256": spec.source_sha256, "verify": rows, "extreme": extreme}
        records[spec.name] = record
        fails = sum(r["verdict"] != "pass" for r in record["verify"] + record["extreme"])
        print(f"record_verify: {spec.name}: {len(record['verify'])} + {len(record['extreme'])} rows, "
              f"{fails} failed", file=sys.stderr)
        out = {"command": "python -m benchmarks.record_verify", "specs": dict(sorted(records.items()))}
        OUT.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")  # after each spec: nothing lost
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
