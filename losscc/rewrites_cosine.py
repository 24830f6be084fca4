"""Stage 3: the `one-minus-cosine` rewrite (registered in :data:`losscc.rewrites.STABILITY`,
proved in ``tests/test_rewrites.py``), for a cosine written with squared norms
(`sum(x*y) / sqrt(Nx * Ny)`), with `normalize(x, axis)` or with `max(norm(x), eps)`: the
last two divide by max(sqrt(S), e), which is max(S, e**2)**(-1/2)."""

from __future__ import annotations

import sympy as sp

from . import ir
from .parse import type_of


def _root_factor(f):
    """max(sqrt(S), e)**-1 (normalize's and torch's clamped norm) as max(S, e**2)**(-1/2),
    else f."""
    if isinstance(f, sp.Pow) and f.args[1] == -1 and isinstance(f.args[0], sp.Max) and len(f.args[0].args) == 2:
        roots = [a for a in f.args[0].args if isinstance(a, sp.Pow) and a.args[1] == sp.Rational(1, 2)]
        nums = [a for a in f.args[0].args if a.is_Number and a > 0]
        if len(roots) == 1 and len(nums) == 1:
            return sp.Max(roots[0].args[0], nums[0] ** 2, evaluate=False) ** sp.Rational(-1, 2)
    return f


def _factored(term, ctx):
    """-sum(x * y * fx * fy, axis) (normalize inside the sum) as -sum(x * y, axis) * fx * fy,
    the factors constant along the axis; clamped norms as powers -1/2."""
    factors = [_root_factor(f) for f in sp.Mul.make_args(term)]
    out = []
    for f in factors:
        if isinstance(f, ir.ReduceSum) and isinstance(f.args[0], sp.Mul) and ctx.prog is not None:
            axis = f.args[1]
            inner = [_root_factor(g) for g in f.args[0].args]
            const = [g for g in inner if g.has(ir.ReduceSum) and axis.name not in type_of(g, ctx.prog).axes]
            if len(const) == 2:
                rest = [g for g in inner if not any(g is c for c in const)]
                out += [ir.ReduceSum(sp.Mul(*rest), axis), *const]
                continue
        out.append(f)
    return sp.Mul(*out, evaluate=False) if len(out) > 1 else out[0]


def _squared_norm(n, axis):
    """n = sum(x**2, axis), that plus an eps, or max(that, eps) -> (x, the sum)."""
    core = n
    if isinstance(n, (sp.Add, sp.Max)) and len(n.args) == 2:
        sums = [a for a in n.args if isinstance(a, ir.ReduceSum)]
        core = sums[0] if len(sums) == 1 else None
    if isinstance(core, ir.ReduceSum) and core.args[1] == axis:
        sq = core.args[0]
        if isinstance(sq, sp.Pow) and sq.args[1] == 2:
            return sq.args[0], core
    return None


def one_minus_cosine(e, ctx):
    """1 - sum(x*y) / sqrt(Nx * Ny) -> sum((x/sqrt(Nx) - y/sqrt(Ny))**2) / 2 + (Nx - |x|^2) / (2 Nx)
    + (Ny - |y|^2) / (2 Ny), Nx a squared norm |x|^2 (+ eps, or max(|x|^2, eps)).

    An identity for Nx, Ny > 0 (expand the square: |x|^2/Nx + |y|^2/Ny - 2 cos), so the eps
    stays where the spec put it; every term is >= 0, so nothing cancels near cos = 1, where
    1 - cos has an absolute error of an ulp of 1."""
    if not (isinstance(e, sp.Add) and len(e.args) == 2 and sp.S.One in e.args):
        return None
    term = _factored(e.args[0] if e.args[1] == 1 else e.args[1], ctx)
    if not isinstance(term, sp.Mul):
        return None
    dots = [f for f in term.args if isinstance(f, ir.ReduceSum)]
    others = [f for f in term.args if not isinstance(f, ir.ReduceSum)]
    if len(dots) != 1 or sp.S.NegativeOne not in others:
        return None
    bases = []
    for f in others:
        if f == -1:
            continue
        if not (isinstance(f, sp.Pow) and f.args[1] == sp.Rational(-1, 2)):
            return None
        bases += list(f.args[0].args) if isinstance(f.args[0], sp.Mul) else [f.args[0]]
    dot, axis = dots[0].args
    if len(bases) != 2 or not isinstance(dot, sp.Mul) or len(dot.args) != 2:
        return None
    norms = [_squared_norm(b, axis) for b in bases]
    if None in norms:
        return None
    (x, sx), (y, sy) = norms
    if {x, y} != set(dot.args) or x == y:
        return None
    nx, ny = bases
    diff = x * nx ** sp.Rational(-1, 2) - y * ny ** sp.Rational(-1, 2)
    near = ir.ReduceSum(diff ** 2, axis) / 2 + (nx - sx) / (2 * nx) + (ny - sy) / (2 * ny)
    # far from cos = 1 the written form: there the gradient of the squared distance sums
    # terms of size 1 to a small result (a float32 error of 4e-8 in a gradient of 2e-4)
    cos = dots[0] * nx ** sp.Rational(-1, 2) * ny ** sp.Rational(-1, 2)
    far = sp.Mul(-1, cos - 1, evaluate=False)  # 1 - cos, not matched again
    return ir.Where(sp.StrictGreaterThan(cos, sp.Rational(1, 2)), near, far)
