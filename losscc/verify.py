"""``losscc verify``: run the generated code and compare it with the references.

For each spec x backend x dtype x mode the generated class is built with each
case's hyperparameters and called for every reduction; the gradient of the
summed loss is taken with respect to every float input and learnable tensor.
Expectations come from the spec's own cases, from case files (``references:`` or
``--cases``), and for random cases from :mod:`losscc.reference` (mpmath).

Each backend's runner (``Backend.runner``, in its module of :mod:`losscc.backends`)
runs the code; verify imports the frameworks through
:func:`losscc.backends.load_frameworks`, in the backends' load order.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import re
import sys
import tempfile
import time
import warnings
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .cases import CaseData, extreme_cases, load_case_file, random_cases, reference_cases, spec_cases
from .compare import (  # noqa: F401  (compare, check and the tolerances are part of verify's API)
    ELEMENT_TOLERANCES, TOLERANCES, Check, Gradients, Tolerance, _check_case, _extreme_check, _magnitude, check, compare,
    error_line, gradient_floor, sensitivity, value_floors,
)
from .backends import all_backends, load_frameworks
from .backends import get as get_backend
from .backends import names as backend_names
from .errors import Diagnostic, Location, SpecError, printable
from .parse import build_program
from .reference import ReferenceCost, gradient_condition, reference, spec_budget
from .spec import Spec

MODES = ("eager", "graph")
DTYPES = ("float64", "float32")


@dataclass
class Row:
    spec: str
    backend: str
    dtype: str
    mode: str
    cases: int = 0
    value_err: float = 0.0      # largest norm-wise error measure of values
    grad_err: float = 0.0       # ... of gradients
    value_rel: float | None = None  # largest per-element relative error of values (None: not checked)
    grad_rel: float | None = None   # ... of gradients (a library's gradient of the sum: norm-wise only)
    skipped_kinks: int = 0
    failures: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict:
        tols = {q: ELEMENT_TOLERANCES[(self.dtype, q)].as_dict() for q in ("value", "gradient")}
        return dict(spec=self.spec, backend=self.backend, dtype=self.dtype, mode=self.mode, cases=self.cases,
                    max_rel_value=self.value_err, max_rel_grad=self.grad_err,
                    max_elem_rel_value=self.value_rel, max_elem_rel_grad=self.grad_rel,
                    kinks_skipped=self.skipped_kinks, tolerances=tols,
                    verdict="pass" if self.ok else "FAIL", failures=self.failures)


# --------------------------------------------------------------------------- modules


def load_module(path: Path, name: str):
    """Import one generated file on its own (it must be self-contained)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # a graph compiler may re-import functions' modules by name
    spec.loader.exec_module(mod)
    return mod


@contextlib.contextmanager
def quiet_frameworks():
    """The backends' known framework warnings (``Backend.quiet_warnings``) filtered for the
    duration of a verify run, never for the user's process as a whole; so are the INFO lines
    of ``Backend.quiet_loggers``."""
    loggers = [logging.getLogger(name) for b in all_backends() for name in b.quiet_loggers]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        for b in all_backends():
            for text in b.quiet_warnings:
                warnings.filterwarnings("ignore", message=re.escape(text))
        for lg in loggers:
            lg.setLevel(max(lg.level, logging.WARNING))
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)


def runner(backend: str):
    """A fresh runner of backend `backend` (its framework imported)."""
    return get_backend(backend).runner()


def import_frameworks(backends) -> None:
    """Import the frameworks of `backends` (names), their ``quiet_env`` set where unset."""
    for name in backends:
        for key, value in get_backend(name).quiet_env.items():
            os.environ.setdefault(key, value)
    with quiet_frameworks():
        load_frameworks(backends)


# --------------------------------------------------------------------------- driver


def _round32(case: CaseData, spec=None) -> CaseData:
    inputs = {k: (None if v is None else (v.astype(np.float32).astype(float) if v.dtype.kind == "f" else v))
              for k, v in case.inputs.items()}
    learn = {k: np.asarray(v, dtype=np.float32).astype(float) for k, v in case.learnable.items()}
    # float hyperparameters become tensors of the inputs' dtype in the generated code: the
    # reference reads them as float32 holds them (a tie of x with tol = 1e-3 is a tie there)
    declared = {p.name: p for p in spec.params} if spec is not None else {}
    params = {k: _param32(v, declared.get(k)) if isinstance(v, float) else v
              for k, v in case.params.items()}
    return CaseData(case.id, case.source, inputs, params, learn, {}, {}, True)


