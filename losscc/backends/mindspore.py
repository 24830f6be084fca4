"""MindSpore: lowering table (``mindspore.ops``; runs in PyNative, GRAPH_MODE and ``ms.jit``)
and verify's runner.  MindSpore is imported by the runner only."""

from ..fusion import Fused
from . import Backend, _freeze, call_inputs

# log_softmax near 0 (a dominant logit): x - logsumexp(x) cancels to an absolute error of an
# ulp of the largest logit; (x - peak) - log1p(rest) keeps the relative accuracy
_LOG_SOFTMAX_BODY = '''
    The row's sum of exp(x - peak) is 1 + rest, rest the sum over the entries below the
    peak plus one per further tied maximum; its log is log1p(rest), where a sum including
    exp(0) = 1 would round a rest below the epsilon away. The peak is taken without
    gradient (ops.amax's backward costs 6x ops.max on CPU); a tied maximum enters rest as
    x - peak, 0 with the gradient of exp(x - peak) there, so every entry gets its softmax
    gradient. In float64 also for float32 input: the float32 exp kernel is off by about
    eps * |x| (2e-5 at |x| = 80) and log by 1.6e-6 absolute.
    """
    y = ops.cast(x, ms.float64)
    peak = ops.cast(ops.stop_gradient(ops.amax(x, axis, keepdims=True)), ms.float64)
    top = y == peak
    shifted = y - peak
    below = ops.where(top, shifted, ops.exp(shifted))
    ties = ops.cast(ops.sum(ops.cast(top, ms.float32), axis, keepdim=True), ms.float64)
    rest = ops.sum(below, axis, keepdim=True) + (ties - 1)
'''
_LOG_SOFTMAX = ('''def _log_softmax(x, axis):
    """x - logsumexp(x) along the axis, accurate also near 0.
''' + _LOG_SOFTMAX_BODY + '''    return ops.cast(shifted - _log1p(rest), x.dtype)''')
_GATHER_LOG_SOFTMAX = '''def _gather_log_softmax(x, axis, index):
    """log_softmax(x)[index] along the axis, accurate also near 0, as _log_softmax (in float64).
    Where the picked entry is the only maximum the row is shifted by that entry itself
    (the same value): the gradient of its own logit, -rest / (1 + rest), is then one term,
    where a shift by the row's maximum gives 1 / (1 + rest) - 1, which rounds to 0 for a
    confident prediction (logits [46, 0, -80], label 0: -1.05e-20).
    """
    y = ops.cast(x, ms.float64)
    peak = ops.cast(ops.stop_gradient(ops.amax(x, axis, keepdims=True)), ms.float64)
    top = y == peak
    ties = ops.cast(ops.sum(ops.cast(top, ms.float32), axis, keepdim=True), ms.float64)
    picked = ops.gather_elements(y, axis, index)
    own = ops.logical_and(picked >= peak, ties == 1)
    shifted = y - ops.where(own, picked, peak)
    # a tied maximum enters rest as shifted (0, exp's gradient there; the peak has none);
    # the picked one when it is the only maximum as a constant 0: its gradient is `picked`'s
    below = ops.where(top, ops.where(own, ops.zeros_like(y), shifted), ops.exp(shifted))
    rest = ops.sum(below, axis, keepdim=True) + (ties - 1)
    shifted = ops.gather_elements(shifted, axis, index)
    # 0 where own (y - y), as a constant: its gradient 1 - 1 would meet -rest in `picked`
    shifted = ops.where(own, ops.zeros_like(shifted), shifted)
    return ops.cast(shifted - _log1p(rest), x.dtype)'''

_SUM_ALL = '''def _sum_all(x):
    """The sum of all entries: row sums first, since the CPU kernel's full reduction (and
    its backward, a broadcast from a scalar) is 10x slower than a reduction over the last
    axis (and a sum of sums is no less accurate)."""
    if len(x.shape) > 1:
        return x.sum(-1).sum()
    return x.sum()'''


