"""Stage 3: stable rewrites on the symbolic IR, as named, pure rules.

Each :class:`Rewrite` maps one node to an equal, numerically better node (or
returns None).  :func:`optimize` applies a bundle bottom-up to a fixpoint and
records which rule fired where, for ``losscc explain``.  Every rule has an
equivalence test in ``tests/test_rewrites.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sympy as sp

from . import ir


@dataclass(frozen=True)
class Rewrite:
    name: str
    reason: str
    apply: Callable[[sp.Expr], sp.Expr | None]


@dataclass(frozen=True)
class Fired:
    rule: str
    before: sp.Expr
    after: sp.Expr


def _split_add(expr: sp.Add, pred) -> tuple[sp.Expr | None, sp.Expr]:
    """Find a term satisfying pred; return (match-info, rest-of-sum)."""
    for term in expr.args:
        m = pred(term)
        if m is not None:
            rest = sp.Add(*[t for t in expr.args if t is not term])
            return m, rest
    return None, expr


def _neg_of(term, cls):
    """term == -cls(arg) -> arg"""
    if isinstance(term, sp.Mul) and len(term.args) == 2 and term.args[0] == -1 and isinstance(term.args[1], cls):
        return term.args[1].args[0]
    return None


def _softmax_as_exp(e):
    if isinstance(e, ir.Softmax):
        return sp.exp(ir.LogSoftmax(*e.args))
    return None


def _gather_exp(e):
    if isinstance(e, ir.Gather) and isinstance(e.args[0], sp.exp):
        return sp.exp(ir.Gather(e.args[0].args[0], *e.args[1:]))
    return None


def _log_exp(e):
    if isinstance(e, sp.log) and isinstance(e.args[0], sp.exp):
        return e.args[0].args[0]
    return None


def _log_sum_exp(e):
    if isinstance(e, sp.log) and isinstance(e.args[0], ir.ReduceSum) and isinstance(e.args[0].args[0], sp.exp):
        inner = e.args[0]
        return ir.LogSumExp(inner.args[0].args[0], inner.args[1])
    return None


def _log_sigmoid(e):
    if isinstance(e, sp.log) and isinstance(e.args[0], ir.sigmoid):
        return -ir.softplus(-e.args[0].args[0])
    return None


def _one_minus_sigmoid(e):
    if isinstance(e, sp.Add) and sp.S.One in e.args and len(e.args) == 2:
        other = e.args[0] if e.args[1] == 1 else e.args[1]
        x = _neg_of(other, ir.sigmoid)
        if x is not None:
            return ir.sigmoid(-x)
    return None


def _log1p(e):
    if isinstance(e, sp.log) and isinstance(e.args[0], sp.Add) and sp.S.One in e.args[0].args:
        rest = sp.Add(*[t for t in e.args[0].args if t != 1])
        if rest != 0:
            return ir.log1p(rest)
    return None


def _expm1(e):
    if not isinstance(e, sp.Add) or len(e.args) < 2:
        return None
    args = list(e.args)
    if sp.S.NegativeOne in args:
        for t in args:
            if isinstance(t, sp.exp):
                rest = [a for a in args if a is not t and a != -1]
                return sp.Add(ir.expm1(t.args[0]), *rest)
    if sp.S.One in args:
        for t in args:
            x = _neg_of(t, sp.exp)
            if x is not None:
                rest = [a for a in args if a is not t and a != 1]
                return sp.Add(-ir.expm1(x), *rest)
    return None


STABILITY = (
    Rewrite("softmax-as-exp-log-softmax", "softmax(x) = exp(log_softmax(x)), so log and 1 - p stay accurate",
            _softmax_as_exp),
    Rewrite("gather-through-exp", "gathering commutes with exp: exp(y)[i] = exp(y[i])", _gather_exp),
    Rewrite("log-exp", "log(exp(y)) = y", _log_exp),
    Rewrite("logsumexp", "log(sum(exp(x))) overflows; logsumexp subtracts the maximum", _log_sum_exp),
    Rewrite("one-minus-sigmoid", "1 - sigmoid(x) = sigmoid(-x) without cancellation", _one_minus_sigmoid),
    Rewrite("log-sigmoid", "log(sigmoid(x)) = -softplus(-x), finite for large |x|", _log_sigmoid),
    Rewrite("log1p", "log(1 + x) loses x when |x| is small; log1p(x) does not", _log1p),
    Rewrite("expm1", "exp(x) - 1 cancels near 0; expm1(x) does not", _expm1),
)


def optimize(expr: sp.Expr, rules=STABILITY, memo: dict | None = None,
             fired: list[Fired] | None = None) -> sp.Expr:
    """Apply `rules` bottom-up until none fires; memoised, so shared subtrees are visited once."""
    memo = {} if memo is None else memo
    fired = [] if fired is None else fired

    def visit(e, budget=64):
        got = memo.get(e)
        if got is not None:
            return got
        if e.args and not isinstance(e, (sp.Symbol, sp.Number)):
            new_args = tuple(visit(a) for a in e.args)
            cur = e.func(*new_args) if new_args != e.args else e
        else:
            cur = e
        for _ in range(budget):
            for rule in rules:
                out = rule.apply(cur)
                if out is not None and out != cur:
                    fired.append(Fired(rule.name, cur, out))
                    cur = visit(out, budget - 1) if budget > 1 else out
                    break
            else:
                break
        memo[e] = cur
        return cur

    return visit(expr)