def _param32(v: float, p=None) -> float:
    """v as float32 holds it, one float32 step inward where rounding crossed a bound (max: 0.1
    rounds to 0.10000000149, which the generated function's bound check refuses; gt: 0.1 and
    v = 0.1000000001 rounds onto the bound)."""
    f = np.float32(v)
    if p is not None and not p.admits(float(f)):
        toward = np.float32(np.inf) if p.min is not None and float(f) <= p.min else np.float32(-np.inf)
        f = np.nextafter(f, toward)
    return float(f)


def _exact32(case: CaseData) -> bool:
    arrays = [v for v in case.inputs.values() if v is not None and v.dtype.kind == "f"]
    arrays += [np.asarray(v, dtype=float) for v in case.learnable.values()]
    return all(np.array_equal(a.astype(np.float32).astype(float), a) for a in arrays)


def exp_names(prog, case: CaseData) -> list[str]:
    """The inputs and learnables whose gradients a case compares."""
    names = [i.name for i in prog.spec.inputs
             if i.dtype == "float" and not i.optional and case.inputs.get(i.name) is not None]
    return names + [lr.name for lr in prog.spec.learnable]


NEAR_ULPS = 16  # a selection whose sides are this many ulps of the dtype apart may round to a tie


def expectations(prog, case: CaseData, dtype: str = "float64"):
    """Expected values and gradients (and kink masks) for a case, from the reference where
    needed; selections whose sides are within NEAR_ULPS of `dtype` of a tie are kinks."""
    diff_names = exp_names(prog, case)
    need_ref = case.from_reference or not case.grads
    kinks = {}
    exp_vals, exp_grads = dict(case.expected), dict(case.grads)
    if need_ref:
        try:
            ref = reference(prog, case.inputs, case.params, case.learnable, diff_names,
                            max_dps=120 if case.source == "extreme" else None,
                            near_tol=NEAR_ULPS * float(np.finfo(dtype).eps), overflow=float(np.finfo(dtype).max),
                            charge=case.source not in ("random", "extreme"))
        except ReferenceCost as exc:
            raise _cost_error(prog, case, exc) from None
        if case.from_reference:
            exp_vals = ref.values
        if not exp_grads:
            exp_grads = Gradients(ref.grads)
            exp_grads.of_value, exp_grads.ties, exp_grads.condition = ref.value_grads, ref.tie_slopes, ref.condition
            kinks = ref.kinks
            if _defined_by_hand(case, ref):
                # the formula is singular where the case (and the spec's eps guard) gives a
                # value: the reference has no gradient there to compare with
                kinks = {n: np.asarray(m) | ~np.isfinite(exp_grads[n]) for n, m in kinks.items()}
    return exp_vals, exp_grads, kinks


def _cost_error(prog, case: CaseData, exc: ReferenceCost) -> SpecError:
    """E181 for a case the reference evaluator would take too long on, at its case file or,
    for the spec's own and drawn cases, at the spec file."""
    where = prog.spec.path if case.source in ("spec", "random", "extreme") else case.source
    kind = "" if case.source not in ("random", "extreme") else f"{case.source} "
    return SpecError([Diagnostic(Location(printable(where, False)), "E181",
                                 f"{kind}case '{printable(case.id, False)}': {exc}")])


def _defined_by_hand(case: CaseData, ref) -> bool:
    """The case gives a finite per-element value where the reference's is not finite (0/0
    of an empty sample that an eps guard defines)."""
    given = case.expected.get("none")
    if case.from_reference or given is None:
        return False
    given, got = np.asarray(given, dtype=float), np.asarray(ref.values["none"], dtype=float)
    return given.shape == got.shape and bool(np.any(np.isfinite(given) & ~np.isfinite(got)))


def verify_spec(spec: Spec, modules: dict, runners: dict, dtypes, modes, cases: list[CaseData],
                progress=None, strict: bool = True) -> list[Row]:
    """Rows for one spec.  `strict` (the default) adds the per-element relative check to the
    norm-wise one; ``losscc verify --norm-only`` turns it off (docs/verify.md)."""
    with spec_budget():
        return _verify_spec(spec, modules, runners, dtypes, modes, cases, progress, strict)