# the log-gamma family in float64: the CPU kernels of digamma (and so lgamma's gradient)
# compute float64 in float32 (4e-7 relative). For |x| < 1e30: the recurrence to
# z = y + 10 and the asymptotic series there (truncation below 1e-17), y = x above 0 and
# 1 - x (the reflection) below; the constants are integers or float64 tensors (a Python
# float is float32 in MindSpore's float64 arithmetic)
_GAMMA_SHIFT = '''    pos = x > 0
    pole = ops.logical_and(ops.logical_not(pos), x == ops.floor(x))  # the kernel's inf, NaN
    near = ops.logical_and(ops.logical_and(x > -1e30, x < 1e30), ops.logical_not(pole))
    y = ops.where(near, ops.where(pos, x, 1 - x), ops.ones_like(x))
    pi = ms.Tensor(3.141592653589793, ms.float64)
    z = y + 10
    w = 1 / (z * z)
    w2, w3 = w * w, w * w * w'''
_DIGAMMA = '''def _digamma(x):
    \"\"\"digamma(x); in float64 (the kernel's float64 is float32-accurate) for |x| < 1e30,
    psi(y + 10) - sum 1 / (y + k) with psi's asymptotic series, y = x or 1 - x.\"\"\"
    if x.dtype != ms.float64:
        return ops.digamma(x)
''' + _GAMMA_SHIFT + '''
    series = w / 12 - w2 / 120 + w3 / 252 - w2 * w2 / 240 + w2 * w3 / 132
    series = series - 691 * w3 * w3 / 32760 + w3 * w3 * w / 12
    acc = 1 / y
    for k in range(1, 10):
        acc = acc + 1 / (y + k)
    psi = ops.log(z) - 1 / (2 * z) - series - acc
    angle = pi * ops.where(near, x, ops.zeros_like(x))
    psi = ops.where(pos, psi, psi - pi / ops.tan(angle))
    return ops.where(near, psi, ops.digamma(x))'''
_LGAMMA = '''def _lgamma(x):
    \"\"\"lgamma(x), the kernel's value; in float64 for |x| < 1e30 its gradient is that of
    Stirling's series at y + 10 less sum log(y + k) (y = x, or 1 - x with the reflection),
    which is _digamma's: the kernel's gradient is its float32-accurate digamma.\"\"\"
    if x.dtype != ms.float64:
        return ops.lgamma(x)
''' + _GAMMA_SHIFT + '''
    series = 1 - w / 30 + w2 / 105 - w3 / 140 + w2 * w2 / 99
    series = (series - 691 * w2 * w3 / 30030 + w3 * w3 / 13) / (12 * z)
    acc = ops.log(y)
    for k in range(1, 10):
        acc = acc + ops.log(y + k)
    form = (z - 1 / 2) * ops.log(z) - z + series - acc
    reflected = ops.logical_and(near, ops.logical_not(pos))
    sine = ops.abs(ops.sin(pi * ops.where(reflected, x, ops.ones_like(x) / 2)))
    form = ops.where(pos, form, ops.log(pi) - ops.log(sine) - form)
    value = ops.lgamma(x)
    kept = ops.stop_gradient(value) + (form - ops.stop_gradient(form))
    return ops.where(near, kept, value)'''

_TRIGAMMA = '''def _trigamma(x):
    """trigamma(x); below 0 by reflection, pi**2 / sin(pi x)**2 - trigamma(1 - x), with
    sin(pi x)**2 from x - round(x) (exact): ops.polygamma steps up from a negative x one
    unit at a time (1.1 s at x = -1.2e7)."""
    neg = x < 0
    t = ops.polygamma(ms.Tensor(1), ops.where(neg, 1 - x, x))
    pi = ops.cast(ms.Tensor(3.141592653589793, ms.float64), x.dtype)
    r = x - ops.round(x)
    s = ops.sin(pi * ops.where(neg, r, ops.ones_like(r) / 2))
    return ops.where(neg, pi * pi / (s * s) - t, t)'''

