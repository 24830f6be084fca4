"""Which selects on hyperparameters may stay a Python 0 in the generated code.

A select on a boolean (or int) hyperparameter lowers to a Python conditional,
``0 if flag else t``; a branch that is the number 0 (a term the flag drops) stays the
number, which costs nothing, where every use of the select is a term of a sum that holds a
tensor term besides it (the sum is a tensor either way).  Anywhere else (an operand of a
``where``, a function's argument, the loss itself) the branch must be a tensor of the
select's shape: a `full_like(0, 1)` or an `exp(0)` of a Python number fails.
"""

from __future__ import annotations

import sympy as sp


def _select(e, is_flag) -> bool:
    return isinstance(e, sp.Piecewise) and any(is_flag(p.cond) for p in e.args)


def _solid(t, typeof, is_flag, memo: dict) -> bool:
    """A term that is a tensor whatever the flags: it has axes and is not a number; a
    select all of whose branches are solid, a product or sum with a solid operand."""
    if t in memo:
        return memo[t]
    if t.is_Number or not typeof(t).axes:
        out = False
    elif _select(t, is_flag):
        out = all(_solid(p.expr, typeof, is_flag, memo) for p in t.args)
    elif isinstance(t, (sp.Mul, sp.Add)):
        out = any(_solid(a, typeof, is_flag, memo) for a in t.args)
    else:
        out = True
    memo[t] = out
    return out


def zero_terms(exprs, typeof, is_flag) -> frozenset:
    """The flag selects in `exprs` (the loss, the denominators) whose every use is a term of
    a sum with a solid term besides it; each distinct node is visited once."""
    ok: dict = {}
    memo: dict = {}
    seen: set = set()
    stack = [e for e in exprs if e is not None]
    while stack:
        n = stack.pop()
        if n in seen or n.is_Atom:
            continue
        seen.add(n)
        solid = [a for a in n.args if _solid(a, typeof, is_flag, memo)] if isinstance(n, sp.Add) else []
        for a in n.args:
            if _select(a, is_flag):
                ok[a] = ok.get(a, True) and any(s is not a for s in solid)
            stack.append(a)
    return frozenset(a for a, good in ok.items() if good)
