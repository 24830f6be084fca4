"""Drop-in use: the spec's ``dropin:`` field and the signatures and entry checks it implies.

A spec declares, per backend, the built-ins it stands in for and how they are called:
the positional order of the function's and the constructor's arguments, extra keyword
names (the library's), and class aliases.  From that this module derives the generated
function's signature, the constructor's parameters, the lines that resolve aliases and
turn a number given for a ``scalar`` input into a tensor, and the input checks every
generated function makes (lists, dtypes, ranks: Python tests on ``.dtype`` and
``len(.shape)``, constants under the frameworks' jit).  Pure: spec in, strings out;
``docs/spec.md`` ("Drop-in use") describes the field.
"""

from __future__ import annotations

import builtins
import keyword
import re
from dataclasses import dataclass

from .errors import did_you_mean
from .specnames import attribute, framework_names

DROPIN_FIELDS = ("replaces", "classes", "function", "init", "aliases", "unbatched")
IGNORED = "name"          # the keyword some libraries add to every loss; accepted and ignored
_CLASS = re.compile(r"[A-Z][A-Za-z0-9]*\Z")
_IDENT = re.compile(r"[a-z_][a-z0-9_]*\Z")


@dataclass(frozen=True)
class DropIn:
    backend: str
    replaces: tuple[str, ...] = ()            # the built-ins' qualified names (documentation)
    classes: tuple[str, ...] = ()             # extra names of the class, e.g. KLDivLoss
    function: tuple[str, ...] = ()            # positional order of the function (empty: the default)
    init: tuple[str, ...] = ()                # positional order of the constructor (empty: the default)
    aliases: tuple[tuple[str, str], ...] = ()  # (argument, the library's keyword for it)
    unbatched: bool = False                   # a 0-D input is one element of the leading axis


# --------------------------------------------------------------------------- loading


def parse(r, node, spec_name: str, inputs: list, params: list, learnable: list, backends: tuple[str, ...]):
    """The ``dropin:`` mapping (a YAML node) into DropIn values; problems go to the reader `r`."""
    top = r.mapping(node, "dropin", backends)
    out = []
    in_names = [i.name for i in inputs]
    required = [i.name for i in inputs if not i.optional]
    p_names = [p.name for p in params]
    taken = set(in_names) | set(p_names) | {lr.name for lr in learnable} | {"reduction"}
    class_name = "".join(part.capitalize() for part in spec_name.split("_") if part)
    for backend, sub in top.items():
        where = f"dropin.{backend}"
        fields = r.mapping(sub, where, DROPIN_FIELDS)
        got = {}
        for key in ("replaces", "classes", "function", "init"):
            if key in fields:
                v = fields[key].plain()
                if not isinstance(v, list) or not all(isinstance(x, str) and len(x) <= 100 for x in v):
                    r.err(fields[key], "E112", f"{where}.{key}: expected a list of names")
                    continue
                if len(set(v)) != len(v):
                    r.err(fields[key], "E128", f"{where}.{key}: a name appears twice")
                    continue
                got[key] = tuple(v)
        for c in got.get("classes", ()):
            if not _CLASS.match(c) or c == class_name:
                r.err(fields["classes"], "E128", f"{where}.classes: '{c}' is not a class name "
                      f"(CamelCase, other than {class_name})")
            elif hasattr(builtins, c) or c in framework_names():
                # `ValueError = Focal` at module level would turn the module's own input checks
                # into calls of the loss class
                r.err(fields["classes"], "E128", f"{where}.classes: '{c}' is a name the generated module "
                      "uses (a Python builtin or a framework import); choose another")
        ignored_ok = IGNORED not in taken

        def check_args(key, allowed, what):
            for k, a in enumerate(got.get(key, ())):
                if a == IGNORED and ignored_ok:
                    continue
                if a not in allowed:
                    r.err(fields[key].value[k], "E128", f"{where}.{key}: '{a}' is not {what}",
                          did_you_mean(a, list(allowed)))
                    return False
            return True

        fn = got.get("function", ())
        if fn:
            if learnable:
                r.err(fields["function"], "E128", f"{where}.function: a spec with learnable tensors keeps the default signature")
            elif check_args("function", in_names + p_names + ["reduction"], "an input, a parameter, 'reduction' or 'name'"):
                lead = list(fn[:len(required)])
                if lead != required:
                    r.err(fields["function"], "E128", f"{where}.function: must start with the required inputs in "
                          f"their order ({', '.join(required)})", "the class's call and verify pass them by position")
        optional = [i.name for i in inputs if i.optional]
        if check_args("init", p_names + optional + ["reduction"], "a parameter, an optional input, 'reduction' or 'name'"):
            from .specnames import class_attributes

            for k, a in enumerate(got.get("init", ())):
                if a in optional and a in class_attributes():
                    r.err(fields["init"].value[k], "E128", f"{where}.init: '{a}' is an attribute of the class's "
                          "framework base; the class cannot store it")
        aliases = []
        if "aliases" in fields:
            m = fields["aliases"].plain()
            if not isinstance(m, dict) or not all(isinstance(v, str) for v in m.values()):
                r.err(fields["aliases"], "E112", f"{where}.aliases: expected a mapping of names")
                m = {}
            from .specnames import check_identifier

            seen = set(taken) | {IGNORED}
            for arg, alias in m.items():
                at = fields["aliases"].value[arg]
                if arg not in in_names + p_names:
                    r.err(at, "E128", f"{where}.aliases: '{arg}' is not an input or a parameter",
                          did_you_mean(arg, in_names + p_names))
                elif (not _IDENT.match(alias) or keyword.iskeyword(alias) or alias in seen or len(alias) > 40
                      or check_identifier(alias)):
                    r.err(at, "E128", f"{where}.aliases: '{alias}' cannot name {arg} "
                          "(not an identifier a spec may use, or the name of another argument)")
                else:
                    seen.add(alias)
                    aliases.append((arg, alias))
        unbatched = False
        if "unbatched" in fields:
            unbatched = bool(r.boolean(fields["unbatched"], f"{where}.unbatched"))
            lead = _leading_axis(inputs)
            if unbatched and lead is None:
                r.err(fields["unbatched"], "E128", f"{where}.unbatched: the first required float input must "
                      "start with a fixed axis followed by a variadic group, such as [N, *D]")
                unbatched = False
        out.append(DropIn(backend, got.get("replaces", ()), got.get("classes", ()), fn,
                          got.get("init", ()), tuple(aliases), unbatched))
    return out


