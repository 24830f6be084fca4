"""Build a spec from SymPy expressions in Python instead of YAML.

The expressions are printed back into the formula language and go through exactly the
same loader, validation and compiler as a YAML spec, so both paths give the same code::

    import sympy as sp
    from losscc import api

    x, y = sp.symbols("input target")
    spec = api.spec_from_sympy(
        name="mse", summary="Mean squared error.",
        inputs={"input": {"dtype": "float", "shape": ["*S"]},
                "target": {"dtype": "float", "shape": ["*S"]}},
        formula=[("loss", (x - y) ** 2)],
    )

Tensor operators: :func:`softmax`, :func:`log_softmax`, :func:`logsumexp`, :func:`sum`,
:func:`mean`, :func:`amax`, :func:`gather` (``x[label]``), :func:`one_hot`,
:func:`where`, :func:`stop_gradient`; elementwise ones are SymPy's plus :func:`sigmoid`,
:func:`softplus`, :func:`log1p`, :func:`expm1`.
"""

from __future__ import annotations

import builtins

import sympy as sp
import yaml

from . import ir
from .formula import formula_text
from .spec import Spec, spec_from_text

sigmoid, softplus, log1p, expm1 = ir.sigmoid, ir.softplus, ir.log1p, ir.expm1


def _axis(axis) -> sp.Symbol:
    return axis if isinstance(axis, sp.Symbol) else sp.Symbol(str(axis))


def softmax(x, axis):
    return ir.Softmax(x, _axis(axis))


def log_softmax(x, axis):
    return ir.LogSoftmax(x, _axis(axis))


def logsumexp(x, axis):
    return ir.LogSumExp(x, _axis(axis))


def sum(x, axis):  # noqa: A001 - the formula language's name
    return ir.ReduceSum(x, _axis(axis))


def mean(x, axis):
    return ir.ReduceMean(x, _axis(axis))


def amax(x, axis):
    return ir.ReduceMax(x, _axis(axis))


def gather(x, label, axis):
    """x[label] along `axis` (the axis the label's domain indexes)."""
    return ir.Gather(x, label, _axis(axis))


def one_hot(label, axis):
    return ir.OneHot(label, _axis(axis))


def stop_gradient(x):
    return ir.StopGradient(x)


def where(cond, a, b):
    return ir.piecewise((a, cond), (b, True))


def spec_from_sympy(name: str, summary: str, inputs: dict, formula, params: dict | None = None,
                    learnable: dict | None = None, path: str | None = None, **fields) -> Spec:
    """A validated Spec; `formula` is a list of (name, SymPy expression), the last the loss.
    Other keyword arguments are spec fields (description, reduction, reductions, cases, ...)."""
    bindings = formula.items() if isinstance(formula, dict) else formula
    text = "\n".join(f"{n} = {formula_text(e)}" for n, e in bindings) + "\n"
    doc = {"name": name, "summary": summary, "inputs": inputs}
    if params:
        doc["params"] = params
    if learnable:
        doc["learnable"] = learnable
    doc["formula"] = text
    doc.update(fields)
    yaml_text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=builtins.max(100, len(text) + 20))
    spec = spec_from_text(yaml_text, path or f"<python:{name}>")
    from .parse import build_program

    build_program(spec)  # formula errors now, as SpecError, rather than at compile time
    return spec
