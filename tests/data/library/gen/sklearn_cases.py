"""Case files from scikit-learn's regression metrics (NumPy float64): values, no gradients.

Run with a Python that has scikit-learn and numpy (not dependencies of losscc):
    python tests/data/library/gen/sklearn_cases.py
scikit-learn averages over all samples, so the per-sample values ("none") are the metric of
each row on its own and "mean" is the metric of the flattened arrays (every row has the
same length).  The files have no gradients: losscc's reference evaluator supplies them.
"""

import numpy as np
import sklearn
from casefile import case, normal, uniform, write
from sklearn import metrics

LIB = f"scikit-learn {sklearn.__version__} (NumPy {np.__version__}, float64)"


def per_row(fn, y_true, y_pred, scale, cid, note=None):
    none = np.array([scale * fn(t, p) for t, p in zip(y_true, y_pred)])
    mean = scale * fn(y_true.ravel(), y_pred.ravel())
    return case(cid, {}, {"y_true": y_true, "y_pred": y_pred}, {"none": none, "mean": mean}, {}, note)


def msle():
    rng = np.random.default_rng(301)
    fn = metrics.mean_squared_log_error
    cases = [per_row(fn, uniform(rng, (4, 5), 0.0, 5.0), uniform(rng, (4, 5), 0.0, 5.0), 1, "random_small"),
             per_row(fn, uniform(rng, (3, 6), 0.0, 1000.0), uniform(rng, (3, 6), 0.0, 1000.0), 1, "random_large"),
             per_row(fn, np.array([[0.0, 1.0, 2.0]]), np.array([[0.0, 1.0, 0.5]]), 1, "edge_zeros",
                     note="a prediction and a target of exactly 0, an exact match")]
    write("msle", LIB, "sklearn.metrics.mean_squared_log_error(y_true[n], y_pred[n]) per row n",
          "l_n = mean((log1p(y_true) - log1p(y_pred))**2) over the row (non-negative inputs). mean = the "
          "metric over all entries.", cases)


def mape():
    rng = np.random.default_rng(302)
    fn = metrics.mean_absolute_percentage_error
    signed = uniform(rng, (3, 4), 0.1, 5.0) * rng.choice([-1.0, 1.0], size=(3, 4))
    cases = [per_row(fn, uniform(rng, (4, 5), 0.5, 5.0), uniform(rng, (4, 5), 0.0, 5.0), 100, "random_positive"),
             per_row(fn, signed, uniform(rng, (3, 4), -5.0, 5.0), 100, "random_signed", note="targets of both signs")]
    write("mape", LIB, "100 * sklearn.metrics.mean_absolute_percentage_error(y_true[n], y_pred[n]) per row n",
          "l_n = 100*mean(abs(y_pred - y_true) / max(abs(y_true), float64 eps)) over the row. mean = the "
          "metric over all entries.", cases)


def pinball():
    rng = np.random.default_rng(303)
    cases = []
    for cid, alpha, shape in (("random_median", 0.5, (4, 5)), ("random_q0.9", 0.9, (3, 4)),
                              ("random_q0.1", 0.1, (6,))):
        y_true, y_pred = normal(rng, shape, 2.0), normal(rng, shape, 2.0)
        none = np.array([metrics.mean_pinball_loss([t], [p], alpha=alpha)
                         for t, p in zip(y_true.ravel(), y_pred.ravel())]).reshape(shape)
        mean = metrics.mean_pinball_loss(y_true.ravel(), y_pred.ravel(), alpha=alpha)
        cases.append(case(cid, {"alpha": alpha}, {"y_true": y_true, "y_pred": y_pred},
                          {"none": none, "mean": mean}, {}))
    write("pinball", LIB, "sklearn.metrics.mean_pinball_loss(y_true, y_pred, alpha=alpha), per entry for 'none'",
          "l = alpha*max(y_true - y_pred, 0) + (1 - alpha)*max(y_pred - y_true, 0). mean = sum/numel.", cases)


if __name__ == "__main__":
    msle()
    mape()
    pinball()
