"""Names are safe by construction: whatever the spec calls its inputs, parameters, bindings,
shape symbols, learnable tensors, reductions and itself, the generated code's own locals,
helpers and framework aliases never collide with them. Each generated module is imported and
called on small inputs in both backends and compared with the reference."""

import re

import pytest
from tests.codegen_util import case, check, modules, spec_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from losscc.backends import all_backends
from losscc.errors import SpecError
from losscc.lower import import_names

ALIASES = sorted(set().union(*(import_names(b) for b in all_backends())))

# the generated code's own names: locals, hints for temporaries, helpers' stems, the class's call
LOCALS = ["half", "in_dtype", "result", "dtype", "t", "t_1", "loss", "branch", "valid", "plain", "total",
          "avg", "lg", "e", "sp", "sig", "picked", "onehot", "frozen", "magnitude", "shape", "check",
          "x", "positive", "dynamic", "jnp", "mint", "np", "input", "target"]
# a learnable tensor is an attribute of the Layer or Cell: not drawn from names the frameworks
# give their own attributes (Paddle's Layer.half)
LEARNABLE = ["in_dtype", "result", "t", "loss", "jnp", "scale"]
# what is refused: a framework alias hides the framework from the function; dtype is the
# learnable classes' constructor argument, valid the ignore mask; None True False are keywords
CANNOT_WORK = set(ALIASES) | {"dtype", "valid", "None", "True", "False"}
AXES = ["N", "C", "D", "S", "F", "T", "B", "Ellipsis", "NotImplemented", "ValueError", "None", "True"]


def _spec_text(name, a, b, w, p, d, lv, red, ax0, ax1, lr=None):
    learn = f"learnable:\n  {lr}: {{shape: [2], init: 0.5}}\n" if lr else ""
    scale = f"{lr}[0] * " if lr else ""
    return f"""
name: {name}
summary: s.
inputs:
  {a}: {{dtype: float, shape: [{ax0}, {ax1}]}}
  {b}: {{dtype: float, shape: [{ax0}, {ax1}]}}
  {w}: {{dtype: float, shape: [{ax0}], optional: true, default: 1.0}}
params:
  {p}: {{default: 0.5, min: 0}}
{learn}formula: |
  {d} = {a} - {b}
  {lv} = {scale}{w} * sigmoid(sum({p} * {d}**2 + softplus({d}), axis={ax1}))
reductions:
  {red}: {{denominator: {ax0}}}
"""


def _run(text, tmp_path, label):
    spec = spec_of(text, label)
    mods = modules(spec, tmp_path)
    sizes = {a.lstrip("*"): (3,) for i in spec.inputs for a in i.shape}
    sizes[spec.inputs[0].shape[1]] = (4,)
    w = spec.inputs[2].name
    check(spec, mods, [case(spec, sizes, seed=1), case(spec, sizes, seed=2, none=(w,))])
    return mods


BASE = dict(name="lx", a="input", b="target", w="weight", p="alpha", d="gap", lv="loss", red="batchmean",
            ax0="N", ax1="C")

EXPLICIT = {
    "param named half": dict(p="half"),
    "binding named half and result": dict(d="half", lv="result"),
    "input named in_dtype": dict(a="in_dtype"),
    "input named dtype's neighbours": dict(a="in_dtype", b="result", w="half"),
    "shape symbol F (paddle.nn.functional's alias)": dict(ax0="F"),
    "shape symbol F reduced": dict(ax1="F"),
    "shape symbols that are builtins": dict(ax0="Ellipsis", ax1="ValueError"),
    "input named like the spec": dict(name="quantile", w="quantile"),
    "required input named like the spec": dict(name="quantile", a="quantile"),
    "input named like a framework elsewhere": dict(a="torch", b="mint"),
    "input named like the paddle helper": dict(name="shape", a="shape"),
    "reduction named like a local": dict(red="result"),
    "learnable named like a local": dict(lr="in_dtype"),
    "temporaries' names taken": dict(a="t", b="t_1", d="loss", lv="branch"),
}


@pytest.mark.parametrize("label", sorted(EXPLICIT))
def test_explicit_names_compile_and_match_reference(label, tmp_path):
    _run(_spec_text(**{**BASE, **EXPLICIT[label]}), tmp_path, label)


def test_class_calls_the_function_when_an_input_shadows_it(tmp_path):
    mods = _run(_spec_text(**{**BASE, "name": "quantile", "w": "quantile"}), tmp_path, "q")
    for mod in mods.values():
        assert mod._quantile is mod.quantile


