"""Case files from Keras 3 losses (JAX backend, float64).

Run with a Python that has keras, jax and numpy (not dependencies of losscc):
    python tests/data/library/gen/keras_cases.py
It rewrites the Keras-made files in tests/data/library/ (fixed seeds).  Values are the
loss classes' results with reduction=None, "sum_over_batch_size" (the file's "mean") and
"sum"; gradients are jax.grad of the "sum" result.
"""

import os

os.environ["KERAS_BACKEND"] = "jax"

import jax

jax.config.update("jax_enable_x64", True)

import keras
import numpy as np
from casefile import bits, case, normal, signs, uniform, write

keras.config.set_floatx("float64")
LIB = f"keras {keras.__version__} (JAX backend, jax {jax.__version__}), floatx float64"


def run(cls, kwargs, y_true, y_pred, cid, grad=("y_pred", "y_true"), note=None):
    yt, yp = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
    expected = {}
    for key, red in (("none", None), ("mean", "sum_over_batch_size"), ("sum", "sum")):
        expected[key] = np.asarray(cls(reduction=red, **kwargs)(yt, yp))
    total = cls(reduction="sum", **kwargs)
    g_pred, g_true = jax.grad(lambda p, t: total(t, p), argnums=(0, 1))(yp, yt)
    grads = {"y_pred": np.asarray(g_pred), "y_true": np.asarray(g_true)}
    return case(cid, kwargs, {"y_true": yt, "y_pred": yp}, expected, {k: grads[k] for k in grad}, note)


def dyadic(rng, shape, scale=1.0):
    """Multiples of 2**-8 on the last axis of 4: Keras 3 computes ops.mean of float64 in float32
    (dtypes.result_type("float64", "float32") is "float32"); on these values that mean is exact."""
    return np.round(rng.normal(size=shape) * scale * 256) / 256


DYADIC = "inputs are multiples of 2**-8 and the last axis has 4 entries, so Keras's float32 mean is exact"


def hinge():
    rng = np.random.default_rng(201)
    cases = [run(keras.losses.Hinge, {}, signs(rng, (5, 4)), dyadic(rng, (5, 4)), "random_2d", grad=["y_pred"],
                 note=DYADIC),
             run(keras.losses.Hinge, {}, signs(rng, (2, 3, 4)), dyadic(rng, (2, 3, 4), 2.0), "random_3d",
                 grad=["y_pred"], note=DYADIC)]
    write("hinge", LIB, "keras.losses.Hinge(reduction=r)(y_true, y_pred)",
          "l = mean(max(1 - y_true*y_pred, 0), axis=-1), y_true in {-1, 1}. mean = sum/number of "
          "per-sample values.", cases)


def squared_hinge():
    rng = np.random.default_rng(202)
    cases = [run(keras.losses.SquaredHinge, {}, signs(rng, (5, 4)), dyadic(rng, (5, 4)), "random_2d",
                 grad=["y_pred"], note=DYADIC),
             run(keras.losses.SquaredHinge, {}, signs(rng, (3, 4)), dyadic(rng, (3, 4), 3.0), "random_scaled",
                 grad=["y_pred"], note=DYADIC)]
    write("squared_hinge", LIB, "keras.losses.SquaredHinge(reduction=r)(y_true, y_pred)",
          "l = mean(max(1 - y_true*y_pred, 0)**2, axis=-1), y_true in {-1, 1}.", cases)


def categorical_hinge():
    rng = np.random.default_rng(203)
    cases = []
    for cid, n, c, scale in (("random_onehot", 5, 4, 1.0), ("random_wide", 3, 7, 2.0)):
        y = np.eye(c)[rng.integers(0, c, size=n)]
        cases.append(run(keras.losses.CategoricalHinge, {}, y, normal(rng, (n, c), scale), cid, grad=["y_pred"]))
    write("categorical_hinge", LIB, "keras.losses.CategoricalHinge(reduction=r)(y_true, y_pred)",
          "l = max(neg - pos + 1, 0), neg = max((1 - y_true)*y_pred, axis=-1), pos = sum(y_true*y_pred, "
          "axis=-1), y_true one-hot.", cases)