def _verify_spec(spec: Spec, modules: dict, runners: dict, dtypes, modes, cases: list[CaseData],
                 progress, strict: bool) -> list[Row]:
    prog = build_program(spec)
    rows = []
    expect64 = []
    for c in cases:
        vals, grads, kinks = expectations(prog, c)
        if c.from_reference and not all(np.all(np.isfinite(v)) for v in vals.values()):
            # a random draw outside the loss's domain for these parameters (e.g. a negative
            # rate with poisson_nll's log_input=False): use the default parameters instead
            c.params = {p.name: p.default for p in spec.params}
            vals, grads, kinks = expectations(prog, c)
        expect64.append((c, vals, grads, kinks))
    expect32 = []
    for c, vals, grads, kinks in expect64:
        if not c.from_reference and _exact32(c):
            # inputs that float32 holds exactly: the case's own expectations apply, with the
            # near ties of float32 as kinks (where the reference gives the gradients)
            expect32.append((c, *expectations(prog, c, "float32")) if kinks and "float32" in dtypes
                            else (c, vals, grads, kinks))
        elif c.from_reference or "float32" not in dtypes:
            c32 = _round32(c, prog.spec) if c.from_reference else None
            expect32.append((c32, *expectations(prog, c32, "float32")) if c32 else (c, vals, grads, kinks))
        else:
            # library values are for the float64 inputs; in float32 compare with the
            # reference at the float32-rounded inputs (the same math, exact inputs)
            c32 = _round32(c, prog.spec)
            expect32.append((c32, *expectations(prog, c32, "float32")))
    truths = {}
    for c, *_ in expect64 + expect32:
        if strict and not c.from_reference and id(c) not in truths:
            # hand-written and library values check the formula; the per-element check
            # compares with the reference's values at the same inputs
            try:
                truths[id(c)] = reference(prog, c.inputs, c.params, c.learnable, [], charge=True).values
            except ReferenceCost as exc:
                raise _cost_error(prog, c, exc) from None
    conditions: dict = {}

    def grad_cond(case: CaseData):
        """name -> the gradient's own condition for `case` (computed once, when first needed)."""
        def get(name):
            if id(case) not in conditions:
                names = exp_names(prog, case)
                conditions[id(case)] = gradient_condition(
                    prog, case.inputs, case.params, case.learnable, names,
                    max_dps=120 if case.source == "extreme" else None,
                    charge=case.source not in ("random", "extreme"))
            return conditions[id(case)].get(name)
        return get if (case.from_reference or not case.grads) else None

    for backend, runner in runners.items():
        mod = modules[backend]
        for dtype in dtypes:
            table = expect64 if dtype == "float64" else expect32
            for mode in modes:
                row = Row(spec.name, backend, dtype, mode)
                for case, exp_vals, exp_grads, kinks in table:
                    reds = [r for r in spec.reduction_names if r in exp_vals] if not case.from_reference \
                        else list(spec.reduction_names)
                    try:
                        vals, grads = runner.run(mod, spec, case, dtype, mode, reds)
                    except Exception as exc:  # a crash of generated code is a failure, not an abort
                        row.failures.append(f"{case.id}: {error_line(exc)}")
                        continue
                    row.cases += 1
                    if case.source == "extreme":
                        row.failures += _extreme_check(case, vals, grads, exp_vals, exp_grads, kinks, dtype,
                                                       reds, row, prog, strict, grad_cond(case))
                    else:
                        row.failures += _check_case(row, case, vals, grads, exp_vals, exp_grads, kinks, dtype,
                                                    reds, prog, truths.get(id(case)), strict, grad_cond(case))
                if not table:  # nothing checked is not a pass
                    row.failures.append("no case applies to this spec: nothing was checked")
                rows.append(row)
                if progress:
                    progress(row)
    return rows


def collect_cases(spec: Spec, root: Path, extra_files: list[str], n_random: int, seed: int,
                  extreme: bool = False) -> list[CaseData]:
    if extreme:
        return extreme_cases(spec, seed)
    cases = spec_cases(spec) + reference_cases(spec, root)
    for f in extra_files:
        cases += load_case_file(f, spec)
    cases += random_cases(spec, n_random, seed)
    return cases


def run(specs: list[Spec], backends=None, dtypes=DTYPES, modes=MODES, extra_files=(), n_random=3,
        seed=0, root: Path = Path("."), progress=None, extreme: bool = False, spec_done=None,
        strict: bool = True) -> list[Row]:
    """Verify `specs`; `progress(row)` after each row, `spec_done(spec, rows)` after each spec."""
    with quiet_frameworks():
        return _run(specs, tuple(backends or backend_names()), dtypes, modes, extra_files, n_random, seed, root, progress, extreme,
                    spec_done, strict)


