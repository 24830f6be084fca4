"""Sizes read from tensors are right when a dimension is unknown at trace time: Paddle's
to_static with InputSpec([None, ...]), a Paddle static-graph program (where x.shape holds -1)
and MindSpore's jit with dynamic inputs (set_inputs with None), each compiled once and
called with two batch sizes in a row, for every reduction of specs whose reductions read
sizes (batchmean's N, a per-element denominator broadcast to the loss's shape, a weighted
mean) -- compared with the reference."""

from pathlib import Path

import numpy as np
import pytest
from tests.codegen_util import case, modules, spec_of

from losscc.pipeline import build_program
from losscc.spec import load_spec
from losscc.verify import compare, expectations

ms = pytest.importorskip("mindspore")  # both frameworks' own dynamic-shape APIs
paddle = pytest.importorskip("paddle")
InputSpec = paddle.static.InputSpec

ROOT = Path(__file__).resolve().parent.parent
BATCHES = (3, 5)
# spec, sizes of its other axes, inputs left None
SPECS = [("kl_div", {"D": (4,)}, ()), ("nll", {"C": (4,), "D": ()}, ()), ("mse", {"S": (4,)}, ()),
         ("class_weighted", {"C": (4,)}, ())]
# a per-element denominator that is broadcast to the loss's shape: its sum counts the batch
INLINE = {"class_weighted": """
    name: class_weighted
    summary: s.
    inputs:
      input: {dtype: float, shape: [N, C]}
      target: {dtype: float, shape: [N, C]}
      weight: {dtype: float, shape: [N, C], domain: "(0, inf)", broadcast: true}
    formula: |
      loss = weight * (input - target)**2
    reductions:
      wmean: {denominator: weight}
      batchmean: {denominator: N}
"""}


def _spec(name):
    if name in INLINE:
        return spec_of(INLINE[name], name)
    return load_spec(ROOT / "specs" / f"{name}.yaml", f"specs/{name}.yaml")


def _cases(spec, sizes, none):
    cases = [case(spec, {"N": (n,), **sizes}, seed=n, none=none) for n in BATCHES]
    for c in cases:
        if spec.name in INLINE:
            c.inputs["weight"] = c.inputs["weight"][:1]  # one row for the whole batch
    return cases


def _order(spec):
    return [i for i in spec.inputs if not i.optional] + [i for i in spec.inputs if i.optional]


def _dynamic_shape(spec, inp, value):
    """The input's shape with every N axis unknown."""
    shape = list(np.shape(value))
    names = [a.lstrip("*") for a in inp.shape]
    if "N" in names and shape[names.index("N")] != 1:  # N is the first axis when it is there
        shape[names.index("N")] = None
    return shape


def _expected(spec, c, red):
    vals, _, _ = expectations(build_program(spec), c)
    return vals[red]


def _np_dtype(inp):
    return np.int64 if inp.dtype == "int" else np.float64


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return {name: modules(_spec(name), tmp_path_factory.mktemp(name)) for name, _, _ in SPECS}


@pytest.mark.parametrize("name,sizes,none", SPECS, ids=[s[0] for s in SPECS])
def test_paddle_to_static_unknown_batch(name, sizes, none, compiled):
    spec = _spec(name)
    mod = compiled[name]["paddle"]
    cases = _cases(spec, sizes, none)
    for red in spec.reduction_names:
        first = cases[0].inputs
        specs = [InputSpec(_dynamic_shape(spec, i, first[i.name]), "int64" if i.dtype == "int" else "float64")
                 for i in _order(spec) if first[i.name] is not None]
        layer = getattr(mod, spec.class_name)(reduction=red)
        fn = paddle.jit.to_static(layer, input_spec=specs, full_graph=True)
        for c in cases:
            args = [paddle.to_tensor(c.inputs[i.name].astype(_np_dtype(i))) for i in _order(spec)
                    if c.inputs[i.name] is not None]
            ok, err = compare(fn(*args).numpy().astype(float), _expected(spec, c, red), "float64")
            assert ok, (red, c.id, err)


@pytest.mark.parametrize("name,sizes,none", SPECS, ids=[s[0] for s in SPECS])
def test_paddle_static_program_unknown_batch(name, sizes, none, compiled):
    """In a static-graph program an unknown size is -1 in x.shape: it must be read at run time."""
    spec = _spec(name)
    fn = getattr(compiled[name]["paddle"], spec.name)
    cases = _cases(spec, sizes, none)
    paddle.enable_static()
    try:
        for red in spec.reduction_names:
            main, start = paddle.static.Program(), paddle.static.Program()
            with paddle.static.program_guard(main, start):
                first = cases[0].inputs
                feeds = {i.name: paddle.static.data(i.name, _dynamic_shape(spec, i, first[i.name]),
                                                    "int64" if i.dtype == "int" else "float64")
                         for i in _order(spec) if first[i.name] is not None}
                # required inputs by position, optional ones by keyword (a drop-in order may differ)
                out = fn(*[feeds.pop(i.name) for i in spec.inputs if not i.optional], **feeds, reduction=red)
            exe = paddle.static.Executor(paddle.CPUPlace())
            exe.run(start)
            for c in cases:
                feed = {i.name: c.inputs[i.name].astype(_np_dtype(i)) for i in _order(spec)
                        if c.inputs[i.name] is not None}
                got = exe.run(main, feed=feed, fetch_list=[out])[0]
                ok, err = compare(np.asarray(got, dtype=float), _expected(spec, c, red), "float64")
                assert ok, (red, c.id, err)
    finally:
        paddle.disable_static()


@pytest.mark.parametrize("how", ["set_inputs", "dynamic"])
@pytest.mark.parametrize("name,sizes,none", SPECS, ids=[s[0] for s in SPECS])
def test_mindspore_jit_dynamic_batch(name, sizes, none, how, compiled):
    """Inputs declared with an unknown batch (set_inputs), or jit(dynamic=1), which generalises
    the shapes after the first call."""
    spec = _spec(name)
    mod = compiled[name]["mindspore"]
    cases = _cases(spec, sizes, none)
    for red in spec.reduction_names:
        cell = getattr(mod, spec.class_name)(reduction=red)
        first = cases[0].inputs
        if how == "set_inputs":
            cell.set_inputs(*[ms.Tensor(shape=_dynamic_shape(spec, i, first[i.name]),
                                        dtype=ms.int64 if i.dtype == "int" else ms.float64)
                              for i in _order(spec) if first[i.name] is not None])
            fn = ms.jit(cell)
        else:
            fn = ms.jit(cell, dynamic=1)
        for c in cases:
            args = [ms.Tensor(c.inputs[i.name].astype(_np_dtype(i))) for i in _order(spec)
                    if c.inputs[i.name] is not None]
            ok, err = compare(fn(*args).asnumpy().astype(float), _expected(spec, c, red), "float64")
            assert ok, (red, c.id, err)
