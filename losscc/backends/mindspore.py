"""MindSpore lowering table (``mindspore.ops``; runs in PyNative, GRAPH_MODE and ``ms.jit``)."""

from . import Backend, _freeze

BACKEND = Backend(
    name="mindspore",
    imports=("import mindspore as ms", "from mindspore import nn, ops"),
    wrap_scalars=True,  # MindSpore rounds Python floats to float32, even in float64 arithmetic
    scalar="ms.Tensor({value}, {dtype})",
    ops=_freeze({
        "exp": "ops.exp({x})",
        "log": "ops.log({x})",
        "log1p": "ops.log1p({x})",
        "expm1": "ops.expm1({x})",
        "sqrt": "ops.sqrt({x})",
        "rsqrt": "ops.rsqrt({x})",
        "abs": "ops.abs({x})",
        "tanh": "ops.tanh({x})",
        "cosh": "ops.cosh({x})",
        "sigmoid": "ops.sigmoid({x})",
        "softplus": "_softplus({x})",
        "maximum": "ops.maximum({x}, {y})",
        "minimum": "ops.minimum({x}, {y})",
        "clip": "ops.clamp({x}, {lo}, {hi})",
        "clip_min": "ops.clamp({x}, min={lo})",
        "clip_max": "ops.clamp({x}, max={hi})",
        "where": "ops.where({c}, {x}, {y})",
        "and": "ops.logical_and({x}, {y})",
        "or": "ops.logical_or({x}, {y})",
        "not": "ops.logical_not({x})",
        "sum": "ops.sum({x}, {axis}, keepdim=True)",
        "mean": "ops.mean({x}, {axis}, keep_dims=True)",
        "amax": "ops.amax({x}, {axis}, keepdims=True)",
        "logsumexp": "ops.logsumexp({x}, {axis}, keepdim=True)",
        "softmax": "ops.softmax({x}, {axis})",
        "log_softmax": "_log_softmax({x}, {axis})",
        "argmax": "ops.argmax({x}, {axis}, keepdim=True)",  # int64; ties: the first index
        "argmin": "ops.argmin({x}, {axis}, keepdims=True)",
        "round": "ops.round({x})",  # half to even, as the reference
        "floor": "ops.floor({x})",
        "ceil": "ops.ceil({x})",
        "sign": "ops.sign({x})",
        "take_along_axis": "ops.gather_elements({x}, {axis}, {index})",
        "lookup": "ops.gather(ops.reshape({x}, (-1,)), {index}, 0)",
        "broadcast_to": "ops.broadcast_to({x}, {shape})",
        "stop_gradient": "ops.stop_gradient({x})",
        "cast": "ops.cast({x}, {dtype})",
        "reshape": "ops.reshape({x}, {shape})",
        "zeros_like": "ops.zeros_like({x})",
        "full_like": "ops.full_like({x}, {value})",
        "full": "ops.full({shape}, {value}, dtype={dtype})",
        "arange": "ops.arange({n})",
        "size_value": "{n}",
        "sum_all": "{x}.sum()",
        # Tensor.mean's backward is a full-size Tile and Div (1.5x sum in PyNative), and in
        # float64 it divides by a float32 count; a Python int divides exactly
        "mean_all": "{x}.sum() / {x}.size",
        "shape": "{x}.shape",  # under ms.jit with dynamic shapes an unknown size is a run-time scalar
        "dtype_of": "{x}.dtype",
        "half_dtypes": "(ms.float16, ms.bfloat16)",
        "float32": "ms.float32",
    }),
    # ops.softplus and ops.log_softmax are single kernels, 2.5-4x faster than their exact
    # compositions, but on CPU they compute float64 inputs in float32: float64 takes the
    # composition (the dtype test is resolved when ms.jit compiles)
    helpers=_freeze({
        "softplus": '''def _softplus(x):
    """log(1 + exp(x)) without overflow; gradient sigmoid(x), also at x = 0."""
    if x.dtype == ms.float32:
        return ops.softplus(x)  # x above 20; below about -17 the value flushes to 0
    positive = x > 0
    return ops.where(positive, x, ops.zeros_like(x)) + ops.log1p(ops.exp(ops.where(positive, -x, x)))''',
        "log_softmax": '''def _log_softmax(x, axis):
    """x - logsumexp(x, axis), exact for logits of any size."""
    if x.dtype == ms.float32:
        return ops.log_softmax(x, axis)
    return x - ops.logsumexp(x, axis, keepdim=True)''',
    }),
)
