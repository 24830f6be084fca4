"""JAX: lowering table (``jax.numpy``, ``jax.nn``, ``jax.lax``; eager and ``jax.jit``) and
verify's runner.  JAX is imported by the runner only.

The generated module is functional: a pure function per loss (the same name and
signature as the other backends') and a frozen dataclass holding the hyperparameters,
whose ``__call__`` calls the function. Learnable tensors are arguments of both (JAX
has no stateful parameters); the class's ``init(dtype)`` gives their initial values.

Without ``jax_enable_x64`` JAX turns float64 inputs into float32 when they become
arrays, so the code computes in float32; nothing in it depends on the flag.
"""

from . import Backend, _freeze

_CLIP = '''def _clip(x, lo=None, hi=None):
    """x clipped to [lo, hi]; at a bound the gradient goes to x, as torch.clamp's.

    jnp.clip is maximum then minimum, which give half the gradient at a tie.
    """
    if lo is not None:
        x = jnp.where(x < lo, lo, x)
    if hi is not None:
        x = jnp.where(x > hi, hi, x)
    return x'''

# log_softmax near 0 (a dominant logit): x - logsumexp(x) (jax.nn.log_softmax) cancels to an
# absolute error of an ulp of the largest logit; (x - peak) - log1p(rest) keeps the relative accuracy
_LOG_SOFTMAX_BODY = '''
    The row's sum of exp(x - peak) is 1 + rest, rest the sum over the entries below the
    peak plus one per further tied maximum; its log is log1p(rest), where a sum including
    exp(0) = 1 would round a rest below the epsilon away. The peak's gradient, shared
    among tied maxima, cancels, so each entry gets its softmax gradient.
    """
    peak = jnp.max(x, axis=axis, keepdims=True)
    top = x == peak
    shifted = x - peak
    below = jnp.where(top, 0, jnp.exp(shifted))
    ties = jnp.sum(top, axis=axis, keepdims=True, dtype=shifted.dtype)
    rest = jnp.sum(below, axis=axis, keepdims=True) + (ties - 1)
'''
_LOG_SOFTMAX = ('''def _log_softmax(x, axis):
    """x - logsumexp(x) along the axis, accurate also near 0.
''' + _LOG_SOFTMAX_BODY + '''    return shifted - jnp.log1p(rest)''')
_GATHER_LOG_SOFTMAX = '''def _gather_log_softmax(x, axis, index):
    """log_softmax(x)[index] along the axis, accurate also near 0, as _log_softmax.
    Where the picked entry is the only maximum the row is shifted by that entry itself
    (the same value): the gradient of its own logit, -rest / (1 + rest), is then one term,
    where a shift by the row's maximum gives 1 / (1 + rest) - 1, which rounds to 0 for a
    confident prediction (logits [46, 0, -80], label 0: -1.05e-20).
    """
    peak = jnp.max(x, axis=axis, keepdims=True)
    top = x == peak
    ties = jnp.sum(top, axis=axis, keepdims=True, dtype=peak.dtype)
    picked = jnp.take_along_axis(x, index, axis=axis)
    own = jnp.logical_and(picked >= peak, ties == 1)
    shifted = x - jnp.where(own, picked, peak)
    below = jnp.where(top, 0, jnp.exp(shifted))
    rest = jnp.sum(below, axis=axis, keepdims=True) + (ties - 1)
    shifted = jnp.take_along_axis(shifted, index, axis=axis)
    # 0 where own (x - x), as a constant: its gradient 1 - 1 would meet -rest in `picked`
    return jnp.where(own, 0, shifted) - jnp.log1p(rest)'''

_DIGAMMA = '''def _digamma(x):
    """digamma(x), -inf at 0 as the other frameworks' kernels (JAX's is NaN there)."""
    return jnp.where(x == 0, -jnp.inf, jax.scipy.special.digamma(x))'''

_TRIGAMMA = '''def _trigamma(x):
    """trigamma(x); below 0 by reflection, pi**2 / sin(pi x)**2 - trigamma(1 - x), with
    sin(pi x)**2 from x - round(x) (exact): jax's polygamma is -trigamma(1 - x) there
    (-1e-6 at x = -1e6 - 0.3, where trigamma is 15.08)."""
    neg = x < 0
    t = jax.scipy.special.polygamma(1, jnp.where(neg, 1 - x, x))
    r = x - jnp.round(x)
    s = jnp.sin(3.141592653589793 * jnp.where(neg, r, 0.5))
    return jnp.where(neg, 9.869604401089358 / (s * s) - t, t)'''
_SIGMOID = '''def _sigmoid(x):
    """1 / (1 + exp(-x)) as 1 - sigmoid(-x) above 0: the native kernel's gradient is
    s (1 - s) of the rounded s, 0 where s rounds to 1 (x beyond about 17 in float32, 37 in
    float64); taken on the side where s is small, the gradient keeps its relative accuracy
    (e^-x at large x). The value is the native one to an ulp."""
    positive = x > 0
    small = jax.nn.sigmoid(jnp.where(positive, -x, x))
    return jnp.where(positive, 1 - small, small)'''

