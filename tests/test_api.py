"""The Python API builds the same spec, and so the same code, as YAML."""

from pathlib import Path

import sympy as sp

from losscc import api
from losscc.backends import all_backends
from losscc.emit import compile_spec
from losscc.errors import SpecError
from losscc.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent


def body(code: str) -> str:
    return code[code.index("\ndef _check"):]


def test_focal_from_sympy_matches_the_yaml_spec():
    logits, label, alpha, gamma, C = sp.symbols("logits label alpha gamma C")
    pt = api.gather(api.softmax(logits, C), label, C)
    spec = api.spec_from_sympy(
        name="focal",
        summary="Multi-class focal loss (Lin et al., 2017) for class imbalance.",
        inputs={"logits": {"dtype": "float", "shape": ["N", "C"], "doc": "Unnormalised class scores."},
                "label": {"dtype": "int", "shape": ["N"], "domain": "[0, C)", "doc": "True class of each row."}},
        params={"alpha": {"default": 0.25, "min": 0, "doc": "Weight of every term."},
                "gamma": {"default": 2.0, "min": 0,
                          "doc": "Focusing parameter; 0 gives alpha times cross-entropy."}},
        formula=[("pt", pt), ("loss", -alpha * (1 - sp.Symbol("pt")) ** gamma * sp.log(sp.Symbol("pt")))],
    )
    yaml_spec = load_spec(ROOT / "specs/focal.yaml", "specs/focal.yaml")
    for backend in all_backends():
        assert body(compile_spec(spec, backend)) == body(compile_spec(yaml_spec, backend))


def test_api_specs_are_validated_like_yaml():
    x = sp.Symbol("x")
    try:
        api.spec_from_sympy(name="bad", summary="s", inputs={"x": {"dtype": "float", "shape": ["N"]}},
                            formula=[("loss", sp.Symbol("nope") * x)])
    except SpecError as exc:
        assert "unknown symbol 'nope'" in str(exc)
    else:
        raise AssertionError("an unknown symbol must be rejected")
