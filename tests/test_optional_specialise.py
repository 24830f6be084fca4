"""The call where every optional input is None is compiled on its own path: the defaults are
substituted into the prepared IR, so it pays no multiply by 1, no filled default tensor and no
broadcast-and-sum for the mean; and it gives what an explicit default-filled tensor gives."""

from pathlib import Path

import numpy as np
import pytest

from losscc import verify
from losscc.backends import get, names
from losscc.cases import _declared_shape, random_cases
from losscc.pipeline import prepare
from losscc.spec import load_spec
from tests.backend_util import BACKENDS

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted(p.stem for p in (ROOT / "specs").glob("*.yaml"))


def _spec(name):
    return load_spec(ROOT / "specs" / f"{name}.yaml", f"specs/{name}.yaml")


OPTIONAL = [n for n in SPECS if any(i.optional for i in _spec(n).inputs)]


def _source(backend, name):
    return (ROOT / "generated" / backend / f"{name}.py").read_text(encoding="utf-8")


def _branches(text, test):
    """The None path and the general path of the generated function (4-space body level)."""
    lines = text.splitlines()
    start = lines.index(next(ln for ln in lines if ln.startswith(f"    if {test}:")))
    end = lines.index("    else:", start)
    stop = next(k for k in range(end + 1, len(lines)) if not lines[k].startswith("        "))
    return "\n".join(lines[start + 1:end]), "\n".join(lines[end + 1:stop])


def test_every_spec_with_an_optional_input_is_specialised():
    assert {"mse", "huber", "l1", "bce", "bce_with_logits", "nll", "cross_entropy"} <= set(OPTIONAL)
    for name in SPECS:
        spec = _spec(name)
        none = prepare(spec).none
        opt = tuple(i.name for i in spec.inputs if i.optional)
        assert (none.inputs if none else ()) == opt, name
        test = " and ".join(f"{n} is None" for n in opt)
        for backend in names():
            assert (f"    if {test}:" in _source(backend, name)) == bool(opt), (name, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["mse", "huber"])
def test_none_path_is_the_hand_written_one(name, backend):
    none, general = _branches(_source(backend, name), "weight is None")
    assert "full((), 1.0" not in none and "broadcast_to" not in none
    assert "weight" not in none
    # the plain mean: the backend's mean_all (MindSpore divides the sum by the element count)
    mean_all = get(backend).op("mean_all", x="loss")
    assert f"result = {mean_all}" in none
    assert "weight * " in general
    if name == "mse":  # the weighted mean stays on the general path
        shape = get(backend).op("shape", x="loss")
        b = get(backend)
        assert b.op("sum_all", x=b.op("broadcast_to", x="weight", shape=shape)) in general
    # one optional input: the general path has it, so no default is filled in anywhere
    assert "full((), 1.0" not in _source(backend, name)


def test_masked_mean_counts_the_positions_kept():
    for backend in names():
        none, general = _branches(_source(backend, "nll"), "weight is None")
        b = get(backend)
        assert f"result = {b.op('sum_all', x='loss')} / " in none
        assert b.op("sum_all", x=b.op("cast", x="valid", dtype="dtype")) in none
        assert "take(weight" not in none and "gather(ops.reshape(weight" not in none


def test_several_optional_inputs_specialise_only_all_none():
    for backend in names():
        text = _source(backend, "bce_with_logits")
        none, general = _branches(text, "weight is None and pos_weight is None")
        assert "weight" not in none
        # either one may still be None on the general path
        assert "if weight is None:" in general and "if pos_weight is None:" in general


def _explicit(spec, case):
    """The same case with every optional input given as a tensor of its default."""
    inputs = dict(case.inputs)
    for inp in spec.inputs:
        if inp.optional:
            inputs[inp.name] = np.full(_declared_shape(spec, inp.name, case.inputs), inp.default)
    return type(case)(case.id, case.source, inputs, dict(case.params), dict(case.learnable))


def _run(backend, name, spec, case, mode="eager"):
    mod = verify.load_module(ROOT / "generated" / backend / f"{name}.py", f"optional_{backend}_{name}")
    runner = verify.runner(backend)
    return runner.run(mod, spec, case, "float64", mode, spec.reduction_names)


def _assert_same(a, b):
    (va, ga), (vb, gb) = a, b
    assert va.keys() == vb.keys() and ga.keys() == gb.keys()
    for k in va:
        np.testing.assert_allclose(va[k], vb[k], rtol=1e-12, atol=1e-14, err_msg=f"value, reduction={k}")
    for k in ga:
        np.testing.assert_allclose(ga[k], gb[k], rtol=1e-12, atol=1e-14, err_msg=f"gradient of {k}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", OPTIONAL)
def test_none_equals_an_explicit_default_tensor(name, backend):
    spec = _spec(name)
    for case in random_cases(spec, 3, seed=11)[::2]:  # the even cases leave optional inputs None
        assert all(case.inputs[i.name] is None for i in spec.inputs if i.optional)
        _assert_same(_run(backend, name, spec, case), _run(backend, name, spec, _explicit(spec, case)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_of_several_optional_inputs_none(backend):
    """bce_with_logits with only one of weight, pos_weight given takes the general path."""
    spec = _spec("bce_with_logits")
    case = random_cases(spec, 1, seed=5)[0]
    full = _explicit(spec, case)
    reference = _run(backend, "bce_with_logits", spec, full)
    for missing in ("weight", "pos_weight"):
        inputs = dict(full.inputs, **{missing: None})
        part = type(case)(case.id, case.source, inputs, dict(case.params), dict(case.learnable))
        _assert_same(_run(backend, "bce_with_logits", spec, part), reference)


@pytest.mark.parametrize("backend", BACKENDS)
def test_none_path_under_graph_mode(backend):
    spec = _spec("mse")
    case = random_cases(spec, 1, seed=2)[0]
    _assert_same(_run(backend, "mse", spec, case, "graph"), _run(backend, "mse", spec, _explicit(spec, case)))
