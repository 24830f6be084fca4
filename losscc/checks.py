"""The generated ``_check``: hyperparameters validated in Python before any tensor work.

Each hyperparameter gets a type test and its bounds; ``reduction`` is tested against
the spec's reductions.  Every message names the loss, the parameter, what it must be
and what was received (value and type), e.g.
``huber: delta must be a float >= 0; received: delta='1e-1' (str)``.  A wrong type is
a TypeError, a value outside the bounds or an unknown reduction a ValueError.

Numbers given as strings are refused (not converted); bools are not numbers here;
ints are accepted for float parameters; int parameters accept floats only with an
integral value; a whole number or fraction beyond float's range is refused (it has no
float).  NumPy's scalars are accepted as the Python numbers they stand for, and the
function and the constructor convert the hyperparameters to Python's float, int and bool
after ``_check``.  The tests are Python tests on the arguments, which are constants
when the frameworks compile the code (jit, to_static), so compiled code pays nothing for them.
"""

from __future__ import annotations

from .spec import Param, Spec

# a whole number or fraction beyond float's range (float() would raise OverflowError)
_HUGE = " or (isinstance({n}, numbers.Rational) and not abs({n}) <= 1.7976931348623157e308)"
# numbers.Real and numbers.Integral take NumPy's scalars too (np.float32(0.5), np.int64(-100));
# a bool is Python's or NumPy's (named bool_ in NumPy 1, bool in NumPy 2; no `numbers` class)
_TYPE_TESTS = {
    "float": "isinstance({n}, bool) or not isinstance({n}, numbers.Real)" + _HUGE,
    "int": "isinstance({n}, bool) or not isinstance({n}, numbers.Real)" + _HUGE +
           " or (not isinstance({n}, numbers.Integral) and not float({n}).is_integer())",
    "bool": "type({n}).__name__ not in (\"bool\", \"bool_\")",
}
_ARTICLE = {"float": "a float", "int": "an int", "bool": "a bool"}


def expectation(p: Param) -> str:
    """What a value of `p` must be, in words: 'a float >= 0 and <= 1'."""
    bounds = p.bound_words()
    return " ".join([_ARTICLE[p.kind]] + [" and ".join(bounds)] * bool(bounds))


def _raise(exc: str, loss: str, name: str, must: str) -> str:
    """The raise statement: what is expected, then what was received.  Joined with `+`, not
    as adjacent strings: a graph compiler that re-parses the source text of the formatted
    part (``ms.jit`` does) needs it on one line."""
    # doubled braces are literal here and fields of the generated f-string
    return (f'    raise {exc}("{loss}: {name} must be {must}; received: " + '
            f'f"{name}={{{name}!r}} ({{type({name}).__name__}})")')


def check_lines(spec: Spec) -> list[str]:
    """The body of ``_check(<params>, reduction)``."""
    names = ", ".join(repr(r) for r in spec.reduction_names)
    lines = [
        f"if not isinstance(reduction, str) or reduction not in {tuple(spec.reduction_names)!r}:",
        _raise("ValueError", spec.name, "reduction", f"one of {names}"),
    ]
    for p in spec.params:
        must = expectation(p)
        lines += [f"if {_TYPE_TESTS[p.kind].format(n=p.name)}:", _raise("TypeError", spec.name, p.name, must)]
        tests = [f"{p.name} {b}" for b in p.bound_words()]
        if tests:
            lines += [f"if not ({' and '.join(tests)}):" if len(tests) > 1 else f"if not {tests[0]}:",
                      _raise("ValueError", spec.name, p.name, must)]
    return lines


def convert_lines(spec: Spec) -> list[str]:
    """The lines after ``_check``: each hyperparameter as a Python number (a NumPy scalar is
    no constant a graph compiler takes); one line each, whatever the names' length."""
    return [f"{p.name} = {p.kind}({p.name})" for p in spec.params]  # a kind is its Python type's name


def clip_order_lines(spec: Spec, loss) -> list[str]:
    """A ValueError where a clip's bounds, hyperparameters, come in the wrong order at the
    call (the frameworks disagree there: one raises, others return either bound)."""
    import sympy as sp

    from . import ir

    names = {p.name for p in spec.params if p.kind != "bool"}
    lines, seen = [], set()
    for c in sp.preorder_traversal(loss):
        if not isinstance(c, ir.Clip):
            continue
        lo, hi = c.args[1], c.args[2]
        syms = {s.name for s in (lo.free_symbols | hi.free_symbols)}
        if not syms or not syms <= names or (lo, hi) in seen or not (ir.arithmetic(lo) and ir.arithmetic(hi)):
            continue  # a root or a function of a hyperparameter: SymPy would print math.sqrt(...)
        seen.add((lo, hi))
        lo_c, hi_c = (sp.pycode(b.xreplace({k: sp.Float(k, 17) for k in b.atoms(sp.NumberSymbol)}))
                      for b in (lo, hi))  # pi as a number: the module imports no math
        shown = sorted(syms)
        received = " + \", \" + ".join(f'f"{n}={{{n}!r}}"' for n in shown)
        lines += [f"if not ({lo_c}) <= ({hi_c}):",
                  f'    raise ValueError("{spec.name}: clip bounds need {lo_c} <= {hi_c}; received: " + {received})']
    return lines
