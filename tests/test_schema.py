"""The JSON Schema of the spec format (losscc/spec.schema.json, `losscc schema`).

It must accept every spec of the repository and the valid specs of the test corpus,
reject unknown fields wherever the loader does, and allow exactly the fields the
loader reads at each level (found by watching the loader, not from a second list).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from losscc import schema as schema_mod
from losscc import spec as spec_mod
from losscc.errors import SpecError

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.yaml"))
ESCAPED = sorted((ROOT / "tests" / "bad_specs" / "escaped").glob("*.yaml"))
UNKNOWN_FIELD_CORPUS = [p for p in sorted((ROOT / "tests" / "bad_specs").glob("*.yaml"))
                        if b"unknown field" in p.read_bytes().split(b"\nname:")[0]]


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML with YAML 1.2 floats (1e-7 is a number), as editors read a spec."""


Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$"),
    list("-+0123456789."),
)


def load(text: str):
    return yaml.load(text, Loader=Yaml12Loader)  # noqa: S506 - a SafeLoader subclass


@pytest.fixture(scope="module")
def validator():
    s = json.loads(schema_mod.shipped())
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(s)


def errors(validator, doc) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def test_shipped_file_is_the_built_schema():
    # losscc/spec.schema.json is written by `python -m losscc.schema`; it must not drift
    assert schema_mod.shipped() == schema_mod.render()
    assert json.loads(schema_mod.render())["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("path", SPECS + ESCAPED, ids=lambda p: p.stem)
def test_schema_accepts_valid_specs(validator, path):
    spec_mod.load_spec(path)  # the loader accepts it too
    assert errors(validator, load(path.read_text(encoding="utf-8"))) == []


def test_spec_corpus_is_not_empty():
    assert len(SPECS) >= 20 and ESCAPED and len(UNKNOWN_FIELD_CORPUS) >= 3


@pytest.mark.parametrize("path", UNKNOWN_FIELD_CORPUS, ids=lambda p: p.stem)
def test_schema_rejects_the_corpus_unknown_fields(validator, path):
    errs = errors(validator, load(path.read_text(encoding="utf-8")))
    assert any("Additional properties are not allowed" in e for e in errs), errs


FOCAL = (ROOT / "specs" / "focal.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize("where, edit", [
    ("top level", lambda d: d.update(formual="loss = 1")),
    ("input", lambda d: d["inputs"]["logits"].update(dtpye="float")),
    ("param", lambda d: d["params"]["gamma"].update(defualt=2.0)),
    ("guards", lambda d: d.update(guards={"epsilon": 1e-7})),
    ("case", lambda d: d["cases"][0].update(expect={"mean": 1.0})),
    ("learnable", lambda d: d.update(learnable={"w": {"shape": [2], "size": 2}})),
])
def test_schema_rejects_unknown_fields(validator, where, edit):
    doc = load(FOCAL)
    assert errors(validator, doc) == []
    edit(doc)
    errs = errors(validator, doc)
    assert any("Additional properties are not allowed" in e for e in errs), (where, errs)
    with pytest.raises(SpecError) as exc:  # the loader agrees
        spec_mod.spec_from_text(yaml.safe_dump(doc, sort_keys=False), "focal.yaml")
    assert any(d.code == "E111" for d in exc.value.diagnostics)


@pytest.mark.parametrize("edit", [
    lambda d: d.pop("formula"),
    lambda d: d["inputs"]["label"].pop("domain"),           # an int input needs a domain
    lambda d: d["inputs"]["logits"].update(dtype="double"),
    lambda d: d["inputs"]["logits"].update(shape=["n"]),     # not a shape symbol
    lambda d: d.update(name="Focal"),
    lambda d: d.update(guards={"eps": 0.5}),
    lambda d: d.update(reductions={"sum": {"denominator": "N"}}),
])
def test_schema_rejects_wrong_values(validator, edit):
    doc = load(FOCAL)
    edit(doc)
    assert errors(validator, doc)
    with pytest.raises(SpecError):
        spec_mod.spec_from_text(yaml.safe_dump(doc, sort_keys=False), "focal.yaml")


