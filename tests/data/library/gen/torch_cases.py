"""Case files from PyTorch's torch.nn.functional losses, in float64.

Run with a Python that has torch and numpy (not a dependency of losscc):
    python tests/data/library/gen/torch_cases.py
It rewrites the torch-made files in tests/data/library/ (fixed seeds: the same torch
version gives the same bytes).
"""

import numpy as np
import torch
import torch.nn.functional as F
from casefile import bits, case, normal, signs, uniform, write

LIB = f"torch {torch.__version__}"


def run(fn, inputs, grad, params, cid, note=None, reductions=("none", "mean", "sum"), tensor_params=()):
    """fn(**inputs, **params, reduction=r) for each r; gradient of the 'sum' result."""
    expected, grads = {}, {}
    for r in reductions:
        ts = {k: torch.tensor(v, dtype=torch.int64 if v.dtype.kind == "i" else torch.float64,
                              requires_grad=(k in grad and r == "sum")) for k, v in inputs.items()}
        tp = {k: torch.tensor(v, dtype=torch.float64) if k in tensor_params else v for k, v in params.items()}
        out = fn(**ts, **tp, reduction=r)
        expected[r] = out.detach().numpy()
        if r == "sum":
            out.backward()
            grads = {k: ts[k].grad.numpy() for k in grad}
    file_params = {k: ({"dtype": "float64", "shape": list(np.shape(v)), "data": np.asarray(v).tolist()}
                       if k in tensor_params else v) for k, v in params.items()}
    return case(cid, file_params, inputs, expected, grads, note)


def soft_margin():
    rng = np.random.default_rng(101)
    fn = F.soft_margin_loss
    cases = [run(fn, {"input": normal(rng, (4, 5)), "target": signs(rng, (4, 5))}, ["input"], {}, "random_2d"),
             run(fn, {"input": normal(rng, (7,), 3.0), "target": signs(rng, (7,))}, ["input"], {}, "random_1d"),
             run(fn, {"input": np.array([0.0, 30.0, -30.0, 1000.0, -1000.0, 1e-8]),
                      "target": np.array([1.0, 1.0, 1.0, 1.0, -1.0, -1.0])}, ["input"], {}, "edge_large",
                 note="margins 0, +-30, 1000 and 1e-8 (torch returns inf at a margin of -1000)")]
    write("soft_margin", LIB, "torch.nn.functional.soft_margin_loss(input, target, reduction=reduction)",
          "l = log(1 + exp(-target*input)), target in {1, -1}. mean = sum/numel.", cases)


def multilabel_soft_margin():
    rng = np.random.default_rng(102)
    fn = F.multilabel_soft_margin_loss
    cases = [run(fn, {"input": normal(rng, (4, 5)), "target": bits(rng, (4, 5))}, ["input"], {}, "random_plain"),
             run(fn, {"input": normal(rng, (3, 6), 2.0), "target": bits(rng, (3, 6))}, ["input"],
                 {"weight": uniform(rng, (6,), 0.1, 2.0)}, "class_weight", tensor_params=("weight",)),
             run(fn, {"input": np.array([[0.0, 30.0, -30.0], [1000.0, -1000.0, 1e-8]]),
                      "target": np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])}, ["input"], {}, "edge_large",
                 note="logits 0, +-30, +-1000 against both targets")]
    write("multilabel_soft_margin", LIB,
          "torch.nn.functional.multilabel_soft_margin_loss(input, target, weight=weight, reduction=reduction)",
          "l_n = -mean_c w_c*(y*log(sigmoid(x)) + (1-y)*log(sigmoid(-x))) over classes; one value per "
          "sample. mean = sum/N.", cases)


def hinge_embedding():
    rng = np.random.default_rng(103)
    fn = F.hinge_embedding_loss
    cases = [run(fn, {"input": uniform(rng, (4, 5), 0.0, 2.0), "target": signs(rng, (4, 5))}, ["input"],
                 {"margin": 1.0}, "random_margin1"),
             run(fn, {"input": normal(rng, (9,), 2.0), "target": signs(rng, (9,))}, ["input"],
                 {"margin": 2.5}, "random_margin2.5"),
             run(fn, {"input": np.array([1.0, 0.5, 1.5, 1.0, 0.0, 0.0]),
                      "target": np.array([-1.0, -1.0, -1.0, 1.0, 1.0, -1.0])}, ["input"],
                 {"margin": 1.0}, "edge_hinge_point", note="margin - input == 0 exactly at index 0")]
    write("hinge_embedding", LIB,
          "torch.nn.functional.hinge_embedding_loss(input, target, margin=margin, reduction=reduction)",
          "l = input if target == 1, max(0, margin - input) if target == -1. mean = sum/numel.", cases)


def multi_margin():
    rng = np.random.default_rng(104)
    fn = F.multi_margin_loss
    cases = []
    for cid, p, margin, w in (("random_p1", 1, 1.0, False), ("random_p2_margin0.5", 2, 0.5, False),
                              ("class_weight_p1", 1, 1.5, True), ("class_weight_p2", 2, 1.0, True)):
        x, y = normal(rng, (5, 4)), rng.integers(0, 4, size=(5,))
        params = {"p": p, "margin": margin}
        if w:
            params["weight"] = uniform(rng, (4,), 0.1, 2.0)
        cases.append(run(fn, {"input": x, "target": y}, ["input"], params, cid, tensor_params=("weight",)))
    x = np.array([[1.0, 0.0, 0.5], [0.25, 0.25, 0.25], [3.0, -2.0, 0.0]])
    cases.append(run(fn, {"input": x, "target": np.array([0, 1, 0])}, ["input"], {"p": 1, "margin": 1.0},
                     "edge_hinge_point", note="margin - x[y] + x[i] == 0 exactly in row 0, class 1"))
    write("multi_margin", LIB,
          "torch.nn.functional.multi_margin_loss(input, target, p=p, margin=margin, weight=weight, "
          "reduction=reduction)",
          "l_n = sum_{i != y} w[y]*max(0, margin - x[y] + x[i])**p / C. mean = sum/N.", cases, class_axis=1)


def triplet_margin():
    rng = np.random.default_rng(105)

    def fn(anchor, positive, negative, reduction, **kw):
        return F.triplet_margin_loss(anchor, positive, negative, reduction=reduction, **kw)

    names = ["anchor", "positive", "negative"]
    cases = []
    for cid, params in (("random_plain", {"margin": 1.0, "p": 2.0, "eps": 1e-6, "swap": False}),
                        ("random_swap", {"margin": 0.5, "p": 2.0, "eps": 1e-6, "swap": True}),
                        ("random_p1", {"margin": 2.0, "p": 1.0, "eps": 1e-6, "swap": False}),
                        ("random_p3_swap", {"margin": 1.0, "p": 3.0, "eps": 1e-4, "swap": True})):
        inputs = {k: normal(rng, (5, 4)) for k in names}
        cases.append(run(fn, inputs, names, params, cid))
    write("triplet_margin", LIB,
          "torch.nn.functional.triplet_margin_loss(anchor, positive, negative, margin=margin, p=p, eps=eps, "
          "swap=swap, reduction=reduction)",
          "l_n = max(d(a, p) - d(a, n) + margin, 0), d(x, y) = ||x - y + eps||_p; swap: d(a, n) -> "
          "min(d(a, n), d(p, n)). mean = sum/N.", cases)


if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
    for make in (soft_margin, multilabel_soft_margin, hinge_embedding, multi_margin, triplet_margin):
        make()
