"""A JSON Schema (draft 2020-12) of the spec format, for editors and other tools.

:func:`build` derives it from the field lists of :mod:`losscc.spec` (the loader stays
the authority: it also checks names, domains, formulas and cross-references, which a
schema cannot); ``losscc/spec.schema.json`` is :func:`render`'s output, shipped with
the package and printed by ``losscc schema``.  Regenerate it with
``python -m losscc.schema > losscc/spec.schema.json``; a test keeps the two equal.

Mappings are closed (``additionalProperties: false``) at every level where the
loader refuses unknown fields (E111).  Numbers follow YAML 1.2, as editors read it
(``1e-7`` is a number; the loader accepts it too).
"""

from __future__ import annotations

import json

from . import limits
from .resources import package_file
from .spec import (BUILTIN_REDUCTIONS, CASE_FIELDS, GUARD_FIELDS, INPUT_FIELDS, LEARNABLE_FIELDS, PARAM_FIELDS,
                   REDUCTION_FIELDS, REFERENCE_FIELDS, REQUIRED_FIELDS, TOP_FIELDS)

FILE_NAME = "spec.schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"

# ECMA-262 regular expressions (what editors run) for spec.IDENT and spec.AXIS;
# tests/test_schema.py checks that they accept the same names as the loader's
IDENT_PATTERN = "^[a-z][a-z0-9_]*$"
AXIS_PATTERN = "^(\\*?[A-Z][A-Za-z0-9]*|[A-Z][A-Za-z0-9]* *= *[0-9]+)$"

_STR = {"type": "string"}
_TEXT = {"type": "string", "maxLength": limits.MAX_TEXT_CHARS}
_NUM = {"type": "number"}
_IDENT = {"type": "string", "pattern": IDENT_PATTERN, "maxLength": limits.MAX_NAME_CHARS}


def _closed(fields: tuple[str, ...], props: dict, required: tuple[str, ...] = (), **extra) -> dict:
    """An object with exactly `fields`; `props` must describe each of them."""
    assert set(props) == set(fields), (sorted(props), fields)
    out = {"type": "object", "additionalProperties": False, "properties": {f: props[f] for f in fields}}
    if required:
        out["required"] = list(required)
    out.update(extra)
    return out


def _named(value: dict, what: str, max_items: int | None = None) -> dict:
    out = {"type": "object", "description": what, "propertyNames": _IDENT, "additionalProperties": value}
    if max_items is not None:
        out["maxProperties"] = max_items
    return out


def _input() -> dict:
    props = {
        "dtype": {"enum": ["float", "int"], "description": "float or int tensor"},
        "shape": {"type": "array", "maxItems": limits.MAX_RANK, "uniqueItems": True,
                  "items": {"type": "string", "pattern": AXIS_PATTERN, "maxLength": limits.MAX_NAME_CHARS + 8},
                  "description": "shape symbols such as [N, C]; *S is any number of axes; K=4 an axis of size 4"},
        "domain": {"type": "string", "maxLength": 200,
                   "description": 'values taken: "[0, C)", "(0, 1)", "[0, inf)", "{-1, 1}" or "real"'},
        "optional": {"type": "boolean", "description": "may be None, meaning `default`"},
        "default": {**_NUM, "description": "the value of an optional input that is None"},
        "ignore": {**_IDENT, "description": "an int parameter: positions equal to it are ignored"},
        "broadcast": {"enum": [True, False, "right", "left"],
                      "description": "true/right: NumPy broadcasting; left: missing trailing axes first"},
        "scalar": {"type": "boolean", "description": "an optional float input that also accepts a number"},
        "doc": _TEXT,
    }
    return _closed(INPUT_FIELDS, props, ("dtype", "shape"),
                   **{"if": {"properties": {"dtype": {"const": "int"}}, "required": ["dtype"]},
                      "then": {"required": ["domain"]}})


def _param() -> dict:
    value = {"type": ["number", "boolean"]}
    props = {"default": {**value, "description": "float, int or true/false: sets the parameter's kind"},
             "min": _NUM, "max": _NUM, "gt": {**_NUM, "description": "strict lower bound"},
             "lt": {**_NUM, "description": "strict upper bound"}, "doc": _TEXT}
    return {"if": {"type": "object"}, "then": _closed(PARAM_FIELDS, props, ("default",)),
            "else": {**value, "description": "shorthand for {default: value}"}}


def _learnable() -> dict:
    props = {"shape": {"type": "array", "maxItems": 1,
                       "items": {"type": "integer", "minimum": 1, "maximum": limits.MAX_LEARNABLE_ELEMENTS},
                       "description": "[] or [K]"},
             "init": {**_NUM, "description": "initial value (0)"}, "doc": _TEXT}
    return _closed(LEARNABLE_FIELDS, props)


def _guards() -> dict:
    props = {"clip": {**_NUM, "exclusiveMinimum": 0, "description": "clip unbounded float inputs to [-c, c]"},
             "eps": {**_NUM, "exclusiveMinimum": 0, "maximum": 0.1,
                     "description": "keep log and division away from 0 where the argument can reach 0"},
             "upcast": {"type": "boolean", "description": "compute float16/bfloat16 in float32 (true)"}}
    return _closed(GUARD_FIELDS, props)