def _leading_axis(inputs) -> str | None:
    """The axis a 0-D call stands for: the first required float input's [N, *D] axis N."""
    first = next((i for i in inputs if i.dtype == "float" and not i.optional), None)
    if first is None or len(first.shape) != 2 or first.shape[0].startswith("*") or not first.shape[1].startswith("*"):
        return None
    return first.shape[0]


def read_dropin(r, top: dict, spec_name: str, inputs, params, learnable) -> tuple[DropIn, ...]:
    """The ``dropin`` section of a spec's top-level mapping (``()`` when absent)."""
    if "dropin" not in top:
        return ()
    from . import backends

    return tuple(parse(r, top["dropin"], spec_name, inputs, params, learnable, backends.names()))


def of(spec, backend: str) -> DropIn:
    for d in getattr(spec, "dropin", ()):
        if d.backend == backend:
            return d
    return DropIn(backend)


# --------------------------------------------------------------------------- signatures


def _default(spec, name: str) -> str:
    if name == "reduction":
        return f"reduction={spec.default_reduction!r}"
    if name == IGNORED and name not in {i.name for i in spec.inputs} | {p.name for p in spec.params}:
        return f"{IGNORED}=None"
    for p in spec.params:
        if p.name == name:
            return f"{name}={p.default!r}"
    return f"{name}=None"


def late_required(spec, d: DropIn) -> list[str]:
    """Required inputs that get a default of None because an earlier one has an alias, or
    because an optional input comes before them in ``inputs:`` (the class's call keeps that
    order, and a parameter without a default cannot follow one with a default)."""
    aliased = {a for a, _ in d.aliases}
    required = [i.name for i in spec.inputs if not i.optional]
    for k, n in enumerate(required):
        if n in aliased:
            return required[k:]
    if not (d.function or d.aliases):
        return []  # the class's call takes the required inputs first (forward_params)
    first_optional = next((k for k, i in enumerate(spec.inputs) if i.optional), len(spec.inputs))
    return [i.name for i in spec.inputs[first_optional:] if not i.optional]


