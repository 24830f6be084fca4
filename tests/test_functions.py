"""The function registry: every record complete, the stages driven by it, the generated
function list current, and a function added as one record (erf) verified end to end."""

import dataclasses
import inspect
from pathlib import Path

import mpmath
import pytest
import sympy as sp

from losscc import functions, fundocs
from losscc import spec as spec_module
from losscc.backends import all_backends, get
from losscc.calls import CallRules
from losscc.emit import compile_spec
from losscc.formula import FormulaPrinter, formula_text
from losscc.functions import FACTS, FUNCTIONS, LOWERINGS, METHOD, PRINTERS, RULES, Range
from losscc.parse import build_program
from losscc.refeval import Evaluator
from losscc.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
PROBIT = ROOT / "tests/data/specs/probit.yaml"
# rules whose method builds the conditional from the call's pairs (no build of their own)
_BUILT_BY_RULE = ("where", "piecewise")


def _method_along_mro(owner, prefix: str, node: type) -> bool:
    """Whether `owner` or one of losscc's own bases (the evaluator's TensorOps), not a base
    such as SymPy's StrPrinter, handles `node`."""
    own = [k for k in owner.__mro__ if k.__module__.startswith("losscc")]
    return any(prefix + c.__name__ in vars(k) for k in own for c in node.__mro__)


def record_problems(f) -> list[str]:
    """What is missing or wrong in one record; [] when it is complete."""
    out = []
    if not (isinstance(f.name, str) and f.name.isidentifier()):
        out.append("name is not an identifier")
    if not (isinstance(f.signature, str) and f.signature.startswith(f.name + "(")):
        out.append("signature does not start with the name")
    if not (isinstance(f.doc, str) and f.doc.strip()):
        out.append("no doc line")
    if f.rule not in RULES or not hasattr(CallRules, "rule_" + f.rule):
        out.append(f"typing rule {f.rule!r} has no rule_ method")
    if f.section not in dict(fundocs.SECTIONS):
        out.append(f"section {f.section!r} is not in the function list")
    if f.printer not in PRINTERS or f.lowering not in LOWERINGS:
        out.append("unknown printer or lowering")
    if not (f.nargs is None or isinstance(f.nargs, int) and f.nargs >= 1):
        out.append("arity is neither a positive count nor None (two or more)")
    for b in all_backends():
        missing = [k for k in f.ops if k not in b.ops]
        if missing:
            out.append(f"operator(s) {', '.join(missing)} missing in the {b.name} table")
    if f.rule == "refused":
        if f.node is not None or f.build is not None or f.ops:
            out.append("a refused function builds nothing")
        return out
    if f.build is None and f.rule not in _BUILT_BY_RULE:
        out.append("no build")
    if f.expands:
        if f.node is not None or f.reference is not None or f.range is not None:
            out.append("sugar has no node, reference or range facts of its own")
        return out
    if not (isinstance(f.node, type) and issubclass(f.node, sp.Basic)):
        out.append("no IR node")
        return out
    if f.reference is None:
        out.append("no reference evaluation")
    elif f.reference == METHOD:
        if not _method_along_mro(Evaluator, "_eval_", f.node):
            out.append(f"no Evaluator._eval_{f.node.__name__}")
    elif not callable(f.reference):
        out.append("reference is neither an mpmath function nor METHOD")
    if not isinstance(f.range, Range) or any(getattr(f.range, k) not in FACTS for k in ("positive", "nonneg", "bounded")):
        out.append("no range facts")
    if not f.ops:
        out.append("no operator keys")
    if f.printer == "own" and not _method_along_mro(FormulaPrinter, "_print_", f.node):
        out.append(f"no FormulaPrinter._print_{f.node.__name__}")
    if f.lowering == "unary" and f.ops:
        for b in all_backends():
            if b.ops.get(f.ops[0]) is not None and "{x}" not in b.ops[f.ops[0]]:
                out.append(f"unary operator {f.ops[0]} of {b.name} does not take {{x}}")
    if f.reference not in (None, METHOD) and callable(f.reference) and f.rule not in ("elementwise", "piecewise_constant"):
        out.append("an mpmath function serves elementwise functions only")
    return out


def test_every_record_is_complete():
    problems = {f.signature: p for f in FUNCTIONS if (p := record_problems(f))}
    assert problems == {}


def test_an_incomplete_record_is_reported():
    exp = functions.overload("exp", False)
    assert record_problems(exp) == []
    broken = {
        "no doc line": dataclasses.replace(exp, doc=""),
        "no reference evaluation": dataclasses.replace(exp, reference=None),
        "no range facts": dataclasses.replace(exp, range=None),
        "no operator keys": dataclasses.replace(exp, ops=()),
        "missing in the mindspore table": dataclasses.replace(exp, ops=("no_such_op",)),
        "no IR node": dataclasses.replace(exp, node=None),
        "has no rule_ method": dataclasses.replace(exp, rule="no_such_rule"),
        "no build": dataclasses.replace(exp, build=None),
        "no Evaluator._eval_exp": dataclasses.replace(exp, reference=METHOD),
        "no FormulaPrinter._print_exp": dataclasses.replace(exp, printer="own"),
        "sugar has no node": dataclasses.replace(exp, expands="e**x"),
    }
    for want, record in broken.items():
        got = record_problems(record)
        assert any(want in p for p in got), (want, got)


