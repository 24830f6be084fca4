"""The benchmarked losses: their inputs, which inputs are differentiated, and contenders.

Framework-neutral: inputs are NumPy arrays (float32; class indices are int64 here and
become int32 for MindSpore, whose ``ops.cross_entropy``/``nll_loss`` take int32).

Gradient rule: forward+backward means the gradient of the loss w.r.t. every float
*prediction* input, and w.r.t. regression targets too (huber, smooth_l1, mse, l1,
gaussian_nll, poisson_nll: both frameworks' built-ins differentiate them).  Labels
(class indices, binary/one-hot/probability labels, +-1 pair labels, KL targets) are
not differentiated: Paddle's built-in BCE, BCE-with-logits and KL-div return no
gradient for them and MindSpore's ``ops.kl_div`` returns zeros, so including them
would not compare like with like.  Nor is gaussian_nll's variance: Paddle's
``F.gaussian_nll_loss`` clamps it inside ``paddle.no_grad()``, so it has no gradient.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SIZES = {
    # full run: as in the issue
    "full": {"reg": (4096, 1024), "cls": (8192, 1000)},
    "quick": {"reg": (256, 128), "cls": (512, 100)},
}

KINDS = ("generated", "builtin", "handwritten", "floor")


@dataclass
class Case:
    name: str  # the spec / generated module name
    size: str  # "reg" or "cls"
    grads: tuple  # positions of the differentiated inputs
    elementwise: bool = False  # compared with the (x - y).sum() floor
    note: str = ""
    builtin: dict = field(default_factory=dict)  # framework -> what the built-in is
    handwritten: dict = field(default_factory=dict)  # framework -> description

    def make_inputs(self, scale: str, seed: int = 0) -> list:
        return make_inputs(self.name, SIZES[scale][self.size], seed)


def _log_softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def make_inputs(name: str, shape, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    f32 = np.float32
    n, c = shape

    def randn(*s):
        return rng.standard_normal(s, dtype=f32)

    def labels():
        return rng.integers(0, c, size=n).astype(np.int64)

    if name in ("huber", "smooth_l1", "mse", "l1", "log_cosh"):
        return [randn(n, c), randn(n, c)]
    if name == "bce":
        return [rng.uniform(0.02, 0.98, (n, c)).astype(f32), (rng.random((n, c)) < 0.5).astype(f32)]
    if name == "bce_with_logits":
        return [2 * randn(n, c), (rng.random((n, c)) < 0.5).astype(f32)]
    if name == "kl_div":
        return [_log_softmax(randn(n, c)).astype(f32), np.exp(_log_softmax(randn(n, c))).astype(f32)]
    if name == "gaussian_nll":
        return [randn(n, c), randn(n, c), rng.uniform(0.5, 2.0, (n, c)).astype(f32)]
    if name == "poisson_nll":
        x = 0.5 * randn(n, c)
        return [x, rng.poisson(np.exp(x)).astype(f32)]
    if name == "margin_ranking":
        return [randn(n * c), randn(n * c), np.where(rng.random(n * c) < 0.5, -1, 1).astype(f32)]
    if name == "cosine_embedding":
        return [randn(n, c), randn(n, c), np.where(rng.random(n) < 0.5, -1, 1).astype(f32)]
    if name in ("cross_entropy", "focal", "softmax_focal"):
        return [randn(n, c), labels()]
    if name == "cross_entropy_probs":
        return [randn(n, c), np.exp(_log_softmax(randn(n, c))).astype(f32)]
    if name == "nll":
        return [_log_softmax(randn(n, c)).astype(f32), labels()]
    if name == "sigmoid_focal":
        y = np.zeros((n, c), f32)
        y[np.arange(n), labels()] = 1.0
        return [randn(n, c), y]
    raise KeyError(name)


MS_FOCAL = "nn.FocalLoss(gamma=2) (softmax focal without alpha, deprecated since 2.8; labels (N,1))"

CASES = [
    Case("huber", "reg", (0, 1), True,
         builtin={"mindspore": "ops.huber_loss", "paddle": "F.smooth_l1_loss (is_huber=True: Huber)"},
         handwritten={"mindspore": "abs, <, where", "paddle": "abs, <, where"}),
    Case("smooth_l1", "reg", (0, 1), True,
         builtin={"mindspore": "ops.smooth_l1_loss(reduction='mean')", "paddle": "F.smooth_l1_loss(is_huber=False)"}),
    Case("mse", "reg", (0, 1), True, builtin={"mindspore": "ops.mse_loss", "paddle": "F.mse_loss"}),
    Case("l1", "reg", (0, 1), True, builtin={"mindspore": "ops.l1_loss", "paddle": "F.l1_loss"}),
    Case("log_cosh", "reg", (0, 1), True, note="no built-in in either framework",
         handwritten={"mindspore": "log(cosh(x - y)).mean()", "paddle": "log(cosh(x - y)).mean()"}),
    Case("bce", "reg", (0,), builtin={"mindspore": "ops.binary_cross_entropy", "paddle": "F.binary_cross_entropy"}),
    Case("bce_with_logits", "reg", (0,),
         builtin={"mindspore": "ops.binary_cross_entropy_with_logits", "paddle": "F.binary_cross_entropy_with_logits"}),
    Case("kl_div", "reg", (0,), builtin={"mindspore": "ops.kl_div('mean')", "paddle": "F.kl_div('mean')"}),
    Case("gaussian_nll", "reg", (0, 1),
         note="var not differentiated: Paddle's built-in clamps it under paddle.no_grad(), so it has no gradient",
         builtin={"mindspore": "ops.gaussian_nll_loss", "paddle": "F.gaussian_nll_loss"}),
    Case("poisson_nll", "reg", (0, 1),
         builtin={"mindspore": "nn.PoissonNLLLoss", "paddle": "F.poisson_nll_loss"}),
    Case("margin_ranking", "reg", (0, 1), note="1-D inputs of N*C elements",
         builtin={"mindspore": "ops.margin_ranking_loss", "paddle": "F.margin_ranking_loss"}),
    Case("cosine_embedding", "reg", (0, 1), note="[N, D] pairs",
         builtin={"mindspore": "ops.cosine_embedding_loss", "paddle": "F.cosine_embedding_loss"}),
    Case("cross_entropy", "cls", (0,), builtin={"mindspore": "ops.cross_entropy", "paddle": "F.cross_entropy"}),
    Case("cross_entropy_probs", "cls", (0,),
         builtin={"mindspore": "ops.cross_entropy (probability target)", "paddle": "F.cross_entropy(soft_label=True)"}),
    Case("nll", "cls", (0,), builtin={"mindspore": "ops.nll_loss", "paddle": "F.nll_loss"}),
    Case("focal", "cls", (0,), builtin={"mindspore": MS_FOCAL},
         handwritten={"mindspore": "softmax, gather_elements, log(p + 1e-8)",
                      "paddle": "softmax, take_along_axis, log(p + 1e-8)"}),
    Case("softmax_focal", "cls", (0,), builtin={"mindspore": MS_FOCAL}),
    Case("sigmoid_focal", "cls", (0,), note="one-hot labels; reduction 'sum' (Paddle's default)",
         builtin={"paddle": "F.sigmoid_focal_loss"}),
]

BY_NAME = {c.name: c for c in CASES}