def signature(spec, backend: str) -> list[str]:
    """The generated function's parameters: the declared positional order, the rest, then
    the library's alias keywords (keyword-only)."""
    d = of(spec, backend)
    if not d.function:
        sig = [i.name for i in spec.inputs if not i.optional]
        sig += [lr.name for lr in spec.learnable]
        sig += [f"{i.name}=None" for i in spec.inputs if i.optional]
        sig.append("*")
        sig += [f"{p.name}={p.default!r}" for p in spec.params]
        sig.append(f"reduction={spec.default_reduction!r}")
        return sig + [f"{alias}=None" for _, alias in d.aliases]
    late = set(late_required(spec, d))
    required = {i.name for i in spec.inputs if not i.optional}
    sig = [n if n in required and n not in late else _default(spec, n) for n in d.function]
    rest = [i.name for i in spec.inputs if i.optional] + [p.name for p in spec.params] + ["reduction"]
    rest = [n for n in rest if n not in d.function]
    # the rest follow by position too: one framework's static-graph tracer turns a keyword-only
    # parameter that the body reassigns (an input cast to float32) into an undefined placeholder
    # (docs/spec.md, "Drop-in use")
    sig += [_default(spec, n) for n in rest]
    kw = [f"{alias}=None" for _, alias in d.aliases]
    return sig + (["*"] + kw if kw else [])


def init_params(spec, backend: str, dtype_default: str | None) -> list[str]:
    """The constructor's parameters: the declared positional order, then the rest keyword-only."""
    d = of(spec, backend)
    names = [p.name for p in spec.params] + ["reduction"]
    names += [n for n in ctor_inputs(spec, backend) if n not in names]
    if not d.init:
        out = [_default(spec, n) for n in names]
    else:
        out = [_default(spec, n) for n in d.init]
        rest = [n for n in names if n not in d.init]
        if rest or dtype_default:
            out.append("*")
        out += [_default(spec, n) for n in rest]
    if dtype_default:
        out.append(f"dtype={dtype_default}")
    extra = [f"{alias}=None" for arg, alias in d.aliases if arg in names]
    if extra and "*" not in out:
        out.append("*")
    return out + extra


def init_alias_lines(spec, backend: str) -> list[str]:
    """Lines at the top of the constructor: a library keyword given replaces the argument."""
    d = of(spec, backend)
    names = {p.name for p in spec.params} | set(ctor_inputs(spec, backend))
    out = []
    for arg, alias in d.aliases:
        if arg in names:
            out += [f"if {alias} is not None:", f"    {arg} = {alias}"]
    return out


def ctor_inputs(spec, backend: str) -> list[str]:
    """Optional inputs the constructor takes too (``BCELoss(weight)``); the call's wins."""
    d = of(spec, backend)
    return [i.name for i in spec.inputs if i.optional and i.name in d.init]


def _input_aliases(spec, d: DropIn) -> list[str]:
    inputs = {i.name for i in spec.inputs}
    return [alias for arg, alias in d.aliases if arg in inputs]


def forward_params(spec, backend: str) -> list[str]:
    """The class's call: the inputs in the order of ``inputs:`` (a spec without drop-in
    signatures: the required ones first, as in the function), then the library's keywords
    for them (``loss(input=x, label=y)``), keyword-only and passed on to the function, which
    resolves them."""
    d = of(spec, backend)
    late = set(late_required(spec, d))
    ordered = spec.inputs if d.function or d.aliases else sorted(spec.inputs, key=lambda i: i.optional)
    out = [i.name if not i.optional and i.name not in late else f"{i.name}=None" for i in ordered]
    kw = [f"{alias}=None" for alias in _input_aliases(spec, d)]
    return out + (["*"] + kw if kw else [])


def call_args(spec, backend: str) -> list[str]:
    """The class's call of its function: required inputs by position, the rest by keyword."""
    call = [i.name for i in spec.inputs if not i.optional]
    call += [f"self.{lr.name}" for lr in spec.learnable]
    call += [f"{i.name}={i.name}" for i in spec.inputs if i.optional]
    call += [f"{p.name}=self.{attribute(p.name, backend)}" for p in spec.params] + ["reduction=self.reduction"]
    return call + [f"{alias}={alias}" for alias in _input_aliases(spec, of(spec, backend))]


# --------------------------------------------------------------------------- entry code