def kld():
    rng = np.random.default_rng(207)

    def probs(shape):
        p = rng.uniform(0.05, 1.0, size=shape)
        return np.round(p / p.sum(-1, keepdims=True), 4)

    cases = [run(keras.losses.KLDivergence, {}, probs((4, 5)), probs((4, 5)), "random_probs"),
             run(keras.losses.KLDivergence, {}, probs((2, 3, 4)), probs((2, 3, 4)), "random_3d"),
             run(keras.losses.KLDivergence, {}, np.array([[0.0, 0.25, 0.75], [1.0, 0.0, 0.0]]),
                 np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]), "edge_zeros", grad=["y_pred"],
                 note="probabilities of exactly 0 and 1, clipped to [1e-7, 1]")]
    write("kld", LIB, "keras.losses.KLDivergence(reduction=r)(y_true, y_pred)",
          "l = sum(t*log(t/q), axis=-1), t = clip(y_true, 1e-7, 1), q = clip(y_pred, 1e-7, 1).", cases)


def cosine_similarity():
    rng = np.random.default_rng(208)
    cases = [run(keras.losses.CosineSimilarity, {}, normal(rng, (4, 5)), normal(rng, (4, 5)), "random_2d"),
             run(keras.losses.CosineSimilarity, {}, normal(rng, (2, 3, 4), 10.0), normal(rng, (2, 3, 4)),
                 "random_3d"),
             run(keras.losses.CosineSimilarity, {}, np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]),
                 np.array([[1.0, -2.0, 0.5], [2.0, 4.0, 6.0]]), "edge_zero_vector", grad=["y_pred"],
                 note="a zero target vector (similarity 0) and parallel vectors")]
    write("cosine_similarity", LIB, "keras.losses.CosineSimilarity(reduction=r)(y_true, y_pred)",
          "l = -sum(normalize(y_true)*normalize(y_pred), axis=-1), normalize = keras's l2 normalization.",
          cases)


def tversky():
    rng = np.random.default_rng(209)
    cases = []
    for cid, alpha, beta in (("random_dice", 0.5, 0.5), ("random_fp_heavy", 0.7, 0.3),
                             ("random_fn_heavy", 0.2, 0.9)):
        cases.append(run(keras.losses.Tversky, {"alpha": alpha, "beta": beta, "axis": 1},
                         bits(rng, (4, 6)), uniform(rng, (4, 6), 0.0, 1.0), cid))
    write("tversky", LIB, "keras.losses.Tversky(alpha=alpha, beta=beta, axis=1, reduction=r)(y_true, y_pred)",
          "l_n = 1 - TP/(TP + alpha*A + beta*B + 1e-7) over axis 1, TP = sum(y_true*y_pred), "
          "A = sum(y_true*(1 - y_pred)), B = sum((1 - y_true)*y_pred) (as Keras computes it).", cases)


def focal():
    """Keras takes one-hot targets; the file keeps the class index each row was made from."""
    rng = np.random.default_rng(210)
    cases = []
    for cid, alpha, gamma, (n, c), scale in (("alpha0.25_gamma2", 0.25, 2.0, (5, 4), 1.0),
                                            ("alpha1_gamma0_is_ce", 1.0, 0.0, (4, 3), 2.0),
                                            ("alpha0.5_gamma1.5", 0.5, 1.5, (3, 6), 3.0)):
        label = rng.integers(0, c, size=n)
        logits = normal(rng, (n, c), scale)
        kwargs = {"alpha": alpha, "gamma": gamma, "from_logits": True}
        cls = keras.losses.CategoricalFocalCrossentropy
        onehot = np.eye(c)[label]
        expected = {key: np.asarray(cls(reduction=red, **kwargs)(onehot, logits))
                    for key, red in (("none", None), ("mean", "sum_over_batch_size"), ("sum", "sum"))}
        total = cls(reduction="sum", **kwargs)
        grad = np.asarray(jax.grad(lambda z: total(onehot, z))(logits))
        cases.append(case(cid, {"alpha": alpha, "gamma": gamma}, {"y_true": label, "y_pred": logits}, expected,
                          {"y_pred": grad}, note="y_true is the class index; Keras was given one_hot(y_true, C)"))
    write("focal", LIB, "keras.losses.CategoricalFocalCrossentropy(alpha=alpha, gamma=gamma, from_logits=True, "
          "reduction=r)(one_hot(y_true, C), y_pred)",
          "l = sum(-alpha*(1 - p)**gamma*y*log(p), axis=-1), p = clip(softmax(y_pred), 1e-7, 1 - 1e-7), "
          "y = one_hot(y_true); every p here lies inside the clip.", cases, class_axis=-1)


if __name__ == "__main__":
    for make in (hinge, squared_hinge, categorical_hinge, kld, cosine_similarity, tversky, focal):
        make()
