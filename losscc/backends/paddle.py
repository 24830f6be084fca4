"""PaddlePaddle: lowering table (``paddle`` and ``paddle.nn.functional``; eager and
``to_static``) and verify's runner.  Paddle is imported by the runner only."""

from ..fusion import Fused
from . import Backend, _freeze, call_inputs

# paddle.logsumexp's CPU kernel costs about 1.5x this composition, forward and backward
_LOGSUMEXP = '''def _logsumexp(x, axis):
    """log(sum(exp(x), axis)), keeping the axis; exact for logits of any size.

    The maximum is shifted out; its gradient is dropped because the result does not depend
    on it (the gradient of x is softmax(x) either way).
    """
    peak = paddle.amax(x, axis=axis, keepdim=True).detach()
    return peak + paddle.log(paddle.sum(paddle.exp(x - peak), axis=axis, keepdim=True))'''

_SIGMOID = '''def _sigmoid(x):
    """1 / (1 + exp(-x)) as 1 - sigmoid(-x) above 0: the native kernel's gradient is
    s (1 - s) of the rounded s, 0 where s rounds to 1 (x beyond about 17 in float32, 37 in
    float64); taken on the side where s is small, the gradient keeps its relative accuracy
    (e^-x at large x). The value is the native one to an ulp."""
    positive = x > 0
    small = F.sigmoid(paddle.where(positive, -x, x))
    return paddle.where(positive, 1 - small, small)'''

_EXPM1 = '''def _expm1(x):
    """exp(x) - 1: the native kernel's gradient is out + 1 of the rounded out, 0 where
    out rounds to -1 (x below about -17 in float32, -37 in float64); below -1 it is
    exp(x) - 1, whose gradient exp(x) keeps its relative accuracy; above, the kernel."""
    return paddle.where(x < -1, paddle.exp(paddle.clip(x, max=-1.0)) - 1, paddle.expm1(x))'''

_TANH = '''def _tanh(x):
    """tanh(x) as +-(1 - 2 sigmoid(-2|x|)) from |x| = 1/2 on: the native kernel's gradient
    is 1 - t**2 of the rounded t, 0 where t rounds to 1 (|x| beyond about 9 in float32, 19
    in float64); with the sigmoid taken where it is small the gradient keeps its relative
    accuracy (4 e^-2|x| at large |x|). Below 1/2 the native kernel, accurate near 0."""
    positive = x > 0
    tail = 1 - 2 * F.sigmoid(2 * paddle.where(positive, -x, x))
    return paddle.where(paddle.abs(x) < 0.5, paddle.tanh(x), paddle.where(positive, tail, -tail))'''

_SOFTPLUS = '''def _softplus(x):
    """log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)): the native kernel computes
    log(1 + exp(x)), which loses the relative accuracy below 0 and the whole value below
    about -37 (float64) / -17 (float32). The gradient is sigmoid(x),
    also at x = 0."""
    positive = x > 0
    tail = paddle.log1p(paddle.exp(paddle.where(positive, -x, x)))
    return paddle.where(positive, x, paddle.zeros_like(x)) + tail'''