def alias_lines(spec, backend: str) -> list[str]:
    """Lines at the top of the function: a library keyword given replaces the argument."""
    d = of(spec, backend)
    out = []
    for arg, alias in d.aliases:
        out += [f"if {alias} is not None:", f"    {arg} = {alias}"]
    for n in late_required(spec, d):
        out += [f"if {n} is None:",
                f"    raise TypeError(\"{spec.name}() missing required argument '{n}'\")"]
    return out


def scalar_lines(spec, backend) -> list[str]:
    """A number given for a ``scalar`` input becomes a tensor of its shape (the same value everywhere)."""
    out = []
    first = next((i for i in spec.inputs if i.dtype == "float" and not i.optional), None)
    for inp in spec.inputs:
        if not getattr(inp, "scalar", False) or first is None:
            continue
        shape = " + ".join(_fill_shape(spec, a, backend) for a in inp.shape) or "()"
        full = backend.op("full", shape=shape, value=f"float({inp.name})", dtype=backend.op("dtype_of", x=first.name))
        out += [f"if isinstance({inp.name}, (int, float)) and not isinstance({inp.name}, bool):",
                f"    {inp.name} = {full}"]
    return out


def _fill_shape(spec, axis: str, backend) -> str:
    """A tuple expression of axis's sizes, read from the first required input that has it
    (specinputs checks there is one): a group is a slice, an axis after a group counts from
    the end."""
    src = next(i for i in spec.inputs if not i.optional and axis in i.shape)
    decl, j = list(src.shape), list(src.shape).index(axis)
    shape = backend.op("shape", x=src.name)
    group = next((k for k, a in enumerate(decl) if a.startswith("*")), None)
    after = len(decl) - j - 1
    if axis.startswith("*"):
        return f"tuple({shape}[{j}:{f'len({shape}) - {after}' if after else ''}])"
    index = j - len(decl) if group is not None and group < j else j
    return f"({shape}[{index}],)"


def _integer_set(inp) -> bool:
    d = inp.domain
    return d.is_set and all(float(v).is_integer() for v in d.values)


def input_check_params(spec) -> list[str]:
    return [i.name for i in spec.inputs]


FLOATS, INTS = "_FLOATS", "_INTS"   # module constants of the generated code


def input_constants(spec, backend) -> list[str]:
    """The dtype tuples ``_check_inputs`` compares with."""
    return [f"{FLOATS} = {backend.op('float_dtypes')}", f"{INTS} = {backend.op('int_dtypes')}"]


def input_checks(spec, backend) -> list[str]:
    return _input_checks(spec, _leading_axis(spec.inputs) if of(spec, backend.name).unbatched else None)


def _input_checks(spec, lead: str | None) -> list[str]:
    """The body of ``_check_inputs``: a list or number is a TypeError, a dtype or rank a ValueError."""
    out = []
    seen_shapes: dict[tuple, str] = {}

    def fail(cond: str, pad: str, name: str, must: str, received: str, error: str = "ValueError") -> None:
        out.append(f"{pad}if {cond}:")
        out.append(f"{pad}    raise {error}(\"{spec.name}: {name} must be {must}; received: \" + f\"{received}\")")

    for inp in spec.inputs:
        n = inp.name
        scalar = getattr(inp, "scalar", False)
        pad = ""   # one flat `if` per check (a static-graph tracer mishandles one nested in `if x is not None`)
        given = f"{n} is not None and " if inp.optional else ""
        kind = "a float" if inp.dtype == "float" else "an int"
        numbers = "(list, tuple)" if scalar else "(list, tuple, int, float)"
        what = f"{kind} tensor" + (" or a number" if scalar else "")
        fail(f"isinstance({n}, {numbers})", pad, n, what, f"{{type({n}).__name__}}", "TypeError")
        guard = given + (f"not isinstance({n}, (int, float)) and " if scalar else "")
        if inp.dtype == "float":
            allowed = FLOATS if not _integer_set(inp) else f"{FLOATS} + {INTS}"
            kinds = "float" if not _integer_set(inp) else "float, int32 or int64"
            fail(f"{guard}{n}.dtype not in {allowed}", pad, n, f"a {kinds} tensor", f"{{{n}.dtype}}")
        else:
            fail(f"{guard}{n}.dtype not in {INTS}", pad, n, "an int32 or int64 tensor", f"{{{n}.dtype}}")
        if not inp.broadcast:
            fixed = len([a for a in inp.shape if not a.startswith("*")])
            variadic = any(a.startswith("*") for a in inp.shape)
            axes = spec.shape_text(inp)
            if variadic and fixed:
                zero = " and len({n}.shape) != 0".format(n=n) if lead is not None and inp.shape[0] == lead else ""
                fail(f"{guard}len({n}.shape) < {fixed}{zero}", pad, n, f"of shape {axes}" + (" or 0-D" if zero else ""),
                     f"rank {{len({n}.shape)}}")
            elif not variadic:
                fail(f"{guard}len({n}.shape) != {fixed}", pad, n, f"of shape {axes}",
                     f"rank {{len({n}.shape)}}")
            star = next((k for k, a in enumerate(inp.shape) if a.startswith("*")), len(inp.shape))
            for k, a in enumerate(inp.shape):
                size = spec.sizes.get(a)
                if size is not None:  # after the rank check, so the position exists
                    at = k if k < star else k - len(inp.shape)
                    fail(f"{guard}{n}.shape[{at}] != {size}", pad, n, f"of shape {axes}",
                         f"size {{{n}.shape[{at}]}} on axis {a}")
            other = seen_shapes.get(inp.shape)
            if other is not None and variadic and not inp.optional:
                fail(f"len({n}.shape) != len({other}.shape)", pad, n, f"of the rank of {other}",
                     f"ranks {{len({n}.shape)}} and {{len({other}.shape)}}")
            if not inp.optional:
                seen_shapes.setdefault(inp.shape, n)
    return out


