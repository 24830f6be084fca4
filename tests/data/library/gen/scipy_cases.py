"""Case files from SciPy's robust losses of scipy.optimize.least_squares (NumPy float64).

Run with a Python that has scipy and numpy (not dependencies of losscc):
    python tests/data/library/gen/scipy_cases.py
least_squares minimises 0.5 * sum(rho(f_i**2)) over residuals f_i, with
rho(z) = f_scale**2 * rho0(z / f_scale**2); its loss function returns rho and its first
derivative in z.  A residual's cost is 0.5 * rho(f**2) and the derivative of that cost in
f is rho'(f**2) * f, so both the values and the gradients are SciPy's own.
"""

import numpy as np
import scipy
from casefile import case, normal, write
from scipy.optimize._lsq.least_squares import construct_loss_function

LIB = f"scipy {scipy.__version__} (NumPy {np.__version__}, float64)"


def robust(loss, inputs, f_scale, cid, note=None):
    f = (inputs["input"] - inputs["target"]).ravel()
    rho = construct_loss_function(f.size, loss, f_scale)(f)
    none = (0.5 * rho[0]).reshape(inputs["input"].shape)
    slope = (rho[1] * f).reshape(inputs["input"].shape)
    expected = {"none": none, "mean": np.mean(none), "sum": np.sum(none)}
    return case(cid, {"c": f_scale}, inputs, expected, {"input": slope, "target": -slope}, note)


def cauchy():
    rng = np.random.default_rng(501)
    cases = [robust("cauchy", {"input": normal(rng, (4, 5)), "target": normal(rng, (4, 5))}, 1.0, "random_c1"),
             robust("cauchy", {"input": normal(rng, (2, 3, 4), 5.0), "target": normal(rng, (2, 3, 4))}, 0.5,
                    "random_3d_c0.5"),
             robust("cauchy", {"input": normal(rng, (6,), 3.0), "target": normal(rng, (6,))}, 2.5, "random_c2.5"),
             robust("cauchy", {"input": np.array([0.0, 1e-6, 2.0, -2.0, 1e3, -40.0]), "target": np.zeros(6)}, 2.0,
                    "edge_small_and_large", note="residuals 0, 1e-6, +-f_scale, 1e3 and -40")]
    write("cauchy", LIB, "0.5 * scipy.optimize._lsq.least_squares.construct_loss_function(m, 'cauchy', "
          "f_scale=c)(input - target)[0] (the loss least_squares(loss='cauchy', f_scale=c) applies)",
          "l = 0.5*c**2*log(1 + ((input - target)/c)**2) per element; gradient rho'(f**2)*f from SciPy's "
          "rho[1].", cases)


if __name__ == "__main__":
    cauchy()