# log_softmax near 0 (a dominant logit): x - logsumexp(x) cancels to an absolute error of an
# ulp of the largest logit; (x - peak) - log1p(rest) keeps the relative accuracy
_LOG_SOFTMAX_BODY = '''
    The row's sum of exp(x - peak) is 1 + rest, rest the sum over the entries below the
    peak plus one per further tied maximum; its log is log1p(rest), where a sum including
    exp(0) = 1 would round a rest below the epsilon away. The peak is taken without
    gradient (paddle.amax's CPU gradient costs a pass over the row per element); a tied
    maximum enters rest as x - peak, 0 with the gradient of exp(x - peak) there, so every
    entry gets its softmax gradient.
    """
    peak = paddle.amax(x, axis=axis, keepdim=True).detach()
    top = x >= peak  # x == peak: the CPU equal kernel's scalar path has a tolerance
    ties = paddle.sum(paddle.cast(top, x.dtype), axis=axis, keepdim=True)
'''
_LOG_SOFTMAX_REST = '''    below = paddle.where(top, shifted, paddle.exp(shifted))
    rest = paddle.sum(below, axis=axis, keepdim=True) + (ties - 1)
'''
_LOG_SOFTMAX = ('''def _log_softmax(x, axis):
    """x - logsumexp(x) along the axis, accurate also near 0.
''' + _LOG_SOFTMAX_BODY + '''    shifted = x - peak
''' + _LOG_SOFTMAX_REST + '''    return shifted - paddle.log1p(rest)''')
# one pass fewer than _log_softmax's scheme over the row (no tie count, no select over the
# row): Paddle allocates each [N, C] intermediate afresh, 8000 page faults per [8192, 1000]
_GATHER_LOG_SOFTMAX = '''def _gather_log_softmax(x, axis, index):
    """log_softmax(x)[index] along the axis, accurate also near 0.

    The row's sum of exp(x - shift) is 1 + rest; its log is log1p(rest), where a sum
    including exp(0) = 1 would round a rest below the epsilon away. Where the picked entry
    is a maximum (tied or not) the shift is the picked entry itself (the same value, with
    its gradient) and the picked entry leaves the sum as a constant 0: the gradient of
    its own logit, -rest / (1 + rest), is then one term, where a shift by the row's
    maximum gives 1 / (1 + rest) - 1, which rounds to 0 for a confident prediction (logits
    [46, 0, -80], label 0: -1.05e-20); a further tied maximum stays in rest as exp(0) = 1
    with its gradient. Elsewhere the shift is the row's maximum, taken without gradient
    (paddle.amax's CPU gradient costs a pass over the row per element), every maximum's
    exp(0) = 1 keeps its softmax gradient, and rest is the sum less 1: the picked entry
    is below the maximum, so the result is at least log 2 in size and the rounding of
    1 + rest costs it under an epsilon.
    """
    peak = paddle.amax(x, axis=axis, keepdim=True).detach()
    picked = paddle.take_along_axis(x, index, axis=axis, broadcast=False)
    own = picked >= peak  # picked == peak: the CPU equal kernel's scalar path has a tolerance
    offset = picked - peak
    # the picked entry's term: 0 where it is the shift, else its own (from `picked`); not
    # exp(-inf): the vectorised CPU exp returns 5.6e-309 (float64) / 2.9e-39 (float32) there
    hole = paddle.where(own, paddle.zeros_like(offset), paddle.exp(offset))
    terms = paddle.exp(x - paddle.where(own, picked, peak))
    terms = paddle.put_along_axis(terms, index, hole, axis=axis, broadcast=False)
    rest = paddle.sum(terms, axis=axis, keepdim=True) - paddle.cast(paddle.logical_not(own), x.dtype)
    # 0 where own (x - x), as a constant: its gradient 1 - 1 would meet -rest in `picked`
    return paddle.where(own, paddle.zeros_like(offset), offset) - paddle.log1p(rest)'''

# the maximum over an axis with its gradient shared evenly among tied entries
_AMAX = '''def _amax(x, axis):
    """The maximum over the axis (kept), its gradient shared evenly among tied maxima.

    paddle.amax's CPU gradient re-reduces the tie count for every element: quadratic in
    the axis length (6 s for [8192, 1000]). Here the maximum is taken without gradient and
    the tied entries' mean offset from it, 0 in value, carries the gradient.
    """
    peak = paddle.amax(x, axis=axis, keepdim=True).detach()
    top = x >= peak
    ties = paddle.sum(paddle.cast(top, x.dtype), axis=axis, keepdim=True)
    base = paddle.where(paddle.isinf(peak), paddle.zeros_like(peak), peak)
    offset = paddle.sum(paddle.where(top, x - base, paddle.zeros_like(x)), axis=axis, keepdim=True)
    return peak + offset / ties'''

# trigamma below 0 by reflection: the CPU kernel steps up from a negative x one unit at a time
_TRIGAMMA = '''def _trigamma(x):
    """trigamma(x); below 0 by reflection, pi**2 / sin(pi x)**2 - trigamma(1 - x), with
    sin(pi x)**2 from x - round(x) (exact): paddle.polygamma steps up from a negative x one
    unit at a time (7.6 s at x = -1.2e8)."""
    neg = x < 0
    t = paddle.polygamma(paddle.where(neg, 1 - x, x), 1)
    r = x - paddle.round(x)
    s = paddle.sin(3.141592653589793 * paddle.where(neg, r, paddle.full_like(r, 0.5)))
    return paddle.where(neg, 9.869604401089358 / (s * s) - t, t)'''

_SHAPE = '''def _shape(x):
    """x's shape as a tuple, with sizes unknown until run time read as tensors.

    A static-graph program reports such a size as -1; to_static already gives tensors
    there, and eager shapes are ints.
    """
    shape = list(x.shape)
    for k, n in enumerate(shape):
        if isinstance(n, int) and n < 0:
            shape[k] = paddle.shape(x)[k]
    return tuple(shape)'''