def cast_lines(spec, backend) -> list[str]:
    """An int tensor given for a float input with an integer set domain ({-1, 1}) is cast."""
    first = next((i for i in spec.inputs if i.dtype == "float" and not i.optional), None)
    out = []
    for inp in spec.inputs:
        if inp.dtype == "float" and _integer_set(inp) and first is not None and inp is not first:
            cast = backend.op("cast", x=inp.name, dtype=backend.op("dtype_of", x=first.name))
            given = f"{inp.name} is not None and " if inp.optional else ""
            out += [f"if {given}{inp.name}.dtype in {INTS}:", f"    {inp.name} = {cast}"]
    return out


def unbatched_flag(spec) -> str:
    """The local that says a 0-D call was made (a name no spec argument has)."""
    taken = {i.name for i in spec.inputs} | {p.name for p in spec.params} | {lr.name for lr in spec.learnable}
    taken |= {b.name for b in spec.bindings}  # the lowering may name a local after a binding
    name, k = "unbatched", 1
    while name in taken:
        name, k = f"unbatched_{k}", k + 1
    return name


def unbatched_inputs(spec, backend) -> tuple:
    """The inputs a 0-D call reshapes to [1] (those led by the leading axis); () when the
    backend's drop-in is not ``unbatched``."""
    lead = _leading_axis(spec.inputs) if of(spec, backend.name).unbatched else None
    if lead is None:
        return ()
    return tuple(i for i in spec.inputs if i.shape and i.shape[0] == lead and not i.broadcast)


def unbatched_lines(spec, backend) -> list[str]:
    """A 0-D call is computed as shape [1] (every input with the leading axis reshaped)."""
    reshaped = unbatched_inputs(spec, backend)
    if not reshaped:
        return []
    first = next(i for i in spec.inputs if i.dtype == "float" and not i.optional)
    flag = unbatched_flag(spec)
    out = [f"{flag} = len({first.name}.shape) == 0",
           f"if {flag}:  # a 0-D call is one element: computed as [1], returned 0-D"]
    for inp in reshaped:
        line = f"{inp.name} = {backend.op('reshape', x=inp.name, shape='(1,)')}"
        out += [f"    if {inp.name} is not None:", f"        {line}"] if inp.optional else [f"    {line}"]
    return out


def unbatched_restore(spec, backend, restore: str | None, result: str) -> str | None:
    """The function's final value with a 0-D call's result made 0-D again."""
    if not unbatched_inputs(spec, backend):
        return restore
    value = restore or result
    shaped = backend.op("reshape", x=value, shape="()")
    return f"{shaped} if {unbatched_flag(spec)} else " + (f"({value})" if " if " in value else value)
