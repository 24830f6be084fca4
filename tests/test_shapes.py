"""Variadic shape groups (*S) in every position -- leading, middle, trailing, alone -- with no,
one and two axes: shape inference, reductions over the group (over no axes: the identity),
means' denominators and reduction="none" reshapes, compared with the reference in both
backends (values and gradients of every reduction)."""

from pathlib import Path

import numpy as np
import pytest
from tests.codegen_util import case, check, modules, spec_of

from losscc.backends import get, names
from losscc.emit import compile_spec
from losscc.errors import SpecError
from losscc.parse import build_program
from losscc.spec import load_spec
from losscc.verify import expectations

ROOT = Path(__file__).resolve().parent.parent
GROUPS = [(), (2,), (2, 3)]

SPECS = {
    # a per-sample loss over a trailing group: sum over it, batchmean divides by N
    "trailing_sum": """
        name: trailing_sum
        summary: s.
        inputs:
          input: {dtype: float, shape: [N, "*S"]}
          target: {dtype: float, shape: [N, "*S"]}
        formula: |
          loss = sum((input - target)**2, axis=S)
        reductions:
          batchmean: {denominator: N}
    """,
    "trailing_mean": """
        name: trailing_mean
        summary: s.
        inputs:
          input: {dtype: float, shape: [N, "*S"]}
          target: {dtype: float, shape: [N, "*S"]}
        formula: |
          loss = mean(abs(input - target) + (input - target)**2, axis=S)
    """,
    # leading batch axes: a per-row loss over D, a per-row weighted mean
    "leading": """
        name: leading
        summary: s.
        inputs:
          input: {dtype: float, shape: ["*B", D]}
          target: {dtype: float, shape: ["*B", D]}
          weight: {dtype: float, shape: ["*B"], domain: "(0, inf)"}
        formula: |
          loss = weight * log(sum(exp(input - target), axis=D))
        reductions:
          wmean: {denominator: weight}
    """,
    # a middle group between two named axes, reduced away, and kept (none has shape [N, *S])
    "middle_reduced": """
        name: middle_reduced
        summary: s.
        inputs:
          input: {dtype: float, shape: [N, "*S", C]}
          target: {dtype: float, shape: [N, "*S", C]}
        formula: |
          loss = mean(sum((input - target)**2, axis=C), axis=S)
        reductions:
          batchmean: {denominator: N}
    """,
    "middle_kept": """
        name: middle_kept
        summary: s.
        inputs:
          input: {dtype: float, shape: [N, "*S", C]}
          target: {dtype: float, shape: [N, C]}
        formula: |
          loss = logsumexp(input * target, axis=C) - sum(input, axis=C) / 3
        reductions:
          per_c: {denominator: C}
    """,
    # the group alone: with no axes the inputs are 0-D
    "alone": """
        name: alone
        summary: s.
        inputs:
          input: {dtype: float, shape: ["*S"]}
          target: {dtype: float, shape: ["*S"]}
          weight: {dtype: float, shape: ["*S"], optional: true, default: 1.0}
        formula: |
          loss = weight * (sqrt(1 + (input - target)**2) - 1)
        reductions:
          wmean: {denominator: weight}
    """,
}


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: f"{len(g)}axes")
@pytest.mark.parametrize("name", sorted(SPECS))
def test_group_positions_match_reference(name, group, tmp_path):
    spec = spec_of(SPECS[name], name)
    mods = modules(spec, tmp_path)
    sizes = {"N": (3,), "C": (4,), "D": (3,), "S": group, "B": group}
    cases = [case(spec, sizes, seed=len(group))]
    if any(i.optional for i in spec.inputs):
        cases.append(case(spec, sizes, seed=7, none=("weight",)))
    check(spec, mods, cases)


@pytest.mark.parametrize("backend", names())
def test_reduction_over_a_group_is_guarded_for_no_axes(backend):
    """axis=() reduces every axis in both frameworks: the code must not pass an empty group."""
    src = compile_spec(spec_of(SPECS["trailing_sum"]), get(backend))
    line = [ln for ln in src.splitlines() if ln.startswith("    loss = ")][-1]
    assert line.rstrip().endswith("if S else t"), line


def test_group_size_is_assigned_before_use(tmp_path):
    """A trailing group's size is read when only its length is needed (no NameError)."""
    spec = spec_of(SPECS["trailing_mean"])
    for backend in names():
        src = compile_spec(spec, get(backend))
        body = src[src.index("def trailing_mean("):]
        assert body.index("    S = ") < body.index("len(S)")


# ---------------------------------------------------------------- sizes only optional inputs give

OPTIONAL_SIZE = {
    # C is read from weight on the general path only; the all-None path does not need it
    "one": """
        name: opt_size
        summary: s.
        inputs:
          input: {dtype: float, shape: [N]}
          weight: {dtype: float, shape: [C], optional: true, default: 1.0}
        formula: |
          loss = input**2 * sum(weight, axis=C) / C
    """,
    # with two optional inputs either may be None on the general path: C from the one given
    "two": """
        name: opt_size2
        summary: s.
        inputs:
          input: {dtype: float, shape: [N]}
          w1: {dtype: float, shape: [C], optional: true, default: 1.0}
          w2: {dtype: float, shape: [C], optional: true, default: 1.0}
        formula: |
          loss = input**2 * (sum(w1, axis=C) + 2 * sum(w2 * w2, axis=C)) / C
    """,
}


@pytest.mark.parametrize("name", sorted(OPTIONAL_SIZE))
def test_size_given_only_by_optional_inputs(name, tmp_path):
    spec = spec_of(OPTIONAL_SIZE[name], name)
    mods = modules(spec, tmp_path)
    opt = [i.name for i in spec.inputs if i.optional]
    sizes = {"N": (3,), "C": (4,)}
    nones = [tuple(opt)] + [(n,) for n in opt if len(opt) > 1] + [()]
    cases = []
    for k, none in enumerate(nones):
        c = case(spec, sizes, seed=k, none=none)
        # the reference needs every size: expect what the defaults written out give
        filled = case(spec, sizes, seed=k, none=none)
        for n in none:
            filled.inputs[n] = np.full(sizes["C"], spec.input(n).default)
        vals, grads, _ = expectations(build_program(spec), filled)
        c.expected, c.grads, c.from_reference = vals, grads, False
        cases.append(c)
    check(spec, mods, cases)


def test_size_needed_when_its_only_carrier_is_none_is_refused():
    """With weight None nothing gives C, and the loss needs it: a clear error, not w.shape on None."""
    spec = spec_of("""
        name: opt_size_bad
        summary: s.
        inputs:
          input: {dtype: float, shape: [N]}
          weight: {dtype: float, shape: [C], optional: true, default: 1.0}
        formula: |
          loss = input**2 * sum(weight, axis=C)
    """, "bad")
    for backend in names():
        with pytest.raises(SpecError) as exc:
            compile_spec(spec, get(backend))
        text = str(exc.value)
        assert "[E253]" in text and "axis C" in text and "weight" in text and text.startswith("<bad>:")


@pytest.mark.parametrize("batch", GROUPS, ids=lambda g: f"{len(g)}batch_axes")
def test_cosine_embedding_optional_batch_axes(batch, tmp_path):
    """[*B, D]: an unbatched pair ([D], 0-D target), a batch [N, D], and two batch axes."""
    spec = load_spec(ROOT / "specs" / "cosine_embedding.yaml", "specs/cosine_embedding.yaml")
    check(spec, modules(spec, tmp_path), [case(spec, {"B": batch, "D": (4,)}, seed=len(batch))])
