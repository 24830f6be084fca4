"""PaddlePaddle lowering table (``paddle`` and ``paddle.nn.functional``; eager and ``to_static``)."""

from . import Backend, _freeze

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

BACKEND = Backend(
    attributes=_ATTRIBUTES,
    name="paddle",
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
        "arange": "paddle.arange({n})",
        # under to_static a shape entry is an int64 tensor, which divides in float32
        "size_value": "paddle.full([], {n}, dtype={dtype})",
        "sum_all": "{x}.sum()",
        "mean_all": "{x}.mean()",
        # in a static-graph program an axis unknown until run time reads -1 in x.shape: _shape reads it
        "shape": "_shape({x})",
        "dtype_of": "{x}.dtype",
        "half_dtypes": "(paddle.float16, paddle.bfloat16)",
        "float_dtypes": "(paddle.float16, paddle.bfloat16, paddle.float32, paddle.float64)",
        "int_dtypes": "(paddle.int32, paddle.int64)",
        "float32": "'float32'",
    }),
    helpers=_freeze({**{key: _LOGSUMEXP for key in ("logsumexp", "log_softmax", "gather_log_softmax")},
                     "shape": _SHAPE}),
)
