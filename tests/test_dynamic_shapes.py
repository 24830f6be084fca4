"""Sizes read from tensors are right when a dimension is unknown at trace time.

Every spec in specs/ (its inputs and shapes read from the loaded spec) is compiled once with
its batch dimension unknown -- N where the spec has it, else the first dimension of the
first input's leading group -- and called with two batch sizes in a row, every reduction in
the one compiled program, against the reference: in Paddle's to_static with
InputSpec([None, ...]) or in MindSpore's jit with dynamic inputs (set_inputs with None).
To fit the CI budget the two frameworks take the specs in turn (spec k in framework k mod 2);
the specs of the first tests below (kl_div, nll, mse and an inline weighted mean) run in
both, and in a Paddle static-graph program (where x.shape holds -1), and in MindSpore's
jit(dynamic=1).
"""

from pathlib import Path

import numpy as np
import pytest
from tests.codegen_util import case, modules, spec_of

from losscc import verify
from losscc.backends import call_inputs, get
from losscc.emit import compile_spec, find_specs, load_all
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


# --------------------------------------------------------------------------- every spec

ALL = load_all(find_specs([str(ROOT / "specs")]))
FRAMEWORKS = ("paddle", "mindspore")
SIZES = (2, 3)  # the batch sizes of the two calls


def _batch_axis(spec) -> str:
    """N where an input has it, else the first input's first axis (a group's first dimension)."""
    axes = [a.lstrip("*") for i in spec.inputs for a in i.shape]
    return "N" if "N" in axes else axes[0]


def _all_sizes(spec, batch: str, n: int) -> dict:
    """The batch axis of size n (a group: n, 2), the others 3 (a group: 2) or their fixed size."""
    fixed = spec.sizes
    sizes = {}
    for inp in spec.inputs:
        for a in inp.shape:
            name = a.lstrip("*")
            if name in fixed:
                sizes[name] = (fixed[name],)
            elif a.startswith("*"):
                sizes[name] = (n, 2) if name == batch else (2,)
            else:
                sizes[name] = (n,) if name == batch else (3,)
    return sizes


def _batch_dims(spec, inp, batch: str) -> set[int]:
    """The positions of the batch dimension in `inp` (every input given at its full shape)."""
    if batch not in [a.lstrip("*") for a in inp.shape]:
        return set()
    names = [a.lstrip("*") for a in inp.shape]
    j = names.index(batch)
    ranks = [len(_all_sizes(spec, batch, SIZES[0])[a]) for a in names]
    return {sum(ranks[:j])}


def _spec_cases(spec, batch):
    out = []
    for k, n in enumerate(SIZES):
        c = case(spec, _all_sizes(spec, batch, n), seed=10 + k)
        for inp in spec.inputs:  # every third position ignored, the first one counting
            if inp.ignore and inp.shape:
                c.inputs[inp.name].reshape(-1)[1::3] = c.params[inp.ignore]
        c.learnable = out[0].learnable if out else c.learnable  # the module's, for both calls
        out.append(c)
    return out


def _input_shapes(spec, c, batch):
    """(input, shape with the batch dimension None) in the generated function's order."""
    out = []
    for inp, v, _ in call_inputs(spec, c):
        shape = list(np.shape(v))
        for d in _batch_dims(spec, inp, batch):
            shape[d] = None
        out.append((inp, shape))
    return out


class _PdEvery(paddle.nn.Layer):
    """Every reduction of a spec in one program: a list in spec.reduction_names order."""

    def __init__(self, parts, arity: int):
        super().__init__()
        self.parts = paddle.nn.LayerList(parts)
        self.arity = arity

    def forward(self, a0, a1=None, a2=None, a3=None, a4=None, a5=None):  # to_static takes no *args
        args = (a0, a1, a2, a3, a4, a5)[:self.arity]
        out = []
        for p in self.parts:
            out.append(p(*args))
        return out


class _MsEvery(ms.nn.Cell):
    """Every reduction of a spec in one graph: a list in spec.reduction_names order."""

    def __init__(self, parts):
        super().__init__()
        self.parts = ms.nn.CellList(parts)

    def construct(self, *args):
        out = []
        for p in self.parts:
            out.append(p(*args))
        return out


def _plan():
    return [(spec, FRAMEWORKS[k % len(FRAMEWORKS)]) for k, spec in enumerate(ALL)]


@pytest.mark.parametrize("spec,framework", _plan(), ids=lambda v: getattr(v, "name", v))
def test_every_spec_with_an_unknown_batch(spec, framework, tmp_path):
    batch = _batch_axis(spec)
    cases = _spec_cases(spec, batch)
    path = tmp_path / f"{spec.name}.py"
    path.write_text(compile_spec(spec, get(framework)), encoding="utf-8")
    mod = verify.load_module(path, f"losscc_dynamic_{framework}_{spec.name}")
    runner = verify.runner(framework)
    first = cases[0]
    parts = [runner.make(mod, spec, first.params, red, "float64", first.learnable) for red in spec.reduction_names]
    shapes = _input_shapes(spec, first, batch)
    if framework == "paddle":
        specs = [InputSpec(shape, "int64" if inp.dtype == "int" else "float64") for inp, shape in shapes]
        fn = paddle.jit.to_static(_PdEvery(parts, len(specs)), input_spec=specs, full_graph=True)
    else:
        fn = _MsEvery(parts)
        fn.set_inputs(*[ms.Tensor(shape=shape, dtype=ms.int64 if inp.dtype == "int" else ms.float64)
                        for inp, shape in shapes])
        fn = ms.jit(fn)
    for c in cases:
        args, _ = runner.args(spec, c, "float64")
        outs = fn(*args)
        assert len(outs) == len(spec.reduction_names)
        expected, _, _ = expectations(build_program(spec), c)
        for red, got in zip(spec.reduction_names, outs):
            got = got.numpy() if framework == "paddle" else got.asnumpy()
            ok, err = compare(np.asarray(got, dtype=float), expected[red], "float64")
            assert ok, (framework, red, c.id, err)


def test_every_spec_is_checked():
    assert {s.name for s, _ in _plan()} == {p.stem for p in (ROOT / "specs").glob("*.yaml")}
