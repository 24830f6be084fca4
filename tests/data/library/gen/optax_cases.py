"""Case files from optax losses (JAX, float64).

Run with a Python that has optax, jax and numpy (not dependencies of losscc):
    python tests/data/library/gen/optax_cases.py
optax losses return one value per example and have no reduction argument: "none" is the
optax result, "mean" and "sum" are jnp.mean and jnp.sum of it, and the gradients are
jax.grad of the sum.
"""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
import optax
from casefile import case, normal, signs, uniform, write

LIB = f"optax {optax.__version__} (jax {jax.__version__}, x64)"


def run(fn, inputs, grad, params, cid, note=None):
    arrays = {k: jnp.asarray(v) for k, v in inputs.items()}
    none = fn(**arrays, **params)
    names = list(grad)

    def total(*diff):
        return jnp.sum(fn(**dict(arrays, **dict(zip(names, diff))), **params))

    gs = jax.grad(total, argnums=tuple(range(len(names))))(*[arrays[k] for k in names])
    expected = {"none": np.asarray(none), "mean": np.asarray(jnp.mean(none)), "sum": np.asarray(jnp.sum(none))}
    return case(cid, params, inputs, expected, {k: np.asarray(g) for k, g in zip(names, gs)}, note)


def softmax_probs(rng, shape):
    p = rng.uniform(0.0, 1.0, size=shape)
    return np.round(p / p.sum(-1, keepdims=True), 4)


def poly_loss():
    rng = np.random.default_rng(401)
    fn = optax.losses.poly_loss_cross_entropy
    onehot = np.eye(5)[rng.integers(0, 5, size=4)]
    cases = [run(fn, {"logits": normal(rng, (4, 5)), "labels": onehot}, ["logits"], {"epsilon": 2.0},
                 "onehot_eps2"),
             run(fn, {"logits": normal(rng, (3, 4), 3.0), "labels": softmax_probs(rng, (3, 4))},
                 ["logits", "labels"], {"epsilon": -1.0}, "soft_labels_eps-1"),
             run(fn, {"logits": normal(rng, (2, 3, 4)), "labels": softmax_probs(rng, (2, 3, 4))},
                 ["logits", "labels"], {"epsilon": 0.5}, "soft_labels_3d"),
             run(fn, {"logits": np.array([[30.0, -30.0, 0.0], [1000.0, 0.0, -1000.0]]),
                      "labels": np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])}, ["logits"], {"epsilon": 2.0},
                 "edge_large_logits", note="logits of 30 and 1000")]
    write("poly_loss", LIB, "optax.losses.poly_loss_cross_entropy(logits, labels, epsilon=epsilon)",
          "l = softmax_cross_entropy(logits, labels) + epsilon*sum(labels*(1 - softmax(logits)), axis=-1).",
          cases)


def generalized_kl():
    rng = np.random.default_rng(402)
    fn = optax.losses.generalized_kl_divergence
    cases = [run(fn, {"log_predictions": normal(rng, (4, 5)), "targets": uniform(rng, (4, 5), 0.01, 3.0)},
                 ["log_predictions", "targets"], {}, "random_2d"),
             run(fn, {"log_predictions": normal(rng, (2, 3, 4), 2.0),
                      "targets": uniform(rng, (2, 3, 4), 0.001, 10.0)},
                 ["log_predictions", "targets"], {}, "random_3d"),
             run(fn, {"log_predictions": np.array([[30.0, -30.0, 0.0]]), "targets": np.array([[1e-6, 2.0, 1.0]])},
                 ["log_predictions", "targets"], {}, "edge_large", note="log-predictions of +-30, a tiny target")]
    write("generalized_kl", LIB, "optax.losses.generalized_kl_divergence(log_predictions, targets)",
          "l = sum(t*(log(t) - log_predictions) - t + exp(log_predictions), axis=-1).", cases)