# a spec that reaches every mapping the loader checks for unknown fields
EVERY_LEVEL = """\
name: every_level
summary: Touches every field of the format.
description: A test spec.
inputs:
  x: {dtype: float, shape: [N, C], domain: real, doc: x}
  w: {dtype: float, shape: [N, C], optional: true, default: 1.0, broadcast: true, doc: w}
  label: {dtype: int, shape: [N], domain: "[0, C)", ignore: ignore_index, doc: l}
params:
  a: {default: 0.5, min: 0, max: 1, doc: a}
  ignore_index: -100
learnable:
  s: {shape: [], init: 0.0, doc: s}
formula: |
  loss = w * (x - s)**2 * a + where(label == 0, 0.0, 1.0)
reduction: mean
reductions:
  mean: {denominator: w, doc: weighted}
  batchmean: {denominator: N, doc: per sample}
guards: {clip: 50, eps: 1.0e-7, upcast: true}
cases:
  - id: one
    inputs: {x: [[1.0]], label: [0]}
    params: {a: 0.5}
    expected: {sum: 0.5}
    rtol: 1.0e-6
references:
  - file: cases.json
    inputs: {input: x}
    params: {alpha: a}
    cases: [c1]
    reference_gradients: [c1]
"""


def _schema_fields(s: dict, where: str) -> set[str] | None:
    """The properties the schema allows at the loader's mapping `where` (None: no such level)."""
    p, d = s["properties"], s["$defs"]
    table = [
        (r"spec", p),
        (r"inputs\.\w+", d["input"]["properties"]),
        (r"params\.\w+", d["param"]["then"]["properties"]),
        (r"learnable\.\w+", d["learnable"]["properties"]),
        (r"guards", p["guards"]["properties"]),
        (r"reductions\.\w+", p["reductions"]["additionalProperties"]["properties"]),
        (r"cases\[\d+\]", p["cases"]["items"]["properties"]),
        (r"references\[\d+\]", p["references"]["items"]["properties"]),
    ]
    for pattern, props in table:
        if re.fullmatch(pattern, where):
            return set(props)
    return None


def test_schema_fields_equal_what_the_loader_reads(validator, monkeypatch):
    seen: dict[str, tuple[str, ...]] = {}
    original = spec_mod._Reader.mapping

    def spy(self, node, where, allowed):
        seen[where] = tuple(allowed)
        return original(self, node, where, allowed)

    monkeypatch.setattr(spec_mod._Reader, "mapping", spy)
    spec_mod.spec_from_text(EVERY_LEVEL, "every_level.yaml")
    assert errors(validator, load(EVERY_LEVEL)) == []
    s = json.loads(schema_mod.shipped())
    levels = set()
    for where, allowed in seen.items():
        fields = _schema_fields(s, where)
        assert fields is not None, f"the loader checks the fields of '{where}', the schema has no such level"
        assert fields == set(allowed), where
        levels.add(re.sub(r"\[\d+\]|\.\w+$", "", where))
    # every closed level of the schema was reached by the loader above
    assert levels == {"spec", "inputs", "params", "learnable", "guards", "reductions", "cases", "references"}


def test_schema_is_closed_wherever_the_loader_is():
    s = json.loads(schema_mod.shipped())

    def objects(node, path="#"):
        if isinstance(node, dict):
            if "properties" in node:
                yield path, node
            for k, v in node.items():
                if k != "if":  # a condition, not a definition
                    yield from objects(v, f"{path}/{k}")
        elif isinstance(node, list):
            for k, v in enumerate(node):
                yield from objects(v, f"{path}/{k}")

    found = list(objects(s))
    assert len(found) >= 8
    for path, node in found:
        assert node.get("additionalProperties") is False, path


def test_cli_prints_the_schema(tmp_path):
    r = subprocess.run([sys.executable, "-m", "losscc", "schema"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout == schema_mod.shipped()
    assert json.loads(r.stdout)["title"] == "losscc loss spec"


NAMES = ["x", "focal", "a1_b", "_x", "X", "aB", "a-b", "1a", "a b", "é", "", "ab_", "a__b", "N", "C2",
         "*S", "**S", "*s", "Ab9", "*", "NC", "n"]


@pytest.mark.parametrize("pattern, loader", [(schema_mod.IDENT_PATTERN, spec_mod.IDENT),
                                             (schema_mod.AXIS_PATTERN, spec_mod.AXIS)])
def test_name_patterns_agree_with_the_loader(pattern, loader):
    # JSON Schema patterns are unanchored ECMA-262 searches; the loader matches whole names
    for name in NAMES:
        assert (re.search(pattern, name) is not None) == (loader.match(name) is not None), name
