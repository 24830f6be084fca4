"""Differential fuzzer over the spec language: random valid specs, compiled for both backends
and checked against the reference evaluator.

    python -m tests.fuzz --examples 200 --seed 1 [--graph-every 5] [--out DIR]

Hypothesis draws whole specs (inputs with fixed and variadic shape groups, every function
and reduction of the language, gathers, one_hot, optional inputs, float/int/bool params,
learnables, names that collide with each other's roles and with the generated code's
locals, mean denominators and extra reductions) together with their cases (sizes, including
empty variadic groups, and values exact in float32).  Each spec goes through the library API
(``losscc.spec.spec_from_text``, ``losscc.emit.render_tree``) into a temporary directory and
is run with :mod:`losscc.verify`'s runners, float64 and float32, eager (and graph for every
``--graph-every``-th spec), against :func:`losscc.verify.expectations`.

Outcomes per spec: ``passed``; ``rejected`` (a SpecError: counted by code, since the
strategy aims at valid specs and a rejection is either a deliberate reserved name or a
strategy or compiler fault to look at); ``failed`` (a crash, a wrong shape, NaN/inf where the
reference is finite, or a norm-wise mismatch: a compiler bug); ``accuracy`` (only the
per-element relative check failed: the formula as written loses accuracy at these inputs,
or the lowering does; reported, not a wrong result).  Failing and rejected specs are saved
as YAML (with the case as JSON) under the output directory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("GLOG_minloglevel", "2")

import numpy as np
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed
from hypothesis import strategies as st

from losscc import compare, verify
from losscc.backends import all_backends
from losscc.cases import CaseData
from losscc.emit import render_tree
from losscc.errors import SpecError
from losscc.parse import build_program
from losscc.spec import spec_from_text
from losscc.specnames import check_attribute
from tests.backend_util import AVAILABLE

verify.import_frameworks(AVAILABLE)  # in the backends' load order, before any generated module

# Names of the generated code's own locals and common loss words: inputs, params, learnables
# and bindings draw from this pool, so they collide with the code around them.
NAME_POOL = ("loss", "result", "in_dtype", "half", "d", "t", "x", "y", "z", "p", "w", "logp", "target",
             "input", "weight", "label", "mask", "margin", "out", "value", "grad", "scale", "shape",
             "loss_1", "tmp", "valid_", "axis", "size", "dtype_", "mean_", "one")
# The framework aliases are reserved words of the spec language: a small share of specs uses
# one on purpose and must be rejected (E-code for a reserved name), not compiled.
RESERVED_POOL = ("F", "nn", "ops", "ms", "paddle", "dtype")
# Names the CI budget leaves out of its pool while a collision with generated-code locals is an
# open bug (none is: every generated local comes from one allocator), and the smallest
# variadic rank it draws (0: empty groups included, as by hand).
KNOWN_COLLISIONS = ()
CI_MIN_RANK = 0
# Open compiler bugs the fuzzer has found and that are reported, by the message they give:
# the CI budget accepts a failure only if every problem of it matches one of these (a new
# bug fails CI).  Remove an entry when its bug is fixed.
KNOWN_BUGS = {
    "internal compiler error on conditions inside min/max/Piecewise (E900)":
        r"internal compiler error \(ValueError: tuple\.index\(x\): x not in tuple\)",
    "MindSpore float64 result with a float32-sized error (a constant or where() branch in float32)":
        r"^case\d mindspore/float64/\w+: (value|gradient) .* off by \d(\.\d+)?e-0[5-9] \(norm-wise\)",
}
GRID = 64.0  # values are multiples of 1/64: exact in float32, so one reference serves both dtypes


@dataclass
class Plan:
    """A drawn spec (as a YAML-able dict) and its cases."""
    doc: dict
    cases: list                 # [(inputs, params, learnable)]
    deliberate_reject: bool = False
    graph: bool = False


@dataclass
class Outcome:
    status: str                 # passed | rejected | failed | accuracy | skipped
    problems: list = field(default_factory=list)
    code: str = ""


# --------------------------------------------------------------------------- expressions


class Gen:
    """Typed random expressions.  `real` may be any sign, `pos` is > 0, `bounded` lies in a
    small interval (so exp of it cannot overflow): each grammar rule keeps the domain of
    log, sqrt, division and powers valid, so a drawn spec is valid by construction."""

    def __init__(self, draw, reals, poss, flags, ints, depth):
        self.draw, self.reals, self.poss, self.flags, self.ints = draw, reals, poss, flags, ints
        self.depth = depth

    def num(self, lo=-2.0, hi=2.0) -> str:
        return repr(round(self.draw(st.floats(lo, hi, allow_nan=False)), 2))

    def real(self, d=None) -> str:
        d = self.depth if d is None else d
        atoms = list(self.reals) + [f"({x})" for x in self.poss]
        if d <= 0 or not atoms:
            return self.draw(st.sampled_from(atoms)) if atoms else self.num()
        k = self.draw(st.integers(0, 27))
        r, p, b = (lambda: self.real(d - 1)), (lambda: self.pos(d - 1)), (lambda: self.bounded(d - 1))
        rules = [
            lambda: self.draw(st.sampled_from(atoms)),
            lambda: f"({r()} + {r()})", lambda: f"({r()} - {r()})", lambda: f"({r()} * {r()})",
            lambda: f"-({r()})", lambda: f"({r()} / {p()})", lambda: f"tanh({r()})",
            lambda: f"sigmoid({r()})", lambda: f"softplus({r()})", lambda: f"log_sigmoid({r()})",
            lambda: f"abs({r()})", lambda: f"relu({r()})", lambda: f"square({b()})", lambda: f"log({p()})",
            lambda: f"log1p({p()})", lambda: f"sqrt({p()})", lambda: f"exp({b()})", lambda: f"expm1({b()})",
            lambda: f"cosh({b()})", lambda: f"min({r()}, {r()})", lambda: f"max({r()}, {r()}, {self.num()})",
            lambda: f"clip({r()}, {self.num(-2, -0.5)}, {self.num(0.5, 2)})",
            lambda: f"where({r()} > {self.num()}, {r()}, {r()})",
            lambda: f"Piecewise(({r()}, {r()} < {self.num()}), ({r()}, True))",
            lambda: f"({r()} if {r()} >= {self.num()} else {r()})",
            lambda: self._flagged(r),
            lambda: f"stop_gradient({r()})",
            lambda: self._ste(r),
        ]
        return rules[k]()

    def _flagged(self, r) -> str:
        if self.flags:
            return f"where({self.draw(st.sampled_from(self.flags))}, {r()}, {r()})"
        if self.ints:
            return f"({r()} * {self.draw(st.sampled_from(self.ints))})"
        return f"({r()} + {self.num()})"

    def _ste(self, r) -> str:
        f = self.draw(st.sampled_from(("round", "floor", "ceil", "sign")))
        x = r()
        return f"({x} + stop_gradient({f}({x}) - {x}))"

    def pos(self, d=None) -> str:
        d = self.depth if d is None else d
        if d <= 0 or not self.poss:
            if self.poss and self.draw(st.booleans()):
                return self.draw(st.sampled_from(self.poss))
            return f"softplus({self.real(0)})" if self.reals else self.num(0.25, 3)
        k = self.draw(st.integers(0, 11))
        r, p, b = (lambda: self.real(d - 1)), (lambda: self.pos(d - 1)), (lambda: self.bounded(d - 1))
        rules = [
            lambda: self.draw(st.sampled_from(self.poss)), lambda: f"softplus({r()})", lambda: f"exp({b()})",
            lambda: f"sigmoid({r()})", lambda: f"({p()} + {p()})", lambda: f"({p()} * {p()})",
            lambda: f"({p()} / {p()})", lambda: f"(square({b()}) + {self.num(0.1, 1)})",
            lambda: f"(abs({r()}) + {self.num(0.1, 1)})", lambda: f"cosh({b()})",
            lambda: f"sqrt({p()})", lambda: f"{p()} ** {self.draw(st.sampled_from(('2', '3', '0.5', '1.5', '-1')))}",
        ]
        return rules[k]()

    def bounded(self, d=None) -> str:
        d = self.depth if d is None else d
        def r():
            return self.real(max(d - 1, 0))

        k = self.draw(st.integers(0, 4))
        return [lambda: f"tanh({r()})", lambda: f"sigmoid({r()})", lambda: f"clip({r()}, -3, 3)",
                lambda: f"log_sigmoid({r()})", lambda: f"(-softplus({r()}))"][k]()


# --------------------------------------------------------------------------- specs


def _names(draw, k: int, taken: set) -> list[str]:
    out = []
    pool = [n for n in NAME_POOL if n not in taken]
    if len(pool) < k:
        pool += [f"v{j}" for j in range(k - len(pool))]
    for n in draw(st.permutations(pool))[:k]:
        out.append(n)
        taken.add(n)
    return out


@st.composite
def plans(draw, graph_every: int = 0, avoid: tuple = (), min_rank: int = 0) -> Plan:
    taken: set = set(avoid)
    layout = draw(st.sampled_from(("elem", "elem", "class", "class_var", "lead_var")))
    deliberate = draw(st.integers(0, 19)) == 13
    # shapes: elementwise losses over a variadic group (empty allowed), N plus a variadic group
    # before or after it; class losses with the class axis C and a gathered integer label
    if layout == "elem":
        eshape = draw(st.sampled_from((["*S"], ["N"], ["N", "*S"], ["*S", "N"])))
    elif layout == "class":
        eshape = ["N"]
    elif layout == "class_var":
        eshape = ["N", "*D"]
    else:
        eshape = ["*B"]
    n_real = draw(st.integers(1, 3))
    n_pos = draw(st.integers(0, 2))
    n_unit = draw(st.integers(0, 1))
    names = _names(draw, n_real + n_pos + n_unit + 14, taken)
    inputs, reals, poss = {}, [], []
    for k in range(n_real):
        nm = names.pop()
        inputs[nm] = {"dtype": "float", "shape": list(eshape)}
        reals.append(nm)
    for k in range(n_pos):
        nm = names.pop()
        inputs[nm] = {"dtype": "float", "shape": list(eshape), "domain": "(0, inf)"}
        poss.append(nm)
    for k in range(n_unit):
        nm = names.pop()
        inputs[nm] = {"dtype": "float", "shape": list(eshape), "domain": "(0, 1)"}
        poss.append(nm)
    params, flags, ints, fparams = {}, [], [], []
    for kind in draw(st.lists(st.sampled_from(("float", "int", "bool")), max_size=3)):
        nm = names.pop()
        if kind == "float":
            # a strict or an inclusive bound at 0, by the name (not a draw: the fixed-seed
            # budget keeps its examples)
            params[nm] = {"default": round(draw(st.floats(0.25, 2.0)), 2), "gt" if len(nm) % 2 else "min": 0.0}
            poss.append(nm)
            fparams.append(nm)
        elif kind == "int":
            params[nm] = {"default": draw(st.integers(1, 3))}
            ints.append(nm)
        else:
            params[nm] = {"default": draw(st.booleans())}
            flags.append(nm)
    learnable = {}
    if draw(st.integers(0, 3)) == 0:
        # a learnable may not be named like an attribute of the framework's base class (E120)
        nm = next((n for n in reversed(names) if not check_attribute(n)), "learned")
        if nm in names:
            names.remove(nm)
        if draw(st.booleans()):
            learnable[nm] = {"shape": [], "init": 0.5}
            reals.append(nm)
        else:
            learnable[nm] = {"shape": [2], "init": 0.25}
            reals += [f"{nm}[0]", f"{nm}[1]"]
    gen = Gen(draw, reals, poss, flags, ints, depth=draw(st.integers(1, 3)))
    lines = []
    class_terms = []
    if layout != "elem":
        cshape = ["N", "C"] if layout == "class" else (["N", "C", "*D"] if layout == "class_var" else ["*B", "C"])
        z, lab = names.pop(), names.pop()
        inputs[z] = {"dtype": "float", "shape": cshape}
        ignore = draw(st.booleans())
        inputs[lab] = {"dtype": "int", "shape": list(eshape), "domain": "[0, C)"}
        if ignore:
            ig = names.pop()
            params[ig] = {"default": -100}
            inputs[lab]["ignore"] = ig
        cw = None
        if draw(st.booleans()):
            cw = names.pop()
            inputs[cw] = {"dtype": "float", "shape": ["C"], "optional": True}
        zc = Gen(draw, [z], [], flags, ints, depth=1)
        red = draw(st.sampled_from(("sum", "mean", "max", "min", "logsumexp")))
        class_terms = [
            f"-log_softmax({z}, axis=C)[{lab}]",
            f"softmax({z}, axis=C)[{lab}]",
            f"logsumexp({z}, axis=C)",
            f"{red}({zc.real()}, axis=C)",
            f"sum(one_hot({lab}, C) * log_softmax({z}, axis=C), axis=C)",
            f"{z}[{lab}]",
            f"{z}[argmax(stop_gradient({z}), axis=C)]",
            f"where(argmin(stop_gradient({z}), axis=C) == {lab}, 1.0, 0.5)",
        ]
        picked = draw(st.lists(st.sampled_from(class_terms), min_size=1, max_size=3, unique=True))
        if cw is not None:
            picked[0] = f"{cw}[{lab}] * {picked[0]}"
        # the logits come first: their axes (N, C, D) fix the global order that [N, D] follows
        inputs = {z: inputs.pop(z), **inputs}
        bname = names.pop()
        lines.append(f"{bname} = " + " + ".join(picked))
        reals.append(bname)
    # a binding or two, then the loss; the last binding's name comes from the pool as well
    for _ in range(draw(st.integers(0, 2))):
        bname = names.pop()
        if draw(st.booleans()):
            lines.append(f"{bname} = {gen.real()}")
            gen.reals.append(bname)
        else:
            lines.append(f"{bname} = {gen.pos()}")
            gen.poss.append(bname)
    in_use = set(inputs) | set(params) | set(learnable) | {ln.split(" = ")[0] for ln in lines}
    last = names.pop() if draw(st.booleans()) or "loss" in in_use else "loss"
    if last in names:
        names.remove(last)
    body = gen.real()
    # every binding, required float input and learnable must be used (an unused binding is an
    # error, E142; an unused input is valid but wastes the case)
    def used(name: str, text: str) -> bool:
        return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) is not None

    for i, ln in enumerate(lines):
        b = ln.split(" = ")[0]
        if not used(b, " ".join(x.split(" = ", 1)[1] for x in lines[i + 1:]) + " " + body):
            body = f"({body}) + log({b})" if b in gen.poss else f"({body}) + {b}"
    rhs = " ".join(x.split(" = ", 1)[1] for x in lines) + " " + body
    for n in [n for n in inputs if not inputs[n].get("optional") and inputs[n]["dtype"] == "float"] + list(learnable):
        if not used(n, rhs):
            term = f"{n}[0]" if n in learnable and learnable[n]["shape"] else n
            body = f"({body}) + log({term})" if n in gen.poss else f"({body}) + {term}"
    if draw(st.booleans()):
        ow = names.pop()
        inputs[ow] = {"dtype": "float", "shape": list(eshape), "optional": True,
                      "broadcast": True} if draw(st.booleans()) else {"dtype": "float", "shape": list(eshape),
                                                                    "optional": True}
        body = f"{ow} * ({body})"
    lines.append(f"{last} = {body}")
    doc = {"name": "fuzzed", "summary": "A fuzzed loss.", "inputs": inputs, "formula": "\n".join(lines) + "\n"}
    if params:
        doc["params"] = params
    if learnable:
        doc["learnable"] = learnable
    reds = {}
    den = draw(st.sampled_from((None, "pos", "N", "batch")))
    if den == "pos" and poss and poss[0] in inputs:
        reds["mean"] = {"denominator": poss[0]}
    if den == "batch" and "N" in eshape:
        reds["batchmean"] = {"denominator": "N"}
    if reds:
        doc["reductions"] = reds
    if draw(st.booleans()):
        doc["reduction"] = draw(st.sampled_from(("mean", "sum", "none")))
    if deliberate:  # an (unused) parameter with a reserved name: the only problem of the spec
        doc.setdefault("params", {})[draw(st.sampled_from(RESERVED_POOL))] = {"default": 1.0}
    cases = [_draw_case(draw, doc, k, min_rank) for k in range(2)]
    graph = bool(graph_every) and draw(st.integers(0, graph_every - 1)) == 0
    return Plan(doc, cases, deliberate, graph)


def _draw_case(draw, doc: dict, k: int, min_rank: int = 0):
    """Sizes (a variadic group may be empty: rank 0) and values on the 1/64 grid."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    sizes = {"N": (draw(st.integers(1, 3)),), "C": (draw(st.integers(2, 4)),)}
    for g in ("S", "D", "B"):
        rank = draw(st.integers(min_rank, 2))
        sizes[g] = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    inputs = {}
    params = {n: p["default"] for n, p in doc.get("params", {}).items()}
    for name, spec in doc["inputs"].items():
        shape = tuple(n for a in spec["shape"] for n in sizes[a.lstrip("*")])
        if spec.get("optional") and k == 0:
            inputs[name] = None
            continue
        dom = spec.get("domain", "real")
        if spec["dtype"] == "int":
            v = rng.integers(0, sizes["C"][0], size=shape, dtype=np.int64)
            if spec.get("ignore") and v.size > 1:
                v.reshape(-1)[1::3] = params[spec["ignore"]]
        elif dom == "(0, inf)" or spec.get("optional"):
            v = np.maximum(np.round(np.exp(rng.normal(0, 0.7, size=shape)) * GRID), 1) / GRID
        elif dom == "(0, 1)":
            v = np.round(rng.uniform(0.05, 0.95, size=shape) * GRID) / GRID
        else:
            v = np.round(rng.normal(0, 1.5, size=shape) * GRID) / GRID
        inputs[name] = np.asarray(v)
    learn = {n: np.round(rng.normal(0, 0.5, size=tuple(lr["shape"])) * GRID) / GRID
             for n, lr in doc.get("learnable", {}).items()}
    return inputs, params, learn