# public attribute names of a paddle.nn.Layer instance (tests/test_names.py checks the list)
_ATTRIBUTES = frozenset("""
    add_module add_parameter add_sublayer apply astype backward bfloat16 buffers children
    clear_gradients cpu create_parameter create_tensor create_variable cuda double eval
    extra_repr float float16 forward full full_name get_buffer get_extra_state get_parameter
    get_sublayer get_submodule half load_dict load_state_dict modules named_buffers
    named_children named_modules named_parameters named_sublayers parameters register_buffer
    register_forward_hook register_forward_post_hook register_forward_pre_hook
    register_module register_parameter register_state_dict_hook requires_grad_ set_dict
    set_state_dict set_sublayer set_submodule sharded_state_dict state_dict sublayers to
    to_static_state_dict train training type xpu zero_grad
""".split())


class Runner:
    """Runs a generated Paddle module: eager or compiled (``paddle.jit.to_static``);
    gradients with ``backward``."""

    def __init__(self):
        import numpy as np
        import paddle

        self.paddle, self.np = paddle, np

    def tensor(self, a, dtype, stop_gradient: bool = True):
        np = self.np
        a = np.asarray(a)
        if a.dtype.kind != "b":
            a = a.astype(np.int64) if a.dtype.kind in "iu" else a.astype(dtype)
        return self.paddle.to_tensor(a, stop_gradient=stop_gradient)

    def gradient(self, fn, arrays, dtype: str, mode: str):
        """fn(*tensors) and the gradient of its sum with respect to each float array (None
        for the others), as NumPy arrays."""
        paddle, np = self.paddle, self.np
        arrays = [np.asarray(a) for a in arrays]
        tensors = [self.tensor(a, dtype, stop_gradient=a.dtype.kind != "f") for a in arrays]
        out = (paddle.jit.to_static(fn, full_graph=True) if mode == "graph" else fn)(*tensors)
        value = out.numpy()
        grads = [None] * len(arrays)
        if any(a.dtype.kind == "f" for a in arrays):
            out.sum().backward()
            for k, (a, t) in enumerate(zip(arrays, tensors)):
                if a.dtype.kind == "f":  # a tensor the result does not differentiate through has no .grad
                    grads[k] = t.grad.numpy() if t.grad is not None else np.zeros(a.shape)
        return value, grads

    def make(self, mod, spec, params, reduction, dtype, learnable):
        paddle = self.paddle
        cls = getattr(mod, spec.class_name)
        kw = dict(params)
        if spec.learnable:
            kw["dtype"] = dtype
        layer = cls(**kw, reduction=reduction)
        for lr in spec.learnable:
            getattr(layer, lr.name).set_value(paddle.to_tensor(self.np.asarray(learnable[lr.name], dtype=dtype)))
        return layer

    def run(self, mod, spec, case, dtype, mode, reductions):
        paddle, np = self.paddle, self.np
        values = {}
        for red in reductions:
            layer = self.make(mod, spec, case.params, red, dtype, case.learnable)
            fn = paddle.jit.to_static(layer, full_graph=True) if mode == "graph" else layer
            args, _ = self.args(spec, case, dtype)
            values[red] = fn(*args).numpy().astype(float)
        layer = self.make(mod, spec, case.params, "sum", dtype, case.learnable)
        fn = paddle.jit.to_static(layer, full_graph=True) if mode == "graph" else layer
        args, names = self.args(spec, case, dtype)
        out = fn(*args)
        out.backward()
        grads = {}
        for a, n in zip(args, names):
            if n is not None:  # an input the loss does not differentiate through has no .grad
                grads[n] = a.grad.numpy().astype(float) if a.grad is not None else np.zeros(a.shape)
        for lr in spec.learnable:  # a learnable the loss does not use has no .grad
            g = getattr(layer, lr.name).grad
            grads[lr.name] = g.numpy().astype(float) if g is not None else np.zeros(lr.shape)
        return values, grads

    def args(self, spec, case, dtype):
        args, names = [], []
        for inp, v, diff in call_inputs(spec, case):
            args.append(None if v is None else self.tensor(v, dtype, stop_gradient=not diff))
            names.append(inp.name if diff else None)
        return args, names


