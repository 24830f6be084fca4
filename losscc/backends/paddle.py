"""PaddlePaddle: lowering table (``paddle`` and ``paddle.nn.functional``; eager and
``to_static``) and verify's runner.  Paddle is imported by the runner only."""

from . import Backend, _freeze, call_inputs

# paddle.logsumexp's CPU kernel costs about 1.5x this composition, forward and backward
_LOGSUMEXP = '''def _logsumexp(x, axis):
    """log(sum(exp(x), axis)), keeping the axis; exact for logits of any size.

    The maximum is shifted out; its gradient is dropped because the result does not depend
    on it (the gradient of x is softmax(x) either way).
    """
    peak = paddle.amax(x, axis=axis, keepdim=True).detach()
    return peak + paddle.log(paddle.sum(paddle.exp(x - peak), axis=axis, keepdim=True))'''

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


BACKEND = Backend(
    attributes=_ATTRIBUTES,
    name="paddle",
    runner=Runner,
    quiet_warnings=(
        "Tensor do not have 'place' interface for pir graph mode",  # to_static, per traced op
        "No ccache found",                                          # at import
    ),
    quiet_env=_freeze({"GLOG_minloglevel": "2"}),  # the C++ (glog) log lines
    imports=("import paddle", "import paddle.nn.functional as F", "from paddle import nn"),
    where_scalars=False,  # paddle.where rejects int scalars and warns on float ones
    # under to_static a Layer's float attributes reach float64 arithmetic rounded to float32
    wrap_scalars=True,
    scalar="paddle.full([], {value}, dtype={dtype})",
    ops=_freeze({
        "exp": "paddle.exp({x})",
        "log": "paddle.log({x})",
        "log1p": "paddle.log1p({x})",
        "expm1": "paddle.expm1({x})",
        "square": "paddle.square({x})",  # x ** 2 goes to the generic pow kernel, 30x slower
        "sqrt": "paddle.sqrt({x})",
        "rsqrt": "paddle.rsqrt({x})",
        "abs": "paddle.abs({x})",
        "tanh": "paddle.tanh({x})",
        "cosh": "paddle.cosh({x})",
        "cos": "paddle.cos({x})",
        "sin": "paddle.sin({x})",
        "erf": "paddle.erf({x})",
        "sigmoid": "F.sigmoid({x})",
        # log(1 + exp(x)) and x above the threshold: exact to float64 there (exp(-40) < 2**-57);
        # below about -37 (float64) / -17 (float32) the value flushes to 0, an absolute error
        # under the dtype's eps. One fused kernel, 4-7x faster than the composite form.
        "softplus": "F.softplus({x}, threshold=40.0)",
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
        "amax": "paddle.amax({x}, axis={axis}, keepdim=True)",
        "logsumexp": "_logsumexp({x}, {axis})",
        "softmax": "F.softmax({x}, axis={axis})",
        # Paddle's CPU log_softmax clips x - max at -64 and is slow; this form is exact
        "log_softmax": "{x} - _logsumexp({x}, {axis})",
        "gather_log_softmax": "paddle.take_along_axis({x}, {index}, axis={axis}, broadcast=False) - _logsumexp({x}, {axis})",
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
        # under to_static a shape entry is an int64 tensor, which divides in float32
        "size_value": "paddle.full([], {n}, dtype={dtype})",
        # in a static-graph program an axis unknown until run time reads -1 in x.shape: _shape reads it
        "shape": "_shape({x})",
        "half_dtypes": "(paddle.float16, paddle.bfloat16)",
        "float_dtypes": "(paddle.float16, paddle.bfloat16, paddle.float32, paddle.float64)",
        "int_dtypes": "(paddle.int32, paddle.int64)",
        "float32": "'float32'",
    }),
    helpers=_freeze({**{key: _LOGSUMEXP for key in ("logsumexp", "log_softmax", "gather_log_softmax")},
                     "shape": _SHAPE}),
)