_EXPM1 = '''def _expm1(x):
    """exp(x) - 1: the native kernel's gradient is out + 1 of the rounded out, 0 where
    out rounds to -1 (x below about -17 in float32, -37 in float64); below -1 it is
    exp(x) - 1, whose gradient exp(x) keeps its relative accuracy; above, the kernel."""
    return jnp.where(x < -1, jnp.exp(jnp.minimum(x, -1.0)) - 1, jnp.expm1(x))'''

_TANH = '''def _tanh(x):
    """tanh(x) as +-(1 - 2 sigmoid(-2|x|)) from |x| = 1/2 on: the native kernel's gradient
    is 1 - t**2 of the rounded t, 0 where t rounds to 1 (|x| beyond about 9 in float32, 19
    in float64); with the sigmoid taken where it is small the gradient keeps its relative
    accuracy (4 e^-2|x| at large |x|). Below 1/2 the native kernel, accurate near 0."""
    positive = x > 0
    tail = 1 - 2 * jax.nn.sigmoid(2 * jnp.where(positive, -x, x))
    return jnp.where(jnp.abs(x) < 0.5, jnp.tanh(x), jnp.where(positive, tail, -tail))'''

_ABS = '''def _abs(x):
    """|x| with gradient 0 at x = 0, as torch.abs's (jnp.abs gives 1 there)."""
    return x * jnp.sign(x)'''


class Runner:
    """Runs a generated JAX module: eager or compiled (``jax.jit``); gradients with
    ``jax.grad``. Building one turns on ``jax_enable_x64`` (process-wide, JAX has no other
    switch) so that float64 cases compute in float64."""

    def __init__(self):
        import jax
        import numpy as np

        jax.config.update("jax_enable_x64", True)
        self.jax, self.np = jax, np

    def tensor(self, a, dtype):
        np = self.np
        a = np.asarray(a)
        if a.dtype.kind != "b":
            a = a.astype(np.int64) if a.dtype.kind in "iu" else a.astype(dtype)
        return self.jax.numpy.asarray(a)

    def gradient(self, fn, arrays, dtype: str, mode: str):
        """fn(*tensors) and the gradient of its sum with respect to each float array (None
        for the others), as NumPy arrays."""
        jax, np = self.jax, self.np
        arrays = [np.asarray(a) for a in arrays]
        tensors = [self.tensor(a, dtype) for a in arrays]
        value = np.asarray((jax.jit(fn) if mode == "graph" else fn)(*tensors))
        pos = tuple(k for k, a in enumerate(arrays) if a.dtype.kind == "f")
        grads = [None] * len(arrays)
        if value.dtype.kind != "f":  # an int or bool result (argmax): nothing differentiates
            return value, [np.zeros(arrays[k].shape) if k in pos else None for k in range(len(arrays))]
        if pos:
            grad = jax.grad(lambda *t: jax.numpy.sum(fn(*t)), argnums=pos)
            for k, g in zip(pos, (jax.jit(grad) if mode == "graph" else grad)(*tensors)):
                grads[k] = np.asarray(g)
        return value, grads

    def args(self, spec, case, dtype):
        """The call's positional arguments (required inputs, learnable tensors, optional
        inputs) and, for each, its name where it is differentiated (else None)."""
        required = [i for i in spec.inputs if not i.optional]
        optional = [i for i in spec.inputs if i.optional]
        args, names = [], []
        for inp in required:
            v = case.inputs.get(inp.name)
            args.append(None if v is None else self.tensor(v, dtype))
            names.append(inp.name if v is not None and inp.dtype == "float" else None)
        for lr in spec.learnable:
            args.append(self.tensor(case.learnable[lr.name], dtype))
            names.append(lr.name)
        for inp in optional:
            v = case.inputs.get(inp.name)
            args.append(None if v is None else self.tensor(v, dtype))
            names.append(None)
        return args, names

    def run(self, mod, spec, case, dtype, mode, reductions):
        jax, np = self.jax, self.np
        cls = getattr(mod, spec.class_name)
        args, names = self.args(spec, case, dtype)
        values = {}
        for red in reductions:
            fn = cls(**case.params, reduction=red)
            values[red] = np.asarray((jax.jit(fn) if mode == "graph" else fn)(*args)).astype(float)
        pos = tuple(k for k, n in enumerate(names) if n is not None)
        grads = {}
        if pos:
            grad = jax.grad(cls(**case.params, reduction="sum"), argnums=pos)
            for k, g in zip(pos, (jax.jit(grad) if mode == "graph" else grad)(*args)):
                grads[names[k]] = np.asarray(g).astype(float)
        return values, grads