def _builtin_series(spec, case, name: str, xs, call: str, order: tuple[str, ...]) -> dict | None:
    """The reference pages' built-in curve (losscc.docbuiltin): Paddle's function `call`, in
    float64, as the first element of input `name` sweeps `xs`, the other arguments from
    `case` in the function's positional `order`, and its gradient from ``paddle.grad``.
    None where the function has no float64 kernel or another shape (log_loss: [N, 1] only)."""
    import inspect

    import numpy as np
    import paddle

    root, *path = call.split(".")  # attributes of the framework only (docbuiltin.framework_name)
    fn = paddle if root == "paddle" else None
    for part in path:
        fn = getattr(fn, part, None)
    if not (inspect.isfunction(fn) or inspect.isbuiltin(fn)):
        return None
    arity = len(inspect.signature(fn).parameters)  # a drop-in may add reduction after the built-in's own
    inputs = {i.name: i for i in spec.inputs}
    base = np.asarray(case.inputs[name], dtype=np.float64)
    loss, grad = [], []
    for x in xs:
        args, swept = [], None
        for arg in order:
            if arg in inputs:
                v = case.inputs.get(arg)
                if v is None:
                    args.append(None)
                elif arg == name:
                    arr = base.copy()
                    arr.reshape(-1)[0] = x
                    swept = paddle.to_tensor(arr, dtype="float64", stop_gradient=False)
                    args.append(swept)
                else:
                    dtype = "int64" if inputs[arg].dtype == "int" else "float64"
                    args.append(paddle.to_tensor(np.asarray(v), dtype=dtype))
            elif arg == "reduction":
                args.append("sum")
            elif arg == "name":
                args.append(None)
            else:
                args.append(case.params.get(arg, spec.param(arg).default))
        try:
            out = fn(*args[:arity])
        except (RuntimeError, ValueError):
            return None
        out = out.sum() if out.ndim else out  # a built-in without a reduction argument
        (g,) = paddle.grad(out, [swept])
        loss.append(float(out.item()))
        grad.append(float(g.numpy().reshape(-1)[0]))
    return {"loss": loss, "gradient": grad}


