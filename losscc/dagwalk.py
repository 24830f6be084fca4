"""Walks of an expression as the DAG it is.

SymPy's ``free_symbols`` walks an expression as a tree, visiting a shared subtree once per
path to it: exponential in chained bindings (``a2 = sin(a1) * a1``) and worse in their
derivatives, where the product rule shares every factor.  :func:`free_symbols` visits each
distinct node once; a caller that asks about many nodes of one expression passes one `memo`.
"""

from __future__ import annotations

import inspect

import sympy as sp

_TREE_WALK = inspect.getattr_static(sp.Basic, "free_symbols")


def free_symbols(e: sp.Basic, memo: dict | None = None) -> frozenset:
    """``e.free_symbols``, in time linear in e's distinct nodes."""
    memo = {} if memo is None else memo
    stack = [e]
    while stack:
        n = stack[-1]
        if n in memo:
            stack.pop()
            continue
        if n.is_Atom or inspect.getattr_static(type(n), "free_symbols") is not _TREE_WALK:
            memo[n] = frozenset(n.free_symbols)  # a symbol, a number, or a node that binds its own
            stack.pop()
            continue
        todo = [a for a in n.args if a not in memo]
        if todo:
            stack.extend(todo)
            continue
        memo[n] = frozenset().union(*(memo[a] for a in n.args))
        stack.pop()
    return memo[e]


__all__ = ["free_symbols"]