# --------------------------------------------------------------------------- running


def run_plan(plan: Plan, tmp: Path, runners: dict, index: int) -> Outcome:
    text = yaml.safe_dump(plan.doc, sort_keys=False)
    try:
        spec = spec_from_text(text, "fuzzed.yaml")
        files = render_tree([spec], tuple(all_backends()))
    except SpecError as exc:
        codes = sorted({d.code for d in exc.diagnostics})
        return Outcome("rejected", [d.format() for d in exc.diagnostics][:3], ",".join(codes))
    if plan.deliberate_reject:
        return Outcome("failed", ["a reserved name was accepted"])
    prog = build_program(spec)
    modules = {}
    for rel, src in files.items():
        if rel.endswith("__init__.py"):
            continue
        backend = rel.split("/")[0]
        if backend not in runners:  # its framework is not installed
            continue
        path = tmp / f"fuzz{index}_{backend}.py"
        path.write_text(src, encoding="utf-8")
        modules[backend] = verify.load_module(path, f"losscc_fuzz_{index}_{backend}")
    problems, accuracy, used = [], [], 0
    modes = ("eager", "graph") if plan.graph else ("eager",)
    for k, (inputs, params, learn) in enumerate(plan.cases):
        case = CaseData(f"case{k}", "fuzz", inputs, params, learn, from_reference=True)
        try:
            exp_vals, exp_grads, kinks = verify.expectations(prog, case)
        except Exception as exc:  # noqa: BLE001 - a crash of the reference evaluator is a finding too
            problems.append(f"case{k}: reference evaluator: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        if not all(np.all(np.isfinite(v)) for v in exp_vals.values()):
            continue  # outside the formula's domain at these inputs (e.g. a huge exp): not a test
        used += 1
        reds = list(spec.reduction_names)
        for backend, runner in runners.items():
            for dtype in ("float64", "float32"):
                for mode in modes:
                    if mode == "graph" and dtype == "float32":
                        continue
                    where = f"case{k} {backend}/{dtype}/{mode}"
                    try:
                        vals, grads = runner.run(modules[backend], spec, case, dtype, mode, reds)
                    except Exception as exc:  # noqa: BLE001 - a crash of generated code is the finding
                        problems.append(f"{where}: {compare.error_line(exc)}")
                        continue
                    items = compare._items(prog, case, vals, grads, exp_vals, exp_grads, kinks, reds,
                                           dtype="float32" if dtype == "float32" else None)
                    for quantity, name, got, want, mask, cond, floor, _ in items:
                        c = compare.check(got, want, dtype, quantity, mask, magnitude=compare._magnitude(case),
                                          condition=cond, floor=floor)
                        if c.ok:
                            continue
                        label = f"value ({name})" if quantity == "value" else f"gradient d/d{name}"
                        msg = f"{where}: {label} {c.problem}"
                        if dtype == "float32" and not c.problem.startswith(("is ", "has shape")):
                            # float64 decides correctness; in float32 a branch condition on a
                            # computed value can flip and cancellation costs more digits
                            accuracy.append(msg + " (float32)")
                        elif c.problem.startswith(("relative error", "absolute error")):
                            accuracy.append(msg)
                        else:
                            problems.append(msg)
    if problems:
        return Outcome("failed", problems)
    if accuracy:
        return Outcome("accuracy", accuracy)
    return Outcome("passed" if used else "skipped")


def save(plan: Plan, outcome: Outcome, out: Path, index: int) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{outcome.status}_{index:04d}.yaml"
    head = "".join(f"# {p}\n" for p in outcome.problems[:6])
    path.write_text(head + yaml.safe_dump(plan.doc, sort_keys=False), encoding="utf-8")
    cases = [{"inputs": {n: (None if v is None else v.tolist()) for n, v in c[0].items()},
              "params": c[1], "learnable": {n: np.asarray(v).tolist() for n, v in c[2].items()}}
             for c in plan.cases]
    path.with_suffix(".cases.json").write_text(json.dumps(cases), encoding="utf-8")
    return path


def rename(plan: Plan, mapping: dict) -> Plan:
    """The same spec and cases with names replaced (old -> new) everywhere they occur."""
    def sub(text: str) -> str:
        for old, new in mapping.items():
            text = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w=])", new, text)
        return text

    doc = json.loads(json.dumps(plan.doc))
    doc["inputs"] = {mapping.get(k, k): v for k, v in doc["inputs"].items()}
    for v in doc["inputs"].values():
        if "ignore" in v:
            v["ignore"] = mapping.get(v["ignore"], v["ignore"])
    for key in ("params", "learnable"):
        if key in doc:
            doc[key] = {mapping.get(k, k): v for k, v in doc[key].items()}
    for r in doc.get("reductions", {}).values():
        r["denominator"] = sub(r["denominator"])
    lines = []
    for ln in doc["formula"].splitlines():
        lhs, rhs = ln.split(" = ", 1)
        lines.append(f"{mapping.get(lhs, lhs)} = {sub(rhs)}")
    doc["formula"] = "\n".join(lines) + "\n"
    cases = [({mapping.get(k, k): v for k, v in i.items()}, {mapping.get(k, k): v for k, v in p.items()},
              {mapping.get(k, k): v for k, v in lr.items()}) for i, p, lr in plan.cases]
    return Plan(doc, cases, plan.deliberate_reject, plan.graph)


