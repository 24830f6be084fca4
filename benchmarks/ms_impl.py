"""MindSpore contenders: gen_<case> (generated), builtin_<case>, hand_<case>, floor_<case>.

Each takes the case's tensors positionally and returns the scalar loss; all are
plain module-level ``def``s so that ``ms.jit`` can parse them.  Importing this module
imports mindspore (import it before paddle).
"""

import mindspore as ms
from mindspore import nn, ops

from ._gen import load

g_huber = load("mindspore", "huber")
g_smooth_l1 = load("mindspore", "smooth_l1")
g_mse = load("mindspore", "mse")
g_l1 = load("mindspore", "l1")
g_log_cosh = load("mindspore", "log_cosh")
g_bce = load("mindspore", "bce")
g_bce_with_logits = load("mindspore", "bce_with_logits")
g_kl_div = load("mindspore", "kl_div")
g_gaussian_nll = load("mindspore", "gaussian_nll")
g_poisson_nll = load("mindspore", "poisson_nll")
g_margin_ranking = load("mindspore", "margin_ranking")
g_cosine_embedding = load("mindspore", "cosine_embedding")
g_cross_entropy = load("mindspore", "cross_entropy")
g_cross_entropy_probs = load("mindspore", "cross_entropy_probs")
g_nll = load("mindspore", "nll")
g_focal = load("mindspore", "focal")
g_softmax_focal = load("mindspore", "softmax_focal")
g_sigmoid_focal = load("mindspore", "sigmoid_focal")

POISSON = nn.PoissonNLLLoss()
FOCAL = nn.FocalLoss(gamma=2.0)


def to_tensor(a):
    if a.dtype.kind in "iu":
        return ms.Tensor(a.astype("int32"))
    return ms.Tensor(a)


# ---------------------------------------------------------------- generated
def gen_huber(x, y):
    return g_huber.huber(x, y)


def gen_smooth_l1(x, y):
    return g_smooth_l1.smooth_l1(x, y)


def gen_mse(x, y):
    return g_mse.mse(x, y)


def gen_l1(x, y):
    return g_l1.l1(x, y)


def gen_log_cosh(x, y):
    return g_log_cosh.log_cosh(x, y)


def gen_bce(p, t):
    return g_bce.bce(p, t)


def gen_bce_with_logits(x, t):
    return g_bce_with_logits.bce_with_logits(x, t)


def gen_kl_div(x, t):
    return g_kl_div.kl_div(x, t)


def gen_gaussian_nll(x, y, v):
    return g_gaussian_nll.gaussian_nll(x, y, v)


def gen_poisson_nll(x, y):
    return g_poisson_nll.poisson_nll(x, y)


def gen_margin_ranking(a, b, t):
    return g_margin_ranking.margin_ranking(a, b, t)


def gen_cosine_embedding(a, b, t):
    return g_cosine_embedding.cosine_embedding(a, b, t)


def gen_cross_entropy(x, t):
    return g_cross_entropy.cross_entropy(x, t)


def gen_cross_entropy_probs(x, t):
    return g_cross_entropy_probs.cross_entropy_probs(x, t)


def gen_nll(x, t):
    return g_nll.nll(x, t)


def gen_focal(x, t):
    return g_focal.focal(x, t)


def gen_softmax_focal(x, t):
    return g_softmax_focal.softmax_focal(x, t)


def gen_sigmoid_focal(x, t):
    return g_sigmoid_focal.sigmoid_focal(x, t)


# ---------------------------------------------------------------- built-ins
def builtin_huber(x, y):
    return ops.huber_loss(x, y)


def builtin_smooth_l1(x, y):
    return ops.smooth_l1_loss(x, y, beta=1.0, reduction="mean")


def builtin_mse(x, y):
    return ops.mse_loss(x, y)


def builtin_l1(x, y):
    return ops.l1_loss(x, y)


def builtin_bce(p, t):
    return ops.binary_cross_entropy(p, t)


def builtin_bce_with_logits(x, t):
    return ops.binary_cross_entropy_with_logits(x, t)


def builtin_kl_div(x, t):
    return ops.kl_div(x, t, "mean")


def builtin_gaussian_nll(x, y, v):
    return ops.gaussian_nll_loss(x, y, v)


def builtin_poisson_nll(x, y):
    return POISSON(x, y)


def builtin_margin_ranking(a, b, t):
    return ops.margin_ranking_loss(a, b, t)


def builtin_cosine_embedding(a, b, t):
    return ops.cosine_embedding_loss(a, b, t)


def builtin_cross_entropy(x, t):
    return ops.cross_entropy(x, t)


def builtin_cross_entropy_probs(x, t):
    return ops.cross_entropy(x, t)


def builtin_nll(x, t):
    return ops.nll_loss(x, t)


def builtin_focal(x, t):
    return FOCAL(x, ops.reshape(t, (-1, 1)))


def builtin_softmax_focal(x, t):
    return FOCAL(x, ops.reshape(t, (-1, 1)))


# ---------------------------------------------------------------- hand-written
def hand_huber(x, y):
    d = ops.abs(x - y)
    return ops.where(d < 1.0, 0.5 * d * d, d - 0.5).mean()


def hand_focal(x, t):
    p = ops.softmax(x, axis=1)
    pt = ops.gather_elements(p, 1, ops.reshape(t, (-1, 1)))
    return (-0.25 * (1 - pt) ** 2 * ops.log(pt + 1e-8)).mean()


# ---------------------------------------------------------------- floor
def floor_huber(x, y):
    return (x - y).sum()


def floor_smooth_l1(x, y):
    return (x - y).sum()


def floor_mse(x, y):
    return (x - y).sum()


def hand_log_cosh(x, y):
    return ops.log(ops.cosh(x - y)).mean()


def floor_log_cosh(x, y):
    return (x - y).sum()


def floor_l1(x, y):
    return (x - y).sum()
