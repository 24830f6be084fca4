"""``losscc new``: a starter spec, or a copy of a catalogue spec, in the specs folder.

The starter generates and verifies as it is; its comments say what each field does.
``--from NAME`` copies one of the specs shipped with losscc (package data, see
:mod:`losscc.resources`) under the new name.  The file is written atomically, never
over an existing file and never through a symbolic link.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from pathlib import Path

from .errors import Diagnostic, Location, SpecError
from .resources import catalogue
from .spec import check_identifier, spec_from_text

STARTER = """\
# A loss spec for losscc (reference: docs/spec.md of losscc; `losscc schema` prints a
# JSON Schema for editors). `losscc generate` writes its code for every backend,
# `losscc verify <this file>` checks values and gradients against a 40-digit reference.
name: {name}  # snake_case, equal to the file name: the function {name}(), the class {class_name}
summary: Pseudo-Huber loss, delta**2 * (sqrt(1 + (d / delta)**2) - 1) with d = pred - target.
description: >
  A smooth Huber loss: quadratic for small differences, linear for large ones. Replace
  this text, the inputs, the parameters and the formula with your own loss.
inputs:  # tensors, in the positional order of the generated function
  pred: {{dtype: float, shape: ["*S"], doc: Predictions.}}
  target: {{dtype: float, shape: ["*S"], doc: "Targets, the shape of pred."}}
  # optional: the argument may be None (then `default`); broadcast: any broadcastable shape
  weight: {{dtype: float, shape: ["*S"], optional: true, broadcast: true, doc: Per-element weights.}}
  # an integer label needs a domain, e.g.  label: {{dtype: int, shape: [N], domain: "[0, C)"}}
params:  # hyperparameters: keyword arguments with a default and optional bounds (min/max inclusive, gt/lt strict)
  delta: {{default: 1.0, min: 0.001, doc: Where the loss turns from quadratic to linear.}}
formula: |  # let-bindings, one per line; the last one is the per-element loss
  d = pred - target
  loss = weight * delta**2 * (sqrt(1 + (d / delta)**2) - 1)
reduction: mean  # the default reduction; none, mean and sum always exist
# guards: {{eps: 1.0e-7}}  # keep log and division away from 0 where the argument can reach 0
# cases:  # hand-written checks, verified by `losscc verify`
#   - id: small
#     inputs: {{pred: [0.0, 3.0], target: [0.0, 0.0]}}
#     expected: {{sum: 2.1622776601683795}}
"""

_NAME_LINE = re.compile(r"^name:[ \t]*([A-Za-z0-9_]+)[ \t]*(#.*)?$", re.M)
_TOP_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*:", re.M)


def _fail(path: str, code: str, message: str, hint: str = "") -> SpecError:
    return SpecError([Diagnostic(Location(path), code, message, hint=hint)])


def starter(name: str) -> str:
    """The text of a starter spec called `name`."""
    class_name = "".join(part.capitalize() for part in name.split("_") if part)
    return STARTER.format(name=name, class_name=class_name)


def from_catalogue(name: str, from_name: str) -> str:
    """The catalogue spec `from_name` renamed to `name`.  Its ``references:`` (case files of
    this repository's tests, not shipped) are left out."""
    specs = catalogue()
    if from_name not in specs:
        close = difflib.get_close_matches(from_name, sorted(specs), n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else \
            f"the catalogue has: {', '.join(sorted(specs))}"
        raise _fail(f"--from {from_name}", "E197", f"no spec '{from_name}' in losscc's catalogue", hint)
    text = specs[from_name].read_text(encoding="utf-8")
    text, n = _NAME_LINE.subn(f"name: {name}  # from losscc's catalogue spec '{from_name}'", text, count=1)
    if n != 1:  # pragma: no cover - every catalogue spec has a top-level name line
        raise _fail(f"--from {from_name}", "E197", "the catalogue spec has no 'name:' line")
    return _drop_top_field(text, "references")


def _drop_top_field(text: str, field: str) -> str:
    starts = [m.start() for m in _TOP_KEY.finditer(text)]
    for k, s in enumerate(starts):
        if text.startswith(field + ":", s):
            end = starts[k + 1] if k + 1 < len(starts) else len(text)
            return text[:s] + text[end:]
    return text


def new_spec(name: str, specs_dir: Path, from_name: str | None = None) -> Path:
    """Write ``specs_dir/<name>.yaml`` (a starter, or the catalogue spec `from_name`) and
    return its path.  Raises SpecError (nothing written) for a bad name, an existing file,
    an unknown catalogue name or a symbolic link on the way."""
    reason = check_identifier(name)
    if reason:
        shown_name = name.encode("unicode_escape").decode("ascii")[:80]
        raise _fail((specs_dir / "<NAME>.yaml").as_posix(), "E195",
                    f"'{shown_name}' cannot be a spec name: it {reason}")
    target = specs_dir / f"{name}.yaml"
    shown = target.as_posix()
    text = starter(name) if from_name is None else from_catalogue(name, from_name)
    spec_from_text(text, shown)  # the file must load as it is (raises SpecError otherwise)
    _check_no_links(specs_dir, shown)
    if target.is_symlink() or target.exists():
        raise _fail(shown, "E196", "the file exists already; pick another name or remove it")
    try:
        specs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _fail(shown, "E198", f"cannot create {specs_dir.as_posix()}: {exc.strerror}") from None
    _check_no_links(specs_dir, shown)
    _write_new(target, text.encode("utf-8"))
    return target


def _check_no_links(specs_dir: Path, shown: str) -> None:
    """No folder on the way to `specs_dir` is a symbolic link (the folders that hold the
    current directory are the user's environment, not the project's, and are not checked)."""
    cwd = Path.cwd()
    around = [cwd, Path(os.path.realpath(cwd))]
    shell = os.environ.get("PWD")  # the shell's spelling of the current folder, links and all
    if shell and os.path.isabs(shell) and os.path.realpath(shell) == os.path.realpath(cwd):
        around.append(Path(shell))
    parts = Path(specs_dir).parts
    for k in range(1, len(parts) + 1):
        p = Path(*parts[:k])
        if p.is_absolute() and any(c == p or p in c.parents for c in around):
            continue
        if p.is_symlink():
            raise _fail(shown, "E198", f"'{p.as_posix()}' is a symbolic link; losscc does not write through links")


def _write_new(target: Path, data: bytes) -> None:
    """Create `target` with `data` atomically: a temporary file in the same folder (created
    exclusively, not through a link), then a hard link to the final name, which fails if
    anything, even a dangling link, is there."""
    shown = target.as_posix()
    try:
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise _fail(shown, "E198", f"cannot write in {target.parent.as_posix()}: {exc.strerror}") from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, target)
    except FileExistsError:
        raise _fail(shown, "E196", "the file exists already; pick another name or remove it") from None
    except OSError as exc:
        raise _fail(shown, "E198", f"cannot write the file: {exc.strerror}") from None
    finally:
        tmp.unlink(missing_ok=True)