def triage(plan: Plan, tmp: Path, runners: dict) -> str:
    """For a failing spec: does it pass with every name neutral (n0, n1, ...)?  If so, which
    single original name brings the failure back (a name collision in the generated code)."""
    doc = plan.doc
    names = list(doc["inputs"]) + list(doc.get("params", {})) + list(doc.get("learnable", {}))
    names += [ln.split(" = ")[0] for ln in doc["formula"].splitlines()]
    neutral = {n: f"n{k}" for k, n in enumerate(names)}
    if run_plan(rename(plan, neutral), tmp, runners, 9000).status != "passed":
        return "fails with neutral names too: not a name collision"
    culprits = [n for k, n in enumerate(names)
                if run_plan(rename(plan, {m: v for m, v in neutral.items() if m != n}), tmp, runners,
                            9001 + k).status == "failed"]
    return f"passes with neutral names; fails again with the name(s) {culprits}"


def known_bug(problem: str) -> str | None:
    """The KNOWN_BUGS entry a problem line matches, or None."""
    for name, pattern in KNOWN_BUGS.items():
        if re.search(pattern, problem):
            return name
    return None


@dataclass
class Summary:
    counts: Counter = field(default_factory=Counter)
    codes: Counter = field(default_factory=Counter)
    saved: list = field(default_factory=list)
    failures: list = field(default_factory=list)   # (index, first problem)
    unknown: list = field(default_factory=list)    # (index, problem) matching no KNOWN_BUGS entry
    seconds: float = 0.0

    def text(self) -> str:
        n = sum(v for k, v in self.counts.items() if k != "deliberate")
        rej = self.counts["rejected"]
        lines = [f"fuzz: {n} specs in {self.seconds:.0f}s: " + ", ".join(
            f"{self.counts[k]} {k}" for k in ("passed", "accuracy", "failed", "rejected", "skipped"))]
        lines += [(f"rejection rate {rej / max(n, 1):.0%} (deliberate reserved names: "
                   f"{self.counts['deliberate']}; codes: {dict(self.codes)})")]
        lines += [f"  #{i}: {p}" + ("" if known_bug(p) is None else f"  [known: {known_bug(p)}]")
                  for i, p in self.failures]
        if self.saved:
            lines.append(f"saved: {os.path.dirname(self.saved[0])}")
        return "\n".join(lines)