def multiclass_hinge():
    rng = np.random.default_rng(403)
    fn = optax.losses.multiclass_hinge_loss
    cases = [run(fn, {"scores": normal(rng, (5, 4)), "labels": rng.integers(0, 4, size=5)}, ["scores"], {},
                 "random_2d"),
             run(fn, {"scores": normal(rng, (2, 3, 6), 0.3), "labels": rng.integers(0, 6, size=(2, 3))},
                 ["scores"], {}, "random_3d_close", note="scores close together: some margins below 1"),
             run(fn, {"scores": np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 0.0]]), "labels": np.array([0, 1])},
                 ["scores"], {}, "edge_zero_loss", note="row 0 separated by more than 1")]
    write("multiclass_hinge", LIB, "optax.losses.multiclass_hinge_loss(scores, labels)",
          "l = max(scores + 1 - one_hot(labels), axis=-1) - scores[labels].", cases, class_axis=-1)


def multiclass_perceptron():
    rng = np.random.default_rng(404)
    fn = optax.losses.multiclass_perceptron_loss
    cases = [run(fn, {"scores": normal(rng, (5, 4)), "labels": rng.integers(0, 4, size=5)}, ["scores"], {},
                 "random_2d"),
             run(fn, {"scores": normal(rng, (2, 3, 6), 3.0), "labels": rng.integers(0, 6, size=(2, 3))},
                 ["scores"], {}, "random_3d")]
    write("multiclass_perceptron", LIB, "optax.losses.multiclass_perceptron_loss(scores, labels)",
          "l = max(scores, axis=-1) - scores[labels].", cases, class_axis=-1)


def cosine_distance():
    rng = np.random.default_rng(405)
    fn = optax.losses.cosine_distance
    cases = [run(fn, {"predictions": normal(rng, (4, 5)), "targets": normal(rng, (4, 5))},
                 ["predictions", "targets"], {"epsilon": 0.0}, "random_eps0"),
             run(fn, {"predictions": normal(rng, (2, 3, 4), 5.0), "targets": normal(rng, (2, 3, 4))},
                 ["predictions", "targets"], {"epsilon": 1e-3}, "random_3d_eps"),
             run(fn, {"predictions": np.array([[1e-4, -2e-4, 0.0], [1.0, 2.0, 3.0]]),
                      "targets": np.array([[1.0, 1.0, 1.0], [-2.0, -4.0, -6.0]])},
                 ["predictions", "targets"], {"epsilon": 0.01}, "edge_small_norm",
                 note="a prediction of norm below epsilon; opposite vectors")]
    write("cosine_distance", LIB, "optax.losses.cosine_distance(predictions, targets, epsilon=epsilon)",
          "l = 1 - sum(p*t, axis=-1) / (max(|p|, epsilon) * max(|t|, epsilon)).", cases)


def binary_hinge():
    rng = np.random.default_rng(406)
    fn = optax.losses.hinge_loss
    cases = [run(fn, {"predictor_outputs": normal(rng, (4, 5)), "targets": signs(rng, (4, 5))},
                 ["predictor_outputs"], {}, "random_2d"),
             run(fn, {"predictor_outputs": normal(rng, (7,), 3.0), "targets": signs(rng, (7,))},
                 ["predictor_outputs"], {}, "random_1d")]
    write("binary_hinge", LIB, "optax.losses.hinge_loss(predictor_outputs, targets)",
          "l = max(0, 1 - predictor_outputs*targets) per element, targets in {-1, 1}.", cases)


def perceptron():
    rng = np.random.default_rng(407)
    fn = optax.losses.perceptron_loss
    cases = [run(fn, {"predictor_outputs": normal(rng, (4, 5)), "targets": signs(rng, (4, 5))},
                 ["predictor_outputs"], {}, "random_2d"),
             run(fn, {"predictor_outputs": normal(rng, (2, 3, 2), 3.0), "targets": signs(rng, (2, 3, 2))},
                 ["predictor_outputs"], {}, "random_3d")]
    write("perceptron", LIB, "optax.losses.perceptron_loss(predictor_outputs, targets)",
          "l = max(0, -predictor_outputs*targets) per element, targets in {-1, 1}.", cases)


