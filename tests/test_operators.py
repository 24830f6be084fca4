"""The operator interface (losscc/backends/operators.py): every backend's table spells exactly
the declared keys with the declared operands, every key is used by the lowering, and every
stated convention at ties and kinks holds numerically in every backend, eager and compiled."""

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from tests.backend_util import BACKENDS

from losscc import verify
from losscc.backends import all_backends, get
from losscc.backends.operators import BASE, OPERATORS, OperatorTableError, fields

ROOT = Path(__file__).resolve().parent.parent
TIES = [(key, k) for key, op in OPERATORS.items() for k in range(len(op.ties))]


@pytest.mark.parametrize("backend", [b.name for b in all_backends()])
def test_table_spells_the_declared_operands(backend):
    b = get(backend)
    for key, spelling in b.ops.items():
        assert set(fields(spelling)) <= set(OPERATORS[key].operands), key
    assert {k for k, op in OPERATORS.items() if not op.optional} <= set(b.ops)
    assert set(b.helpers) <= set(b.ops)


def test_every_declared_operator_is_lowered():
    """No dead key: each operator key is asked for by the lowering (as a string literal)."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "losscc").glob("*.py"))
    unused = [key for key in OPERATORS if not re.search(rf"""["']{key}["']""", source)]
    assert not unused, unused


def test_base_spellings_are_operators():
    assert set(BASE) <= set(OPERATORS)


@pytest.mark.parametrize("change, message", [
    (lambda ops: {**ops, "maximun": "m({x})"}, "backend 'paddle': unknown operator key 'maximun'"),
    (lambda ops: {k: v for k, v in ops.items() if k != "where"}, "backend 'paddle': missing operator key 'where'"),
    (lambda ops: {**ops, "exp": "paddle.exp({y})"}, "backend 'paddle': operator 'exp' reads {y}"),
])
def test_a_table_that_does_not_match_is_refused(change, message):
    good = get("paddle")
    with pytest.raises(OperatorTableError, match=re.escape(message)):
        dataclasses.replace(good, ops=change(dict(good.ops)))


def test_every_stated_convention_has_points_to_check():
    for key, op in OPERATORS.items():
        if op.gradient and not op.gradient.startswith("inf"):
            assert op.ties, key
        for tie in op.ties:
            assert set(tie.tensors) | set(tie.code) <= set(op.operands), key
            assert tie.gradient or tie.value is not None, key


def _probe(backend, key, tie, tmp_path, tag):
    """A module with the backend's imports, the operator's helper and `probe(<tensors>)`."""
    b = get(backend)
    names = list(tie.tensors)
    code = b.op(key, **{n: n for n in names}, **tie.code)
    src = "\n".join(b.imports) + "\n\n\n" + "".join(f"{h}\n\n\n" for h in b.helper_sources(key))
    src += f"def probe({', '.join(names)}):\n    return {code}\n"
    path = tmp_path / f"probe_{tag}.py"
    path.write_text(src, encoding="utf-8")
    return verify.load_module(path, f"losscc_probe_{tag}_{abs(hash(str(tmp_path)))}").probe


# an optional operator is checked in the backends that spell it
SPELLED = [pytest.param(key, k, b.values[0], id=f"{key}{k}-{b.values[0]}", marks=b.marks)
           for key, k in TIES for b in BACKENDS if key in get(b.values[0]).ops]


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("key, k, backend", SPELLED)
def test_convention_at_ties_holds(key, k, backend, mode, tmp_path):
    tie = OPERATORS[key].ties[k]
    fn = _probe(backend, key, tie, tmp_path, f"{backend}_{key}{k}_{mode}")
    arrays = [np.array(v) for v in tie.tensors.values()]
    value, grads = verify.runner(backend).gradient(fn, arrays, "float64", mode)
    if tie.value is not None:
        np.testing.assert_array_equal(value, np.array(tie.value), err_msg=f"{backend} {mode} {key} value")
    for name, g in zip(tie.tensors, grads):
        if name in tie.gradient:
            np.testing.assert_allclose(g, np.array(tie.gradient[name]), rtol=1e-12, atol=1e-300,
                                       err_msg=f"{backend} {mode} d{key}/d{name}")


def test_the_tie_check_tells_conventions_apart(tmp_path):
    """maximum spelled as a select (all to x at a tie) fails the half-and-half convention."""
    backend = BACKENDS[-1].values[0]
    b = get(backend)
    select = b.ops["where"].format(c="{x} >= {y}", x="{x}", y="{y}")
    bad = dataclasses.replace(b, ops={**b.ops, "maximum": select})
    tie = OPERATORS["maximum"].ties[0]
    names = list(tie.tensors)
    src = "\n".join(bad.imports) + f"\n\n\ndef probe({', '.join(names)}):\n    return {bad.op('maximum', x='x', y='y')}\n"
    (tmp_path / "bad_max.py").write_text(src, encoding="utf-8")
    fn = verify.load_module(tmp_path / "bad_max.py", f"losscc_bad_max_{abs(hash(str(tmp_path)))}").probe
    _, grads = verify.runner(backend).gradient(fn, [np.array(v) for v in tie.tensors.values()], "float64", "eager")
    assert not np.allclose(grads[0], tie.gradient["x"])


# ---------------------------------------------------------------- operands safe where they are put

def test_spelling_slots_and_precedence():
    from losscc.operands import ADD, ATOM, analyse, is_atomic

    s = analyse("{x} - lse({x}, {axis}, keepdim={axis})")
    assert s.slots["x"].uses == 2 and not s.slots["x"].bare and s.precedence == ADD
    assert s.slots["axis"].bare
    assert analyse("{x}.sum()").slots["x"] == analyse("{n}").slots["n"] and not analyse("{n}").slots["n"].bare
    assert analyse("f({c}, {x}, ({y}, 1))").precedence == ATOM and all(
        v.bare for v in analyse("f({c}, {x}, ({y}, 1))").slots.values())
    assert [is_atomic(c) for c in ("a", "f(a + b)", "a.b[1]", "(a, b)", "a + b", "-1", "a == b", "(a) + (b)")] == [
        True, True, True, True, False, False, False, False]


ONE_HOT = """
name: onehot_cast
summary: a cast of a comparison, a method-call spelling and a repeated operand
inputs:
  x: {dtype: float, shape: [N, C]}
  label: {dtype: int, shape: [N], domain: "[0, C)"}
formula: |
  loss = sum(one_hot(label, C) * abs(x - 1), axis=C)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_compound_operands_are_parenthesised_or_bound(backend, tmp_path):
    """A table whose cast is a method call and whose abs reads its operand twice outside an
    argument position: the lowering parenthesises the comparison, binds the difference to a
    variable, and the code still computes the loss (values and gradients vs the reference)."""
    from losscc.emit import compile_spec
    from losscc.spec import spec_from_text

    good = get(backend)
    odd = dataclasses.replace(good, ops={
        **good.ops,
        "cast": "{x}.astype({dtype})",
        "abs": good.ops["where"].format(c="{x} >= 0", x="{x}", y="-{x}"),
    }, helpers={k: v for k, v in good.helpers.items() if k != "abs"})
    spec = spec_from_text(ONE_HOT, "<onehot_cast>")
    code = compile_spec(spec, odd)
    line = next(ln for ln in code.splitlines() if "label == " in ln and "def " not in ln)
    assert "(label == " in line and ").astype(" in line, line
    assert "x - 1 >= 0" not in code and "-x - 1" not in code, code
    path = tmp_path / f"onehot_cast_{backend}.py"
    path.write_text(code, encoding="utf-8")
    mod = verify.load_module(path, f"losscc_onehot_cast_{backend}_{abs(hash(str(tmp_path)))}")
    cases = verify.collect_cases(spec, ROOT, [], 2, 0)
    rows = verify.verify_spec(spec, {backend: mod}, {backend: verify.runner(backend)}, ("float64",), ("eager",),
                              cases)
    assert rows and all(r.ok for r in rows), [r.failures for r in rows]