def fuzz(examples: int, seed: int | None = 0, graph_every: int = 5, out: Path | None = None,
         derandomize: bool = False, keep=("failed", "accuracy", "rejected"), avoid: tuple = (),
         min_rank: int = 0, progress=None) -> Summary:
    """Run `examples` drawn specs; with `derandomize` the sequence is fixed (CI)."""
    if "mindspore" in AVAILABLE:
        import mindspore as ms

        ms.set_context(mode=ms.PYNATIVE_MODE)
    runners = {b: verify.runner(b) for b in AVAILABLE}
    summary = Summary()
    out = out or Path(tempfile.mkdtemp(prefix="losscc-fuzz-"))
    start = time.time()
    counter = [0]
    with tempfile.TemporaryDirectory(prefix="losscc-fuzz-mod-") as tmp:
        @settings(max_examples=examples, deadline=None, database=None, derandomize=derandomize,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(plans(graph_every=graph_every, avoid=tuple(avoid), min_rank=min_rank))
        def one(plan):
            index = counter[0]
            counter[0] += 1
            outcome = run_plan(plan, Path(tmp), runners, index)
            if plan.deliberate_reject and outcome.status == "rejected":
                summary.counts["deliberate"] += 1
            summary.counts[outcome.status] += 1
            if outcome.code:
                summary.codes[outcome.code] += 1
            if outcome.status == "failed" or (outcome.status == "rejected" and not plan.deliberate_reject):
                summary.failures.append((index, (outcome.problems or ["?"])[0][:400]))
                summary.unknown += [(index, p) for p in outcome.problems or ["?"] if known_bug(p) is None]
            if outcome.status in keep and not (outcome.status == "rejected" and plan.deliberate_reject):
                summary.saved.append(str(save(plan, outcome, out, index)))
            if progress is not None:
                progress(f"#{index} {outcome.status} {time.time() - start:.0f}s")

        if seed is not None and not derandomize:
            one = hseed(seed)(one)
        one()
    summary.seconds = time.time() - start
    return summary


def load_saved(path: Path) -> Plan:
    """A spec saved by :func:`save` (YAML plus .cases.json) as a plan, to rerun or triage."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    raw = json.loads(path.with_suffix(".cases.json").read_text(encoding="utf-8"))
    cases = []
    for c in raw:
        ints = {n for n, v in doc["inputs"].items() if v["dtype"] == "int"}
        inputs = {n: (None if v is None else np.asarray(v, dtype=np.int64 if n in ints else float))
                  for n, v in c["inputs"].items()}
        cases.append((inputs, c["params"], {n: np.asarray(v, dtype=float) for n, v in c["learnable"].items()}))
    return Plan(doc, cases)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--graph-every", type=int, default=5, help="run graph mode for about one spec in K (0: never)")
    ap.add_argument("--out", type=Path, default=None, help="where failing specs are saved (default: a tmp dir)")
    ap.add_argument("--progress", action="store_true", help="print each spec's outcome as it comes (stderr)")
    ap.add_argument("--triage", type=Path, nargs="+", metavar="SAVED.yaml",
                    help="rerun saved specs and say whether a name collision causes the failure")
    args = ap.parse_args(argv)
    if args.triage:
        runners = {b: verify.runner(b) for b in AVAILABLE}
        with tempfile.TemporaryDirectory(prefix="losscc-fuzz-mod-") as tmp:
            for k, path in enumerate(args.triage):
                plan = load_saved(path)
                first = run_plan(plan, Path(tmp), runners, 8000 + k)
                verdict = triage(plan, Path(tmp), runners) if first.status == "failed" else ""
                print(f"{path}: {first.status}; {verdict}\n  {(first.problems or [''])[0][:300]}")
        return 0
    progress = (lambda line: print(line, file=sys.stderr, flush=True)) if args.progress else None
    summary = fuzz(args.examples, args.seed, args.graph_every, args.out, progress=progress)
    print(summary.text())
    return 1 if summary.counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