# public attribute names of a mindspore.nn.LossBase instance (tests/test_names.py checks the list)
_ATTRIBUTES = frozenset("""
    add_flags add_flags_recursive apply arguments_key average bprop_debug buffers cast
    cast_inputs cell_init_args cell_type cells cells_and_names check_names
    check_names_and_refresh_name cls_name compile compile_and_run compile_cache
    compile_phase compiled construct create_time enable_backward_hook exist_names exist_objs
    extend_repr generate_scope get_axis get_buffer get_extra_state get_flags
    get_func_graph_proto get_inputs get_loss get_mixed_precision_type get_parameters
    get_scope get_sub_cell global_cells grad_ops_label has_bprop init_parameters_data
    insert_child_to_cell insert_param_to_cell is_top_cell jit_config_dict load_state_dict
    mixed_precision_type mul name_cells named_buffers offload
    parallel_parameter_merge_net_dict parallel_parameter_name_list param_prefix
    parameter_layout_dict parameters_and_names parameters_broadcast_dict parameters_dict
    phase phase_cache pipeline_segment pipeline_stage recompute reduce reduce_mean
    reduce_sum register_backward_hook register_backward_pre_hook register_buffer
    register_forward_hook register_forward_pre_hook register_load_state_dict_post_hook
    register_load_state_dict_pre_hook register_parameter_forward_hook
    register_saved_tensors_hooks register_state_dict_post_hook register_state_dict_pre_hook
    remove_redundant_parameters requires_grad run_construct set_boost set_broadcast_flag
    set_comm_fusion set_data_parallel set_extra_state set_grad set_inputs set_jit_config
    set_mixed_precision_type set_train shard state_dict to to_empty to_float
    total_instance_count trainable_params training untrainable_params update_cell_prefix
    update_cell_type update_parameters_name
""".split())


class Runner:
    """Runs a generated MindSpore module: eager (PyNative) or compiled (``ms.jit``);
    gradients with ``ms.value_and_grad``."""

    def __init__(self):
        import mindspore as ms
        import numpy as np

        self.ms, self.np = ms, np

    def tensor(self, a, dtype):
        np = self.np
        a = np.asarray(a)
        if a.dtype.kind in "iu":
            return self.ms.Tensor(a.astype(np.int64))
        return self.ms.Tensor(a if a.dtype.kind == "b" else a.astype(dtype))

    def gradient(self, fn, arrays, dtype: str, mode: str):
        """fn(*tensors) and the gradient of its sum with respect to each float array (None
        for the others), as NumPy arrays; `fn` must be defined in a module file (ms.jit
        parses its source)."""
        ms, np = self.ms, self.np
        arrays = [np.asarray(a) for a in arrays]
        tensors = [self.tensor(a, dtype) for a in arrays]
        pos = tuple(k for k, a in enumerate(arrays) if a.dtype.kind == "f")

        def total(*t):
            return fn(*t).sum()

        value = (ms.jit(fn) if mode == "graph" else fn)(*tensors).asnumpy()
        grads = [None] * len(arrays)
        if pos:
            g = ms.grad(total, grad_position=pos)
            g = (ms.jit(g) if mode == "graph" else g)(*tensors)
            for k, gk in zip(pos, g if isinstance(g, tuple) else (g,)):
                grads[k] = gk.asnumpy()
        return value, grads

    def make(self, mod, spec, params: dict, reduction: str, dtype: str, learnable: dict):
        ms = self.ms
        cls = getattr(mod, spec.class_name)
        kw = dict(params)
        if spec.learnable:
            kw["dtype"] = getattr(ms, dtype)
        cell = cls(**kw, reduction=reduction)
        for lr in spec.learnable:
            getattr(cell, lr.name).set_data(ms.Tensor(self.np.asarray(learnable[lr.name], dtype=dtype)))
        return cell

    def run(self, mod, spec, case, dtype: str, mode: str, reductions) -> tuple[dict, dict]:
        ms = self.ms
        args, names = self.args(spec, case, dtype)
        values = {}
        for red in reductions:
            cell = self.make(mod, spec, case.params, red, dtype, case.learnable)
            fn = ms.jit(cell) if mode == "graph" else cell
            values[red] = fn(*args).asnumpy().astype(float)
        cell = self.make(mod, spec, case.params, "sum", dtype, case.learnable)
        pos = tuple(k for k, n in enumerate(names) if n is not None)
        weights = cell.trainable_params() if spec.learnable else None
        vg = ms.value_and_grad(cell, grad_position=pos, weights=weights)
        if mode == "graph":
            vg = ms.jit(vg)
        _, g = vg(*args)
        grads = {}
        if weights is not None:
            g_in, g_w = g
        else:
            g_in, g_w = g, ()
        if not isinstance(g_in, tuple):
            g_in = (g_in,)
        for k, gi in zip(pos, g_in):
            grads[names[k]] = gi.asnumpy().astype(float)
        for lr, gw in zip(spec.learnable, g_w):
            grads[lr.name] = gw.asnumpy().astype(float)
        return values, grads

    def args(self, spec, case, dtype):
        args, names = [], []
        for inp, v, diff in call_inputs(spec, case):
            args.append(None if v is None else self.tensor(v, dtype))
            names.append(inp.name if diff else None)
        return args, names


