"""Red-team round 14: a case file's int64 tensor of an integer past int64 (NumPy's
OverflowError: an internal error, exit 3, in `docs --check` and `verify`) or of a fraction
(NumPy truncated the label 1.5 to 1 silently); an int parameter past int64 in a case."""

from __future__ import annotations

import json

import pytest

from losscc.cases import load_case_file
from losscc.errors import SpecError
from losscc.spec import spec_from_text

CLASSES = """name: classes
summary: Classes.
inputs:
  logits: {dtype: float, shape: [N, C]}
  label: {dtype: int, shape: [N], domain: "[0, C)", ignore: ignore_index}
params:
  ignore_index: -100
formula: |
  loss = -log_softmax(logits, axis=C)[label]
"""


def _case(label, **params) -> dict:
    return {"id": "ok", "params": params, "expected": {"mean": 1.0},
            "inputs": {"logits": {"dtype": "float64", "data": [[1.0, 2.0, 0.5], [0.0, 0.0, 1.0]]},
                       "label": {"dtype": "int64", "data": label}}}


@pytest.mark.parametrize("case,message", [
    (_case([2, 2**70]), "inputs.label: 1180591620717411303424 is not an int64 value"),
    (_case([2, -2**63 - 1]), "is not an int64 value"),
    (_case([1.5, 0]), "inputs.label: 1.5 is not an int64 value"),
    (_case([2, 0], ignore_index=2**70), "params.ignore_index: an int parameter must fit in int64"),
])
def test_a_case_files_integers_fit_int64(tmp_path, case, message):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"cases": [case]}))
    with pytest.raises(SpecError) as info:
        load_case_file(p, spec_from_text(CLASSES, "classes.yaml"))
    (d,) = info.value.diagnostics
    assert d.code == "E181" and message in d.message, d.format()


def test_a_spec_cases_int_parameter_fits_int64():
    text = CLASSES + ("cases:\n  - inputs: {logits: [[1, 2]], label: [0]}\n"
                      "    params: {ignore_index: 1180591620717411303424}\n    expected: {mean: 1.0}\n")
    with pytest.raises(SpecError) as info:
        spec_from_text(text, "classes.yaml")
    (d,) = info.value.diagnostics
    assert d.code == "E117" and "an int parameter must fit in int64" in d.message, d.format()


def test_int64_ends_and_integral_floats_still_load(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"cases": [_case([2, 0.0], ignore_index=2**63 - 1)]}))
    (c,) = load_case_file(p, spec_from_text(CLASSES, "classes.yaml"))
    assert c.inputs["label"].tolist() == [2, 0] and c.params == {"ignore_index": 2**63 - 1}