def softmax_dice():
    rng = np.random.default_rng(408)
    fn = optax.losses.dice_loss
    cases = []
    for cid, params, (n, p, c) in (("random_dice", {"smooth": 1.0, "alpha": 0.5, "beta": 0.5}, (3, 6, 4)),
                                   ("random_tversky", {"smooth": 0.1, "alpha": 0.7, "beta": 0.3}, (2, 8, 3)),
                                   ("random_no_smooth", {"smooth": 1e-3, "alpha": 0.2, "beta": 0.8}, (2, 5, 3))):
        targets = np.eye(c)[rng.integers(0, c, size=(n, p))]
        cases.append(run(fn, {"predictions": normal(rng, (n, p, c), 2.0), "targets": targets}, ["predictions"],
                         params, cid))
    write("softmax_dice", LIB, "optax.losses.dice_loss(predictions, targets, smooth=smooth, alpha=alpha, "
          "beta=beta) (apply_softmax=True, reduction='mean' over classes)",
          "p = softmax(predictions, axis=-1); per class c, over the positions of each sample: I = sum(p*t), "
          "dice_c = 1 - (I + smooth)/(I + alpha*(sum(p) - I) + beta*(sum(t) - I) + smooth); l_n = mean over "
          "classes.", cases)


def log_cosh():
    rng = np.random.default_rng(409)
    fn = optax.losses.log_cosh
    cases = [run(fn, {"predictions": normal(rng, (4, 5)), "targets": normal(rng, (4, 5))},
                 ["predictions", "targets"], {}, "random_2d"),
             run(fn, {"predictions": normal(rng, (2, 3, 4), 10.0), "targets": normal(rng, (2, 3, 4))},
                 ["predictions", "targets"], {}, "random_3d_scaled"),
             run(fn, {"predictions": np.array([0.0, 1e-4, -2.5, 30.0, -200.0, 500.0]),
                      "targets": np.array([0.0, 0.0, 0.0, 0.0, 0.0, -0.5])},
                 ["predictions", "targets"], {}, "edge_small_and_large",
                 note="differences 0, 1e-4, 30, -200 and 500.5 (cosh overflows float64 beyond 710)")]
    write("log_cosh", LIB, "optax.losses.log_cosh(predictions, targets)",
          "l = logaddexp(d, -d) - log(2), d = predictions - targets, per element.", cases)


def sigmoid_focal():
    rng = np.random.default_rng(410)
    fn = optax.losses.sigmoid_focal_loss
    cases = [run(fn, {"logits": normal(rng, (4, 5), 2.0), "labels": np.round(rng.uniform(size=(4, 5)))},
                 ["logits"], {"alpha": 0.25, "gamma": 2.0}, "alpha0.25_gamma2"),
             run(fn, {"logits": normal(rng, (3, 4), 3.0), "labels": np.round(rng.uniform(size=(3, 4)))},
                 ["logits"], {"alpha": 0.6, "gamma": 1.5}, "alpha0.6_gamma1.5"),
             run(fn, {"logits": normal(rng, (2, 3, 2)), "labels": uniform(rng, (2, 3, 2), 0.0, 1.0)},
                 ["logits", "labels"], {"alpha": 0.5, "gamma": 0.5}, "soft_labels_gamma0.5",
                 note="soft labels: 1 - p_t = (1 - y)*p + y*(1 - p)"),
             run(fn, {"logits": np.array([30.0, -30.0, 15.0, -15.0, 0.5, -80.0]),
                      "labels": np.array([1.0, 1.0, 0.0, 0.0, 1.0, 0.0])}, ["logits"],
                 {"alpha": 0.25, "gamma": 2.0}, "edge_large_logits", note="logits of +-15, +-30 and -80")]
    write("sigmoid_focal", LIB, "optax.losses.sigmoid_focal_loss(logits, labels, alpha=alpha, gamma=gamma)",
          "l = alpha_t*(1 - p_t)**gamma*sigmoid_binary_cross_entropy(logits, labels), p = sigmoid(logits), "
          "1 - p_t = (1 - y)*p + y*(1 - p), alpha_t = alpha*y + (1 - alpha)*(1 - y), per element.", cases)


if __name__ == "__main__":
    for make in (poly_loss, generalized_kl, multiclass_hinge, multiclass_perceptron, cosine_distance, binary_hinge,
                 perceptron, softmax_dice, log_cosh, sigmoid_focal):
        make()