def _reductions() -> dict:
    props = {"denominator": {"type": ["string", "number"], "description": "mean = sum(loss) / sum(denominator)"},
             "doc": _TEXT}
    return {"type": "object", "description": "mean's denominator and extra named reductions",
            "propertyNames": {"anyOf": [{"const": "mean"}, {**_IDENT, "not": {"enum": ["none", "sum"]}}]},
            "additionalProperties": _closed(REDUCTION_FIELDS, props)}


def _cases() -> dict:
    numbers = {"$ref": "#/$defs/numbers"}
    props = {"id": {"type": ["string", "number"]},
             "inputs": {"type": "object", "additionalProperties": {"anyOf": [numbers, {"type": "null"}]}},
             "params": {"type": "object", "additionalProperties": {"type": ["number", "boolean"]}},
             "expected": {"type": "object", "additionalProperties": numbers,
                          "description": "values by reduction: none, mean, sum, ..."},
             "rtol": {**_NUM, "exclusiveMinimum": 0, "exclusiveMaximum": 1}}
    return {"type": "array", "maxItems": limits.MAX_CASES, "items": _closed(CASE_FIELDS, props, ("inputs", "expected"))}


def _references() -> dict:
    names = {"type": "object", "additionalProperties": _STR}
    ids = {"type": "array", "items": _STR}
    props = {"file": {"type": "string", "maxLength": 300, "description": "a case file, relative to the project"},
             "inputs": {**names, "description": "the file's input name -> the spec's"},
             "params": {**names, "description": "the file's parameter name -> the spec's (\"\" drops it)"},
             "cases": {**ids, "description": "the case ids this spec claims (all if absent)"},
             "reference_gradients": ids}
    return {"type": "array", "maxItems": limits.MAX_REFERENCES, "items": _closed(REFERENCE_FIELDS, props, ("file",))}


def _dropin() -> dict:
    from .dropin import DROPIN_FIELDS

    names = {"type": "array", "uniqueItems": True, "items": {"type": "string", "maxLength": 100}}
    props = {"replaces": {**names, "description": "the built-ins this loss stands in for"},
             "classes": {**names, "description": "other names of the class, e.g. HuberLoss"},
             "function": {**names, "description": "positional order of the function's arguments"},
             "init": {**names, "description": "positional order of the constructor's arguments"},
             "aliases": {"type": "object", "additionalProperties": _IDENT,
                         "description": "argument -> the library's keyword for it"},
             "unbatched": {"type": "boolean", "description": "a 0-D call is one element of the leading axis"}}
    one = _closed(DROPIN_FIELDS, props)
    return {"type": "object", "description": "per backend (its name): the built-ins this loss stands in for "
            "(docs/spec.md)", "propertyNames": _IDENT, "additionalProperties": one}


def build() -> dict:
    """The schema as a dict (deterministic key order)."""
    props = {
        "name": {**_IDENT, "description": "snake_case, equal to the file name; the function's name"},
        "summary": {**_TEXT, "description": "one line, the first line of every docstring"},
        "description": {**_TEXT, "description": "a paragraph for the module docstring"},
        "inputs": {**_named({"$ref": "#/$defs/input"}, "tensors, in the positional order of the function",
                            limits.MAX_INPUTS), "minProperties": 1},
        "params": _named({"$ref": "#/$defs/param"}, "hyperparameters: keyword arguments with defaults",
                         limits.MAX_PARAMS),
        "learnable": _named({"$ref": "#/$defs/learnable"}, "trainable tensors"),
        "formula": {"type": "string", "maxLength": limits.MAX_FORMULA_CHARS,
                    "description": "let-bindings `name = expression`, one per line; the last is the loss"},
        "reduction": {"type": "string", "description": "the default reduction (mean)",
                      "examples": list(BUILTIN_REDUCTIONS)},
        "reductions": _reductions(),
        "guards": _guards(),
        "cases": _cases(),
        "references": _references(),
        "dropin": _dropin(),
        "backward": {"enum": ["autograd", "custom", "auto"],
                     "description": "the generated classes' gradient: the framework's autograd, losscc's "
                                    "symbolic backward, or the one measured faster (docs/backward.md)"},
    }
    schema = {"$schema": DIALECT, "title": "losscc loss spec",
              "description": "A loss function for losscc (docs/spec.md)."}
    schema.update(_closed(TOP_FIELDS, props, REQUIRED_FIELDS))
    schema["$defs"] = {
        "input": _input(),
        "param": _param(),
        "learnable": _learnable(),
        "numbers": {"anyOf": [_NUM, {"type": "array", "items": {"$ref": "#/$defs/numbers"}}]},
    }
    return schema


def render() -> str:
    """The schema file's text."""
    return json.dumps(build(), indent=2, ensure_ascii=True) + "\n"


def shipped() -> str:
    """The schema file installed with the package."""
    return package_file(FILE_NAME).read_text(encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover
    import sys

    sys.stdout.write(render())
