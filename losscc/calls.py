"""Function calls in a formula: the record of the called function (``losscc.functions``)
selects the typing rule, a ``rule_<name>`` method here, that checks the arguments and
builds the record's IR node."""

from __future__ import annotations

import ast

import sympy as sp

from . import functions, ir, limits
from .constants import is_zero_constant, opaque, source
from .errors import did_you_mean
from .functions import Function
from .ttype import Fail, TType
from .yamlread import clip as _clip


class CallRules:
    """v_Call and the typing rules of the functions (a part of the parser's Converter)."""

    def v_Call(self, node, d):
        if not isinstance(node.func, ast.Name):
            raise Fail(node.func, "E202", "only calls of formula functions are allowed")
        fname = node.func.id
        given = [kw.arg for kw in node.keywords]
        for k, kw in enumerate(node.keywords):  # Python refuses both; ast.parse does not
            if kw.arg is None:
                raise Fail(kw, "E202", f"{_clip(fname)}: '**' arguments are not allowed in a formula")
            if kw.arg in given[:k]:
                raise Fail(kw, "E209", f"{_clip(fname)}: keyword '{kw.arg}' given twice")
        records = functions.BY_NAME.get(fname)
        if records is None:
            got = self.spec_call(node, d)  # a spec called as a function (losscc.compose)
            if got is not None:
                return got
            raise Fail(node.func, "E208", f"unknown function '{_clip(fname)}'",
                       did_you_mean(fname, functions.CALLABLE))
        if not records[0].gradient:
            return self.non_differentiable(node, records[0], d)
        if records[0].rule == "rename":
            return self.rule_rename(node, records[0], node.args, node.keywords, d)
        kws = {}
        extra = {k for f in records for k in f.keywords}
        for kw in node.keywords:
            if kw.arg != "axis" and kw.arg not in extra:
                known = ", ".join(f"{k}=" for k in ("axis", *sorted(extra)))
                raise Fail(kw, "E209", f"{fname}: unknown keyword '{kw.arg}' (only {known})")
            kws[kw.arg] = kw.value
        args = node.args
        if any(isinstance(a, ast.Starred) for a in args):
            raise Fail(node, "E202", "'*' arguments are not allowed")
        f = functions.overload(fname, "axis" in kws)
        if f.rule not in ("elementwise", "reduce", "keep", "normalize"):
            if kws and f.rule != "one_hot":
                raise Fail(node, "E209", f"{fname}: takes no axis")
            if len(args) > limits.MAX_CALL_ARGS:  # each becomes a nested call in the generated code
                raise Fail(node, "E104", f"{fname}: {len(args)} arguments exceed the limit 'call_args' "
                                         f"({limits.MAX_CALL_ARGS})")
        return getattr(self, "rule_" + f.rule)(node, f, args, kws, d)

    def arity(self, node, f: Function, args) -> None:
        n = f.nargs
        if len(args) != n:
            raise Fail(node, "E210", f"{f.name} takes {n} argument{'s' if n != 1 else ''}, got {len(args)}")

    # ---------------------------------------------------------------- typing rules
    def rule_elementwise(self, node, f: Function, args, kws, d):
        if kws:
            raise Fail(node, "E209", f"{f.name}: takes no axis")
        self.arity(node, f, args)
        x, t = self.visit(args[0], d)
        self.need_value(args[0], t)
        if f.singular is not None and x.is_number and is_zero_constant(x - f.singular):
            raise Fail(node, "E203", f"{f.name} of a constant that is {f.singular or 'zero'}",
                       "the argument evaluates to it (below 1e-100 at 50 and at 200 digits)")
        return self._t(f.build(x), TType("float", t.axes, grad=t.grad))

    def rule_reduce(self, node, f: Function, args, kws, d, keep=False, build=True):
        self.arity(node, f, args)
        if "axis" not in kws:
            raise Fail(node, "E209", f"{f.name}: needs axis=, e.g. {f.name}(x, axis=C)")
        x, t = self.visit(args[0], d)
        self.need_value(args[0], t)
        ax = self.axis_arg(kws["axis"], t, f.name)
        if ax in self.variadic and not f.variadic_axis:
            raise Fail(kws["axis"], "E218", f"{f.name}: cannot reduce over the variadic group *{ax}")
        rest = t.axes if keep else tuple(a for a in t.axes if a != ax)
        if not build:  # the caller builds (normalize's keywords)
            return x, TType("float", rest, grad=t.grad)
        return self._t(f.build(x, sp.Symbol(ax)), TType("float", rest, grad=t.grad))

    def rule_keep(self, node, f: Function, args, kws, d):
        return self.rule_reduce(node, f, args, kws, d, keep=True)

    def rule_normalize(self, node, f: Function, args, kws, d):
        """normalize(x, axis=C, eps=e): x / max(norm(x, axis=C), e); e a positive constant or
        a parameter (PyTorch's default 1e-12 without it)."""
        eps = kws.pop("eps", None)
        x, t = self.rule_reduce(node, f, args, kws, d, keep=True, build=False)
        ax = sp.Symbol(self.axis_arg(kws["axis"], t, f.name))
        if eps is None:
            return self._t(f.build(x, ax), t)
        e, et = self.visit(eps, d)
        if et.axes or et.dtype != "float" or et.grad or not (e.is_Number or e.free_symbols <= self.param_symbols()):
            raise Fail(eps, "E225", f"{f.name}: eps must be a positive constant or a parameter")
        if e.is_Number and not e > 0:
            raise Fail(eps, "E225", f"{f.name}: eps must be positive, got {e}")
        return self._t(f.build(x, ax, e), t)

    def param_symbols(self) -> set:
        return {self.env[p.name][0] for p in self.spec.params if p.name in self.env}

    def rule_variadic(self, node, f: Function, args, kws, d):
        if len(args) < 2:
            raise Fail(node, "E210", f"{f.name} takes 2 or more arguments, or one with axis=")
        vals = [self.visit(a, d) for a in args]
        for a, (_, t) in zip(args, vals):
            self.need_value(a, t)
        e = f.build(*[v for v, _ in vals])
        return self._t(e, TType("float", self.union(*[t for _, t in vals]), grad=any(t.grad for _, t in vals)))

    def rule_clip(self, node, f: Function, args, kws, d):
        self.arity(node, f, args)
        x, t = self.visit(args[0], d)
        self.need_value(args[0], t)
        lo, lt = self.visit(args[1], d)
        hi, ht = self.visit(args[2], d)
        for a, tt in ((args[1], lt), (args[2], ht)):
            if tt.axes or tt.dtype == "bool":
                raise Fail(a, "E225", "clip bounds must be constants or parameters")
        if lo.is_Number and hi.is_Number and lo > hi:
            raise Fail(node, "E225", "clip: lower bound is above the upper bound")
        defaults = {self.env[p.name][0]: p.default for p in self.spec.params
                    if p.name in self.env and isinstance(p.default, (int, float)) and not isinstance(p.default, bool)}
        at = (lo - hi).xreplace(defaults)
        if at.is_Number and at > 0:
            raise Fail(node, "E225", "clip: with the parameters' defaults the lower bound is above the upper "
                       f"bound ({lo.xreplace(defaults)} > {hi.xreplace(defaults)})")
        return self._t(f.build(x, lo, hi), TType("float", t.axes, grad=t.grad))

    def rule_where(self, node, f: Function, args, kws, d):
        self.arity(node, f, args)
        c, a, b = (self.visit(x, d) for x in args)
        return self._where(node, c, a, b, *args)

    def rule_piecewise(self, node, f: Function, args, kws, d):
        if not args:
            raise Fail(node, "E210", "Piecewise needs (value, condition) pairs")
        pairs = []
        for a in args:
            if not isinstance(a, ast.Tuple) or len(a.elts) != 2:
                raise Fail(a, "E210", "Piecewise arguments are (value, condition) pairs")
            v, vt = self.visit(a.elts[0], d)
            self.need_value(a.elts[0], vt)
            c, ct = self.visit(a.elts[1], d)
            self.need_bool(a.elts[1], ct)
            pairs.append(((v, vt), (c, ct)))
        if pairs[-1][1][0] is not sp.true:
            raise Fail(args[-1], "E226", "the last Piecewise condition must be True (the otherwise branch)")
        t = TType("float", self.union(*[p[0][1] for p in pairs], *[p[1][1] for p in pairs]),
                  grad=any(p[0][1].grad for p in pairs))
        return self._t(sp.Piecewise(*[(v, opaque(c)) for (v, _), (c, _) in pairs], evaluate=False), t)

    def rule_one_hot(self, node, f: Function, args, kws, d):
        if len(args) == 1 and "axis" in kws:
            ax_node = kws["axis"]
        elif len(args) == 2 and not kws:
            ax_node = args[1]
        else:
            raise Fail(node, "E210", "one_hot takes a label and an axis: one_hot(label, C)")
        i, it = self.visit(args[0], d)
        if it.dtype != "int" or not it.axes and not it.index_of:
            raise Fail(args[0], "E221", "one_hot needs an integer input")
        if not isinstance(ax_node, ast.Name) or ax_node.id not in self.axes:
            raise Fail(ax_node, "E217", "one_hot: the axis must be a shape symbol of an input")
        ax = ax_node.id
        if ax in it.axes:
            raise Fail(ax_node, "E218", f"one_hot: the label already has axis {ax}")
        return self._t(f.build(i, sp.Symbol(ax)), TType("float", self.union(it, TType("int", (ax,)))))

    def rule_index(self, node, f: Function, args, kws, d):
        self.arity(node, f, args)
        ax = args[0]
        if not isinstance(ax, ast.Name) or ax.id not in self.axes:
            raise Fail(ax, "E217", "index: the argument must be an axis, such as index(N)",
                       did_you_mean(ax.id, self.axes) if isinstance(ax, ast.Name) else None)
        if ax.id in self.variadic:
            raise Fail(ax, "E218", f"index: *{ax.id} is a variadic group; positions are along one axis")
        return self._t(f.build(sp.Symbol(ax.id)), TType("float", (ax.id,)))

    def rule_rename(self, node, f: Function, args, keywords, d):
        """rename(x, N=M): x on a new axis M of N's size (collected before conversion:
        ``losscc.parse.renamed_axes``)."""
        if len(args) != 1 or len(keywords) != 1 or any(isinstance(a, ast.Starred) for a in args):
            raise Fail(node, "E210", "rename takes a tensor and one axis to rename: rename(x, N=M)")
        kw = keywords[0]
        old, target = kw.arg, kw.value
        if old is None or old not in self.axes or old in self.aliases:
            known = [a for a in self.axes if a not in self.aliases]
            raise Fail(kw, "E217", f"rename: '{_clip(str(old))}' is not an axis of the inputs",
                       did_you_mean(str(old), known))
        if old in self.variadic:
            raise Fail(kw, "E218", f"rename: *{old} is a variadic group; only a single axis can be renamed")
        if not isinstance(target, ast.Name):
            raise Fail(target, "E216", "rename: the new axis must be an upper-case name, such as M")
        new = target.id
        source_of = self.aliases.get(new)
        if source_of is None:
            why = ("an axis of the inputs" if new in self.axes else
                   "the name of an input, parameter or binding" if new in self.env or new in self.later
                   or new in self.failed else "not an axis name (upper case, such as M)")
            raise Fail(target, "E235", f"rename: the new axis '{_clip(new)}' is {why}; it must be a new "
                       "name, which then means an axis of the same size")
        if source_of != old:
            raise Fail(target, "E235", f"rename: axis {new} is already a renamed {source_of}")
        x, t = self.visit(args[0], d)
        if t.dtype != "int" or not t.axes:  # an int tensor (labels) may be renamed too
            self.need_value(args[0], t)
        if old not in t.axes:
            raise Fail(args[0], "E218", f"rename: the argument has no axis '{old}' (its axes: [{', '.join(t.axes)}])")
        if new in t.axes:
            raise Fail(args[0], "E235", f"rename: the argument already has axis {new}")
        between = self.axes[self.axes.index(old) + 1:self.axes.index(new)]
        if any(a in t.axes for a in between):
            other = next(a for a in between if a in t.axes)
            raise Fail(args[0], "E235", f"rename: the argument also has axis {other}, which lies between "
                       f"{old} and {new}; rename a tensor without it")
        axes = self.union(TType("float", tuple(new if a == old else a for a in t.axes)))
        rt = TType(t.dtype if t.dtype == "int" else "float", axes, grad=t.grad, index_of=t.index_of)
        return self._t(f.build(x, sp.Symbol(old), sp.Symbol(new)), rt)

    def rule_stop_gradient(self, node, f: Function, args, kws, d):
        self.arity(node, f, args)
        self.frozen += 1
        try:
            x, t = self.visit(args[0], d)
        finally:
            self.frozen -= 1
        self.need_value(args[0], t)
        return self._t(f.build(x), TType("float", t.axes))

    # ---------------------------------------------------------------- no gradient
    def non_differentiable(self, node, f: Function, d):
        """round floor ceil sign argmax argmin (and the refused sort, topk): allowed only
        where their argument carries no gradient, or inside stop_gradient(...)."""
        fname, args, kws = f.name, node.args, {}
        for kw in node.keywords if f.rule != "refused" else ():
            if kw.arg != "axis" or not f.axis:
                what = f"unknown keyword '{kw.arg}' (only axis=)" if kw.arg != "axis" else "takes no axis"
                raise Fail(kw if kw.arg != "axis" else node, "E209", f"{fname}: {what}")
            kws["axis"] = kw.value
        if any(isinstance(a, ast.Starred) for a in args):
            raise Fail(node, "E202", "'*' arguments are not allowed")
        if f.rule == "refused":
            self.rule_refused(node, f, args, d)
        self.arity(node, f, args)
        x, t = self.visit(args[0], d)
        if t.dtype == "bool":
            self.need_value(args[0], t, f"the argument of {fname}")
        if t.literal:
            self.need_value(args[0], t)
        return getattr(self, "rule_" + f.rule)(node, f, args[0], x, t, kws)

    def rule_refused(self, node, f: Function, args, d):
        if not args:
            raise Fail(node, "E210", f"{f.name} takes a tensor argument")
        x, t = self.visit(args[0], d)
        self.no_gradient(node, f, args[0], x, t)
        raise Fail(node, "E231", f"'{f.name}' is not supported by losscc yet: {f.doc}")

    def rule_arg_extremum(self, node, f: Function, arg, x, t: TType, kws):
        if "axis" not in kws:
            raise Fail(node, "E209", f"{f.name}: needs axis=, e.g. {f.name}(x, axis=C)")
        ax = self.axis_arg(kws["axis"], t, f.name)
        if ax in self.variadic:
            raise Fail(kws["axis"], "E218", f"{f.name}: cannot reduce over the variadic group *{ax}")
        self.no_gradient(node, f, arg, x, t)
        rest = tuple(a for a in t.axes if a != ax)
        return self._t(f.build(x, sp.Symbol(ax)), TType("int", rest, index_of=ax))

    def rule_piecewise_constant(self, node, f: Function, arg, x, t: TType, kws):
        self.no_gradient(node, f, arg, x, t)
        if t.dtype == "int" and not t.axes and f.name != "sign":
            return self._t(x, TType("float"))  # an integer parameter is its own round/floor/ceil
        return self._t(f.build(x), TType("float", t.axes))

    def no_gradient(self, node, f: Function, arg_node, x, t: TType) -> None:
        if not t.grad or self.frozen:
            return
        fname = f.name
        what = source(arg_node)
        sources = [n for n in self.grad_sources(x) if n != what]
        origin = f" (from {', '.join(repr(n) for n in sources)})" if sources else ""
        if f.rule == "refused":
            why = f"losscc refuses '{fname}' on values with a gradient"
            hint = f"'{fname}' is not supported by losscc yet, also under stop_gradient: {f.doc}"
        elif f.rule == "arg_extremum":
            why = f"an index has no derivative, so no gradient flows through '{fname}'"
            hint = f"wrap the argument in stop_gradient: {fname}(stop_gradient({what}), axis=...)"
        else:
            why = f"'{fname}' is piecewise constant (its derivative is 0 or undefined), so no gradient flows through it"
            hint = (f"wrap the argument in stop_gradient: {fname}(stop_gradient({what})); for a straight-through "
                    f"estimator write v + stop_gradient({fname}(v) - v)")
        raise Fail(node, "E230", f"'{fname}' of '{what}', which carries a gradient{origin}: {why}", hint)

    def grad_sources(self, expr) -> list[str]:
        """Float inputs and learnable tensors that `expr` depends on outside stop_gradient."""
        found: set[str] = set()
        seen: set = set()

        def walk(e):
            if e in seen or isinstance(e, ir.StopGradient):
                return
            seen.add(e)
            if isinstance(e, sp.Symbol):
                found.add(e.name)
            for a in e.args:
                walk(a)

        walk(expr)
        order = [i.name for i in self.spec.inputs if i.dtype == "float"] + [lr.name for lr in self.spec.learnable]
        return [n for n in order if n in found]