BACKEND = Backend(
    name="jax",
    label="JAX",
    runner=Runner,
    extra="jax",  # apart from MindSpore and Paddle: pip install "losscc[jax]"
    imports=("import dataclasses", "import numbers", "import jax", "import jax.numpy as jnp"),
    # a Python float is weakly typed: float64 arithmetic keeps it in float64 (with x64 on)
    wrap_scalars=False,
    where_scalars=True,
    quiet_loggers=("jax._src.xla_bridge",),  # "Unable to initialize backend 'tpu'" on a CPU machine
    # the generated class's own attributes (a frozen dataclass with __call__ and init)
    attributes=frozenset({"init"}),
    ops=_freeze({
        "exp": "jnp.exp({x})",
        "log": "jnp.log({x})",
        # XLA's log1p and expm1 are accurate near 0 in float64 and float32
        "log1p": "jnp.log1p({x})",
        "expm1": "_expm1({x})",  # not jnp.expm1: its gradient is 0 far below 0
        "sqrt": "jnp.sqrt({x})",
        "rsqrt": "jax.lax.rsqrt({x})",
        "abs": "_abs({x})",
        "tanh": "_tanh({x})",  # not jnp.tanh: its gradient is 0 in the tails
        "cosh": "jnp.cosh({x})",
        "atan": "jnp.arctan({x})",
        "lgamma": "jax.scipy.special.gammaln({x})",
        "digamma": "_digamma({x})",
        "trigamma": "_trigamma({x})",
        "cos": "jnp.cos({x})",
        "sin": "jnp.sin({x})",
        "erf": "jax.lax.erf({x})",
        "sigmoid": "_sigmoid({x})",  # not jax.nn.sigmoid: its gradient is 0 in the tail above 0
        # logaddexp(x, 0): max(x, 0) + log1p(exp(-|x|)), no threshold; gradient 1/2 at 0
        "softplus": "jax.nn.softplus({x})",
        # a tie splits the gradient in half, the convention of max(a, b) between two tensors
        "maximum": "jnp.maximum({x}, {y})",
        "minimum": "jnp.minimum({x}, {y})",
        "clip": "_clip({x}, {lo}, {hi})",
        "clip_min": "_clip({x}, lo={lo})",
        "clip_max": "_clip({x}, hi={hi})",
        "where": "jnp.where({c}, {x}, {y})",
        "and": "jnp.logical_and({x}, {y})",
        "or": "jnp.logical_or({x}, {y})",
        "not": "jnp.logical_not({x})",
        "sum": "jnp.sum({x}, axis={axis}, keepdims=True)",
        "mean": "jnp.mean({x}, axis={axis}, keepdims=True)",
        # the gradient is shared evenly among tied maxima (torch.amax's convention)
        "amax": "jnp.max({x}, axis={axis}, keepdims=True)",
        "logsumexp": "jax.nn.logsumexp({x}, axis={axis}, keepdims=True)",
        "softmax": "jax.nn.softmax({x}, axis={axis})",
        "log_softmax": "_log_softmax({x}, {axis})",
        "gather_log_softmax": "_gather_log_softmax({x}, {axis}, {index})",
        "argmax": "jnp.argmax({x}, axis={axis}, keepdims=True)",  # ties: the first index
        "argmin": "jnp.argmin({x}, axis={axis}, keepdims=True)",
        "round": "jnp.round({x})",  # half to even, as the reference
        "floor": "jnp.floor({x})",
        "ceil": "jnp.ceil({x})",
        "sign": "jnp.sign({x})",
        "take_along_axis": "jnp.take_along_axis({x}, {index}, axis={axis})",
        "lookup": "jnp.take({x}, {index})",
        "broadcast_to": "jnp.broadcast_to({x}, {shape})",
        "stop_gradient": "jax.lax.stop_gradient({x})",
        "cast": "jnp.astype({x}, {dtype})",
        "reshape": "jnp.reshape({x}, {shape})",
        "zeros_like": "jnp.zeros_like({x})",
        "full_like": "jnp.full_like({x}, {value})",
        "full": "jnp.full({shape}, {value}, dtype={dtype})",
        "arange": "jnp.arange({n}, dtype={like}.dtype)",
        "positions": "jnp.arange({n}, dtype={dtype})",
        "concat": "jnp.concatenate([{x}, {y}], axis={axis})",
        # functions, not methods: the result is a JAX array also for NumPy inputs
        "sum_all": "jnp.sum({x})",
        "mean_all": "jnp.mean({x})",
        # the dtype JAX computes in: float32 for a float64 NumPy input without x64
        "dtype_of": "jnp.result_type({x})",
        "half_dtypes": "(jnp.float16, jnp.bfloat16)",
        "float_dtypes": "(jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64)",
        "int_dtypes": "(jnp.int32, jnp.int64)",
        "float32": "jnp.float32",
    }),
    helpers=_freeze({"digamma": _DIGAMMA, "trigamma": _TRIGAMMA, "sigmoid": _SIGMOID, "tanh": _TANH, "expm1": _EXPM1, "clip": _CLIP, "clip_min": _CLIP, "clip_max": _CLIP, "abs": _ABS,
                     "log_softmax": _LOG_SOFTMAX, "gather_log_softmax": _GATHER_LOG_SOFTMAX}),
)