def _run(specs, backends, dtypes, modes, extra_files, n_random, seed, root, progress, extreme,
         spec_done, strict=True) -> list[Row]:
    from .emit import compile_spec

    import_frameworks(backends)
    all_cases = {s.name: collect_cases(s, root, list(extra_files), n_random, seed, extreme) for s in specs}
    runners = {b: runner(b) for b in backends}
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="losscc-verify-") as tmp:
        for spec in specs:
            modules = {}
            for b in backends:
                path = Path(tmp) / b / f"{spec.name}.py"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(compile_spec(spec, get_backend(b)), encoding="utf-8")
                modules[b] = load_module(path, f"losscc_verify_{b}_{spec.name}")
            spec_rows = verify_spec(spec, modules, runners, dtypes, modes, all_cases[spec.name], progress, strict)
            rows += spec_rows
            if spec_done:
                spec_done(spec, spec_rows)
    return rows


def _rel(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2e}"


def format_table(rows: list[Row]) -> str:
    head = ("spec", "backend", "dtype", "mode", "cases", "value err", "grad err", "value rel", "grad rel",
            "verdict")
    body = [(r.spec, r.backend, r.dtype, r.mode, str(r.cases), f"{r.value_err:.2e}", f"{r.grad_err:.2e}",
             _rel(r.value_rel), _rel(r.grad_rel), "pass" if r.ok else "FAIL") for r in rows]
    widths = [max(len(x[k]) for x in [head] + body) for k in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    fails = [f"  {r.spec}/{r.backend}/{r.dtype}/{r.mode}: {f}" for r in rows for f in r.failures]
    if fails:
        lines += ["", "failures:"] + fails
    return "\n".join(lines) + "\n"


def run_cli(args) -> int:
    from .emit import load_all, project_specs
    from .project import find_project

    project = find_project()
    eps = project.eps if getattr(args, "eps", None) is None else args.eps
    specs = load_all(project_specs(project, args.specs), eps=eps, root=project.root, backward=project.backward)
    if getattr(args, "backward", None):
        specs = [dataclasses.replace(s, backward=args.backward) for s in specs]
    if not specs:  # success over nothing would pass a CI step that checks nothing
        raise SpecError([Diagnostic(Location(printable(" ".join(args.specs) or project.specs, False)), "E176",
                                    "no spec to verify: the specs folder holds no .yaml file")])
    if args.cases and len(specs) != 1:
        raise SpecError([Diagnostic(Location(printable(" ".join(map(str, args.cases)), False)), "E176",
                                    f"--cases checks one spec, and {len(specs)} are selected: name the "
                                    "spec file too (losscc verify specs/<name>.yaml --cases FILE)")])
    backends = tuple(args.backend or project.backends)  # [tool.losscc] backends, all by default
    from .backward_emit import fallback_warnings

    for w in fallback_warnings(specs, [get_backend(n) for n in backends]):  # what `custom` really runs
        print(w.format(), file=sys.stderr)
    dtypes = tuple(args.dtype or DTYPES)
    modes = tuple(args.mode or MODES)
    start = time.time()
    # progress on stderr (stdout is the table or the JSON): a live line on a terminal,
    # one line per spec in logs
    tty = sys.stderr.isatty()
    quiet = getattr(args, "quiet", False)

    def progress(row: Row):
        if tty and not quiet:
            sys.stderr.write(f"\r\x1b[Kverify: {row.spec} {row.backend} {row.dtype} {row.mode} "
                             f"({time.time() - start:.0f}s)")
            sys.stderr.flush()

    def spec_done(spec: Spec, spec_rows: list[Row]):
        if not tty and not quiet:
            n_fail = sum(1 for r in spec_rows if not r.ok)
            verdict = f"{n_fail} of {len(spec_rows)} FAILED" if n_fail else f"{len(spec_rows)} passed"
            print(f"verify: {spec.name}: {verdict} ({time.time() - start:.0f}s)", file=sys.stderr, flush=True)

    if args.extreme:
        dtypes = tuple(args.dtype or ("float32",))
    rows = run(specs, backends, dtypes, modes, args.cases, args.random, args.seed, project.root, progress,
               extreme=args.extreme, spec_done=spec_done, strict=not getattr(args, "norm_only", False))
    if tty:
        sys.stderr.write("\r\x1b[K")
    if args.format == "json":
        print(json.dumps([r.as_dict() for r in rows], indent=1))
    else:
        sys.stdout.write(format_table(rows))
        n_fail = sum(1 for r in rows if not r.ok)
        print(f"\n{len(rows) - n_fail} passed, {n_fail} failed ({time.time() - start:.0f}s)")
    return 0 if all(r.ok for r in rows) else 1