def test_names_and_nodes_are_unique():
    nodes = [f.node for f in FUNCTIONS if f.node is not None]
    assert len(nodes) == len(set(nodes))
    for name, records in functions.BY_NAME.items():
        assert len({f.axis for f in records}) == len(records), name
    assert spec_module.FUNCTION_NAMES == functions.NAMES
    assert "sort" in functions.NAMES and "sort" not in functions.CALLABLE


def test_mpmath_reference_agrees_with_the_ir_node():
    """An elementwise record's mpmath function and its SymPy node give the same numbers."""
    for f in FUNCTIONS:
        if not callable(f.reference) or f.node is None:
            continue
        for x in ("0.3", "-1.7", "2.5"):
            with mpmath.workdps(30):
                want = complex(sp.N(f.node(sp.Rational(x)), 25))
                got = f.reference(mpmath.mpf(x))
            if want.imag:  # outside the real domain (log of a negative number): nan
                assert mpmath.isnan(got), (f.name, x)
            else:
                assert abs(want - complex(got)) <= 1e-20 * max(1, abs(want)), (f.name, x)


def test_spec_doc_function_list_is_current():
    text = (ROOT / "docs/spec.md").read_text(encoding="utf-8")
    assert fundocs.update(text) == text, "run `python -m losscc.fundocs` to regenerate docs/spec.md's list"
    for f in FUNCTIONS:
        assert f"`{f.signature}`" in text


def test_stale_doc_list_is_detected():
    text = (ROOT / "docs/spec.md").read_text(encoding="utf-8")
    stale = text.replace("| `erf(x)` |", "| `erf(z)` |")
    assert stale != text and fundocs.update(stale) == text


def test_registry_drives_each_stage_for_erf():
    """erf is one record plus an operator entry per backend: parse, printing, range facts,
    lowering and the generated code all follow from it."""
    spec = load_spec(PROBIT, str(PROBIT))
    prog = build_program(spec)
    erfs = [e for e in sp.preorder_traversal(prog.loss) if isinstance(e, sp.erf)]
    assert erfs
    assert "erf(" in formula_text(prog.loss)
    assert functions.of_node(erfs[0]).range.bounded == "yes"
    for b in all_backends():
        code = compile_spec(spec, b)
        assert b.ops["erf"].format(x="").split("(")[0] + "(" in code


def test_erf_spec_verifies_against_the_reference(tmp_path):
    from losscc import verify

    spec = load_spec(PROBIT, str(PROBIT))
    cases = verify.collect_cases(spec, ROOT, [], 2, 0)
    for b in all_backends():
        path = tmp_path / f"probit_{b.name}.py"
        path.write_text(compile_spec(spec, b))
        mod = verify.load_module(path, f"probit_registry_{b.name}")
        runner = verify.runner(b.name)
        rows = verify.verify_spec(spec, {b.name: mod}, {b.name: runner}, ("float64",), ("eager",), cases)
        assert rows and all(r.ok for r in rows), [r.failures for r in rows]
    # and a wrong operator for erf fails it
    bad = dataclasses.replace(get("paddle"), ops={**get("paddle").ops, "erf": "paddle.tanh({x})"})
    path = tmp_path / "probit_bad.py"
    path.write_text(compile_spec(spec, bad))
    mod = verify.load_module(path, "probit_registry_bad")
    rows = verify.verify_spec(spec, {"paddle": mod}, {"paddle": verify.runner("paddle")}, ("float64",),
                              ("eager",), cases)
    assert not any(r.ok for r in rows)


def test_unknown_function_suggests_a_registered_one(tmp_path):
    text = PROBIT.read_text().replace("erf(input", "erff(input")
    path = tmp_path / "probit.yaml"
    path.write_text(text)
    from losscc.errors import SpecError

    with pytest.raises(SpecError) as info:
        build_program(load_spec(path, str(path)))
    (d,) = info.value.diagnostics
    assert (d.code, d.message, d.hint) == ("E208", "formula: unknown function 'erff'", "did you mean 'erf'?")


def test_call_rules_are_the_registry_rules():
    """Every typing rule the registry names is a method, and no rule method is unused."""
    methods = {n[len("rule_"):] for n, _ in inspect.getmembers(CallRules, inspect.isfunction) if n.startswith("rule_")}
    assert methods == set(RULES) == {f.rule for f in FUNCTIONS}