BACKEND = Backend(
    attributes=_ATTRIBUTES,
    name="paddle",
    label="Paddle",
    builtin_series=_builtin_series,
    element_count="paddle.numel({x}).astype({like}.dtype)",
    runner=Runner,
    quiet_warnings=(
        "Tensor do not have 'place' interface for pir graph mode",  # to_static, per traced op
        "No ccache found",                                          # at import
    ),
    quiet_env=_freeze({"GLOG_minloglevel": "2"}),  # the C++ (glog) log lines
    imports=("import numbers", "import paddle", "import paddle.nn.functional as F", "from paddle import nn"),
    # fused built-ins where they compute the same function and gradient (docs/operator_choices.md);
    # in float64 their float hyperparameter is a float32 attribute, so float32 only
    fused=(
        Fused("smooth_l1", 'F.smooth_l1_loss({x}, {y}, reduction="none", delta={beta}, is_huber=False)',
              dtypes=("paddle.float32",)),
        Fused("huber", 'F.smooth_l1_loss({x}, {y}, reduction="none", delta={delta})', dtypes=("paddle.float32",)),
        # these two give no gradient for the label: only where it needs none (data labels);
        # BCE's float64 kernel clamps p (1 - p) at a float64 1e-12, the spec at float32's
        Fused("bce", 'F.binary_cross_entropy({x}, {y}, reduction="none")', dtypes=("paddle.float32",),
              no_grad=("y",)),
        Fused("kl_div", 'F.kl_div({x}, {y}, reduction="none")', no_grad=("y",)),
    ),
    no_grad="{x}.stop_gradient",
    where_scalars=False,  # paddle.where rejects int scalars and warns on float ones
    # under to_static a Layer's float attributes reach float64 arithmetic rounded to float32
    wrap_scalars=True,
    scalar="paddle.full([], {value}, dtype={dtype})",
    ops=_freeze({
        "exp": "paddle.exp({x})",
        "log": "paddle.log({x})",
        "log1p": "paddle.log1p({x})",
        "expm1": "_expm1({x})",  # not paddle.expm1: its gradient is 0 far below 0
        "square": "paddle.square({x})",  # x ** 2 goes to the generic pow kernel, 30x slower
        "sqrt": "paddle.sqrt({x})",
        "rsqrt": "paddle.rsqrt({x})",
        "abs": "paddle.abs({x})",
        "tanh": "_tanh({x})",  # not paddle.tanh: its gradient is 0 in the tails
        "cosh": "paddle.cosh({x})",
        "atan": "paddle.atan({x})",
        "lgamma": "paddle.lgamma({x})",
        "digamma": "paddle.digamma({x})",
        "trigamma": "_trigamma({x})",
        "cos": "paddle.cos({x})",
        "sin": "paddle.sin({x})",
        "erf": "paddle.erf({x})",
        "sigmoid": "_sigmoid({x})",  # not F.sigmoid: its gradient is 0 in the tail above 0
        # not F.softplus: one fused kernel, 4-7x faster, but log(1 + exp(x)) loses the
        # relative accuracy of the value below 0 (docs/operator_choices.md)
        "softplus": "_softplus({x})",
        "softplus_nonpos": "paddle.log1p(paddle.exp({x}))",  # x <= 0: accurate, no select
        "maximum": "paddle.maximum({x}, {y})",
        "minimum": "paddle.minimum({x}, {y})",
        "clip": "paddle.clip({x}, {lo}, {hi})",
        "clip_min": "paddle.clip({x}, min={lo})",
        "clip_max": "paddle.clip({x}, max={hi})",
        "where": "paddle.where({c}, {x}, {y})",
        "and": "paddle.logical_and({x}, {y})",
        "or": "paddle.logical_or({x}, {y})",
        "not": "paddle.logical_not({x})",
        "sum": "paddle.sum({x}, axis={axis}, keepdim=True)",
        "mean": "paddle.mean({x}, axis={axis}, keepdim=True)",
        "amax": "_amax({x}, {axis})",
        "logsumexp": "_logsumexp({x}, {axis})",
        "softmax": "F.softmax({x}, axis={axis})",
        # Paddle's CPU log_softmax clips x - max at -64 and is slow; this form is exact, and
        # keeps the relative accuracy near 0 (a dominant logit)
        "log_softmax": "_log_softmax({x}, {axis})",
        "gather_log_softmax": "_gather_log_softmax({x}, {axis}, {index})",
        "argmax": "paddle.argmax({x}, axis={axis}, keepdim=True)",  # int64; ties: the first index
        "argmin": "paddle.argmin({x}, axis={axis}, keepdim=True)",
        "round": "paddle.round({x})",  # half to even, as the reference
        "floor": "paddle.floor({x})",
        "ceil": "paddle.ceil({x})",
        "sign": "paddle.sign({x})",
        # the index has the input's shape but on axis (canonical layout), so no broadcast (an expand
        # and its backward that cost 15x the gather itself)
        "take_along_axis": "paddle.take_along_axis({x}, {index}, axis={axis}, broadcast=False)",
        "lookup": "paddle.take({x}, {index})",
        "broadcast_to": "paddle.broadcast_to({x}, {shape})",
        # a copy: a detached alias shares storage, which to_static's backward may reuse
        "stop_gradient": "paddle.assign({x}).detach()",
        "cast": "paddle.cast({x}, {dtype})",
        "reshape": "paddle.reshape({x}, {shape})",
        "zeros_like": "paddle.zeros_like({x})",
        "full_like": "paddle.full_like({x}, {value})",
        "full": "paddle.full({shape}, {value}, dtype={dtype})",
        "arange": "paddle.arange({n}, dtype={like}.dtype)",
        "positions": "paddle.arange({n}, dtype={dtype})",
        "concat": "paddle.concat([{x}, {y}], axis={axis})",
        # under to_static a shape entry is an int64 tensor, which divides in float32
        "size_value": "paddle.full([], {n}, dtype={dtype})",
        # in a static-graph program an axis unknown until run time reads -1 in x.shape: _shape reads it
        "shape": "_shape({x})",
        "half_dtypes": "(paddle.float16, paddle.bfloat16)",
        "float_dtypes": "(paddle.float16, paddle.bfloat16, paddle.float32, paddle.float64)",
        "int_dtypes": "(paddle.int32, paddle.int64)",
        "float32": "'float32'",
    }),
    helpers=_freeze({"logsumexp": _LOGSUMEXP, "softplus": _SOFTPLUS, "sigmoid": _SIGMOID, "tanh": _TANH, "expm1": _EXPM1,
                     "log_softmax": _LOG_SOFTMAX, "gather_log_softmax": _GATHER_LOG_SOFTMAX, "amax": _AMAX,
                     "trigamma": _TRIGAMMA, "shape": _SHAPE}),
)