BACKEND = Backend(
    attributes=_ATTRIBUTES,
    name="mindspore",
    label="MindSpore",
    element_count="{x}.size",
    runner=Runner,
    load_order=-1,  # before any other framework: Paddle's libdnnl loaded first breaks MindSpore's CPU kernels
    imports=("import numbers", "import mindspore as ms", "from mindspore import nn, ops"),
    # fused built-ins where they compute the same function and gradient (docs/operator_choices.md);
    # in float64 the kernel's beta is a float32 attribute, so float32 only
    fused=(
        Fused("smooth_l1", 'ops.smooth_l1_loss({x}, {y}, {beta}, "none")', dtypes=("ms.float32",)),
    ),
    wrap_scalars=True,  # MindSpore rounds Python floats to float32, even in float64 arithmetic
    scalar="ms.Tensor({value}, {dtype})",
    ops=_freeze({
        "exp": "_exp({x})",  # not ops.exp in float32: up to 2e-5 relative off
        "log": "_log({x})",  # not ops.log in float32: 3e-5 relative off near 1
        # the CPU kernels compute log(1 + x) and about exp(x) - 1 (0 at x = 1e-30): an
        # accurate composition in float64 (docs/operator_choices.md)
        "log1p": "_log1p({x})",
        "expm1": "_expm1({x})",
        "sqrt": "ops.sqrt({x})",
        "rsqrt": "ops.rsqrt({x})",
        "abs": "ops.abs({x})",
        "tanh": "_tanh({x})",  # not ops.tanh: off by 1e-4 in float32, gradient 0 in the tails
        "cosh": "ops.cosh({x})",
        "atan": "ops.atan({x})",
        "lgamma": "_lgamma({x})",
        "digamma": "_digamma({x})",
        "trigamma": "_trigamma({x})",
        "cos": "ops.cos({x})",
        "sin": "ops.sin({x})",
        "erf": "ops.erf({x})",
        "sigmoid": "_sigmoid({x})",  # not ops.sigmoid: its gradient is 0 in the tail above 0
        "softplus": "_softplus({x})",
        "softplus_nonpos": "_softplus_nonpos({x})",
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
        # a composition in every dtype: the CPU log_softmax kernel is off by up to 3.7e-6 in
        # float32 (1600 ulps of its operands; the composition 50), and float64 it computes
        # in float32 (docs/operator_choices.md); accurate also near 0
        "log_softmax": "_log_softmax({x}, {axis})",
        "gather_log_softmax": "_gather_log_softmax({x}, {axis}, {index})",
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
        "arange": "ops.arange({n}, dtype={like}.dtype)",
        "positions": "ops.arange({n}, dtype={dtype})",
        "concat": "ops.cat(({x}, {y}), {axis})",
        # Tensor.mean's backward is a full-size Tile and Div (1.5x sum in PyNative), and in
        # float64 it divides by a float32 count; a Python int divides exactly
        "mean_all": "_sum_all({x}) / {x}.size",
        "sum_all": "_sum_all({x})",
        "shape": "{x}.shape",  # under ms.jit with dynamic shapes an unknown size is a run-time scalar
        "half_dtypes": "(ms.float16, ms.bfloat16)",
        "float_dtypes": "(ms.float16, ms.bfloat16, ms.float32, ms.float64)",
        "int_dtypes": "(ms.int32, ms.int64)",
        "float32": "ms.float32",
    }),
    # accuracy over speed: ops.softplus, ops.log1p and ops.expm1 are single kernels, but on
    # CPU they lose the value's relative accuracy near 0 (docs/operator_choices.md); the
    # compositions run in float64 (a cast of a float64 tensor is free)
    helpers=_freeze({
        "lgamma": _LGAMMA,
        "digamma": _DIGAMMA,
        "trigamma": _TRIGAMMA,
        "log1p": '''def _log1p(x):
    """log(1 + x), accurate near 0: Goldberg's log(1 + x) * x / ((1 + x) - 1), and x where
    1 + x rounds to 1 (the CPU kernel computes log(1 + x)); in float64, since the float32
    log is not accurate enough near 1 for the quotient."""
    y = ops.cast(x, ms.float64)
    if x.dtype != ms.float64:
        # a float32 x: 1 + x is exact in float64 from |x| = 2**-29 on, below that
        # log1p(x) rounds to x (relative error |x| / 2 < 2**-30)
        return ops.where(ops.abs(x) < 2.0**-29, x, ops.cast(ops.log(1 + y), x.dtype))
    u = 1 + y
    z = u - 1
    keep = ops.logical_or(z == 0, ops.isinf(y))
    out = ops.where(keep, y, ops.log(u) * (y / ops.where(keep, ops.ones_like(z), z)))
    return ops.cast(out, x.dtype)''',
        "expm1": '''def _expm1(x):
    """exp(x) - 1, accurate near 0: Kahan's (exp(x) - 1) * x / log(exp(x)), and x where
    exp(x) rounds to 1 (the CPU kernel loses x below about 1e-8); in float64, since the
    float32 log is not accurate enough near 1 for the quotient. Below -1, exp(x) - 1."""
    y = ops.cast(x, ms.float64)
    if x.dtype != ms.float64:
        # a float32 x: exp(x) - 1 in float64 is off by an ulp of 1 (2**-52 absolute),
        # under 2**-26 relative from |x| = 2**-26 on; below, x + x**2 / 2 (error x**3 / 6)
        out = ops.where(ops.abs(y) < 2.0**-26, y + 0.5 * y * y, ops.exp(y) - 1)
        return ops.cast(out, x.dtype)
    u = ops.exp(y)
    um = u - 1
    keep = ops.logical_or(ops.logical_or(um == 0, um == -1), ops.isinf(u))
    ratio = y / ops.log(ops.where(keep, ops.full_like(u, 2), u))
    near = ops.where(keep, ops.where(um == 0, y, um), um * ratio)
    # below -1, exp(y) - 1: the quotient's gradient cancels there (1e-7 off at -49 in float64)
    return ops.cast(ops.where(y < -1, ops.exp(ops.clamp(y, max=-1.0)) - 1, near), x.dtype)''',
        "log": '''def _log(x):
    """The natural logarithm in float64: the float32 kernel is off by up to 1.4e-6 absolute
    (3e-5 relative near 1), the float64 one to an ulp."""
    return ops.cast(ops.log(ops.cast(x, ms.float64)), x.dtype)''',
        "exp": '''def _exp(x):
    """e**x in float64: the float32 kernel is off by up to 2e-5 relative (5.5e-6 over
    [-10, 10], 2e-5 near 80), the float64 one to an ulp."""
    return ops.cast(ops.exp(ops.cast(x, ms.float64)), x.dtype)''',
        "sigmoid": '''def _sigmoid(x):
    """1 / (1 + exp(-x)) as 1 - sigmoid(-x) above 0, in float64: the native kernel's
    gradient is s (1 - s) of the rounded s, 0 where s rounds to 1 (x beyond about 17 in
    float32, 37 in float64); taken on the side where s is small, the gradient keeps its
    relative accuracy (e^-x at large x). The float32 kernel is off by up to 2e-5 relative
    (its exp), the float64 one to an ulp."""
    y = ops.cast(x, ms.float64)
    positive = y > 0
    small = ops.sigmoid(ops.where(positive, -y, y))
    return ops.cast(ops.where(positive, 1 - small, small), x.dtype)''',
        "tanh": '''def _tanh(x):
    """tanh(x) as +-(1 - 2 sigmoid(-2|x|)) from |x| = 1/2 on: the native kernel's gradient
    is 1 - t**2 of the rounded t, 0 where t rounds to 1 (|x| beyond about 9 in float32, 19
    in float64); with the sigmoid taken where it is small the gradient keeps its relative
    accuracy (4 e^-2|x| at large |x|). Below 1/2 the native kernel, accurate near
    0. In float64: the float32 kernel is off by up to 1e-4 relative."""
    y = ops.cast(x, ms.float64)
    positive = y > 0
    tail = 1 - 2 * ops.sigmoid(2 * ops.where(positive, -y, y))
    out = ops.where(ops.abs(y) < 0.5, ops.tanh(y), ops.where(positive, tail, -tail))
    return ops.cast(out, x.dtype)''',
        "softplus": '''def _softplus(x):
    """log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)), in float64: accurate to a few ulps
    also far below 0, where the native kernel flushes to 0 (float32 from about -17) and
    the float32 exp is off by up to 2e-5. The gradient is sigmoid(x),
    also at x = 0."""
    y = ops.cast(x, ms.float64)
    positive = y > 0
    if x.dtype != ms.float64:
        # a float32 x: e = exp(-|x|) in float64; log(1 + e) is off by 2**-53 absolute,
        # under 2**-33 relative from e = 2**-20 on; below, e - e**2 / 2 (error e**3 / 3)
        e = ops.exp(ops.where(positive, -y, y))
        tail = ops.where(e < 2.0**-20, e - 0.5 * e * e, ops.log(1 + e))
        return ops.cast(ops.where(positive, y, ops.zeros_like(y)) + tail, x.dtype)
    tail = _log1p(ops.exp(ops.where(positive, -y, y)))
    out = ops.where(positive, y, ops.zeros_like(y)) + tail
    return ops.cast(out, x.dtype)''',
        "softplus_nonpos": '''def _softplus_nonpos(x):
    """log(1 + exp(x)) for x <= 0 (the caller's argument is), in float64 as _softplus,
    without its selects of the sign."""
    y = ops.cast(x, ms.float64)
    e = ops.exp(y)
    if x.dtype != ms.float64:
        return ops.cast(ops.where(e < 2.0**-20, e - 0.5 * e * e, ops.log(1 + e)), x.dtype)
    return _log1p(e)''',
        "sum_all": _SUM_ALL,
        "mean_all": _SUM_ALL,
        "log_softmax": _LOG_SOFTMAX,
        "gather_log_softmax": _GATHER_LOG_SOFTMAX,
    }),
)
