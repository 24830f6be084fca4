"""Paddle contenders: gen_<case> (generated), builtin_<case>, hand_<case>, floor_<case>.

Each takes the case's tensors positionally and returns the scalar loss.  Importing
this module imports paddle (import mindspore first when both are used).
"""

import paddle
import paddle.nn.functional as F

from ._gen import load

g_huber = load("paddle", "huber")
g_smooth_l1 = load("paddle", "smooth_l1")
g_mse = load("paddle", "mse")
g_l1 = load("paddle", "l1")
g_log_cosh = load("paddle", "log_cosh")
g_bce = load("paddle", "bce")
g_bce_with_logits = load("paddle", "bce_with_logits")
g_kl_div = load("paddle", "kl_div")
g_gaussian_nll = load("paddle", "gaussian_nll")
g_poisson_nll = load("paddle", "poisson_nll")
g_margin_ranking = load("paddle", "margin_ranking")
g_cosine_embedding = load("paddle", "cosine_embedding")
g_cross_entropy = load("paddle", "cross_entropy")
g_cross_entropy_probs = load("paddle", "cross_entropy_probs")
g_nll = load("paddle", "nll")
g_focal = load("paddle", "focal")
g_softmax_focal = load("paddle", "softmax_focal")
g_sigmoid_focal = load("paddle", "sigmoid_focal")


def to_tensor(a, requires_grad=False):
    return paddle.to_tensor(a, stop_gradient=not requires_grad)


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
    return F.smooth_l1_loss(x, y)  # is_huber=True (default): Huber(delta=1)


def builtin_smooth_l1(x, y):
    return F.smooth_l1_loss(x, y, is_huber=False)


def builtin_mse(x, y):
    return F.mse_loss(x, y)


def builtin_l1(x, y):
    return F.l1_loss(x, y)


def builtin_bce(p, t):
    return F.binary_cross_entropy(p, t)


def builtin_bce_with_logits(x, t):
    return F.binary_cross_entropy_with_logits(x, t)


def builtin_kl_div(x, t):
    return F.kl_div(x, t, reduction="mean")


def builtin_gaussian_nll(x, y, v):
    return F.gaussian_nll_loss(x, y, v)


def builtin_poisson_nll(x, y):
    return F.poisson_nll_loss(x, y)


def builtin_margin_ranking(a, b, t):
    return F.margin_ranking_loss(a, b, t)


def builtin_cosine_embedding(a, b, t):
    return F.cosine_embedding_loss(a, b, t)


def builtin_cross_entropy(x, t):
    return F.cross_entropy(x, t)


def builtin_cross_entropy_probs(x, t):
    return F.cross_entropy(x, t, soft_label=True)


def builtin_nll(x, t):
    return F.nll_loss(x, t)


def builtin_sigmoid_focal(x, t):
    return F.sigmoid_focal_loss(x, t)  # reduction='sum' (default)


# ---------------------------------------------------------------- hand-written
def hand_huber(x, y):
    d = paddle.abs(x - y)
    return paddle.where(d < 1.0, 0.5 * d * d, d - 0.5).mean()


def hand_focal(x, t):
    p = F.softmax(x, axis=1)
    pt = paddle.take_along_axis(p, t.unsqueeze(1), axis=1)
    return (-0.25 * (1 - pt) ** 2 * paddle.log(pt + 1e-8)).mean()


# ---------------------------------------------------------------- floor
def floor_huber(x, y):
    return (x - y).sum()


def floor_smooth_l1(x, y):
    return (x - y).sum()


def floor_mse(x, y):
    return (x - y).sum()


def hand_log_cosh(x, y):
    return paddle.log(paddle.cosh(x - y)).mean()


def floor_log_cosh(x, y):
    return (x - y).sum()


def floor_l1(x, y):
    return (x - y).sum()