@pytest.mark.parametrize("field,value,code", [
    ("ax0", "None", "E124"), ("ax1", "True", "E124"), ("ax0", "False", "E124"),
    ("a", "ops", "E120"), ("b", "paddle", "E120"), ("w", "ms", "E120"), ("p", "nn", "E120"),
    ("d", "lambda", "E120"),
])
def test_names_that_cannot_work_are_refused_naming_the_field(field, value, code):
    with pytest.raises(SpecError) as exc:
        spec_of(_spec_text(**{**BASE, field: value}), "bad")
    text = str(exc.value)
    assert f"[{code}]" in text and f"'{value}'" in text and "<bad>:" in text


def test_every_framework_alias_is_refused():
    """Derived from each backend's import lines, not from a list."""
    assert {"ms", "ops", "nn", "paddle", "F"} <= set(ALIASES)
    for alias in ALIASES:
        if not alias.islower():
            continue
        with pytest.raises(SpecError, match="E120"):
            spec_of(_spec_text(**{**BASE, "a": alias}), "bad")


def bad_names(names) -> set:
    return {v for v in names.values() if v in CANNOT_WORK}


def _distinct(draw, pool, n):
    return draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n, unique=True))


@st.composite
def _names(draw):
    # a quarter of the draws may hold a name that cannot work (then it must be refused cleanly)
    bad = draw(st.integers(0, 3)) == 0
    ok = (lambda n: True) if bad else (lambda n: n not in CANNOT_WORK)
    lower = _distinct(draw, [n for n in LOCALS + [a for a in ALIASES if a.islower()] if ok(n)], 7)
    axes = _distinct(draw, [n for n in sorted(set(AXES) | {a for a in ALIASES if a[0].isupper()}) if ok(n)], 2)
    name, a, b, w, p, d, lv = lower
    red = draw(st.sampled_from([n for n in LOCALS + ["batchmean"] if n not in lower and ok(n)]))
    lr = draw(st.sampled_from([None] + [n for n in LEARNABLE if n not in lower and n != red]))
    return dict(name=name, a=a, b=b, w=w, p=p, d=d, lv=lv, red=red, ax0=axes[0], ax1=axes[1], lr=lr)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=_names())
def test_names_drawn_from_generated_code_and_each_other(names, tmp_path_factory):
    """A spec whose every name is a local, helper stem or alias of the generated code, or another
    of its own names, either is refused for a name that cannot work, or compiles to code that
    runs and matches the reference in both backends."""
    try:
        spec_of(_spec_text(**names), "drawn")
    except SpecError as exc:
        # E121: one name given to two things of the spec (a rule of the spec language)
        refused = {m for d in exc.diagnostics if d.code != "E121" for m in re.findall(r"name '(\w+)'|'(\w+)' is a Python", d.message)}
        assert {a or b for a, b in refused} <= CANNOT_WORK, str(exc)
        assert bad_names(names), str(exc)
        return
    _run(_spec_text(**names), tmp_path_factory.mktemp("drawn"), "drawn")


@pytest.mark.parametrize("name", ["half", "train", "parameters", "reduce", "cast"])
def test_learnable_named_like_a_base_attribute_is_refused(name):
    """A learnable is a framework parameter on the class (kept outside the instance dict), so a
    method of the base of that name would be found instead: Paddle's Layer.half, LossBase.reduce."""
    text = _spec_text(**{**BASE, "lr": name})
    with pytest.raises(SpecError) as exc:
        spec_of(text, "bad")
    assert "[E120]" in str(exc.value) and f"learnable: name '{name}'" in str(exc.value)


def test_param_named_like_a_base_attribute_still_works(tmp_path):
    """A hyperparameter is a plain instance attribute (torch's `full=` of gaussian_nll)."""
    _run(_spec_text(**{**BASE, "p": "full"}), tmp_path, "full")


def test_base_attribute_lists_cover_the_frameworks():
    """The static lists in the backend tables hold every public attribute of the real bases."""
    import re

    import mindspore  # noqa: F401  (before paddle)
    import paddle

    from losscc.backends import get

    class Loss(mindspore.nn.LossBase):
        def __init__(self):
            super().__init__("mean")

    public = re.compile(r"[a-z][a-z0-9_]*\Z")
    for backend, obj in (("mindspore", Loss()), ("paddle", paddle.nn.Layer())):
        names = {n for n in dir(obj) if public.match(n)}
        assert names <= get(backend).attributes, sorted(names - get(backend).attributes)
