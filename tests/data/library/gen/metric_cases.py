"""Case files for the metric-learning losses and total variation, in float64.

contrastive, info_nce, nt_xent and triplet_batch_hard are PyTorch expressions of the
papers' formulas (the libraries that have them mine pairs in a batch, with other
parameters; see each file's `reference`); total_variation is kornia's own function.
Run with a Python that has torch, kornia and numpy (not dependencies of losscc):
    python tests/data/library/gen/metric_cases.py
"""

import kornia
import numpy as np
import torch
import torch.nn.functional as F
from casefile import bits, normal, write
from torch_cases import run

LIB = f"torch {torch.__version__}"


def reduce(per_element, reduction, denominator=None):
    if reduction == "none":
        return per_element
    if reduction == "sum":
        return per_element.sum()
    return per_element.sum() / (per_element.numel() if denominator is None else denominator)


def contrastive():
    rng = np.random.default_rng(201)

    def fn(x1, x2, target, margin, reduction):
        d = torch.linalg.vector_norm(x1 - x2, dim=-1)
        per = target * d**2 / 2 + (1 - target) * torch.clamp(margin - d, min=0) ** 2 / 2
        return reduce(per, reduction)

    cases = []
    for cid, shape, margin in (("random_margin1", (6, 4), 1.0), ("random_margin3", (5, 3), 3.0),
                               ("batched_2d", (2, 3, 4), 2.0)):
        x1, x2 = normal(rng, shape), normal(rng, shape)
        cases.append(run(fn, {"x1": x1, "x2": x2, "target": bits(rng, shape[:-1])}, ["x1", "x2"],
                         {"margin": margin}, cid))
    x1 = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 4.0], [0.5, 0.0]])
    x2 = np.array([[0.6, 0.8], [0.3, 0.4], [0.0, 0.0], [0.0, 0.0]])
    cases.append(run(fn, {"x1": x1, "x2": x2, "target": np.array([0.0, 0.0, 0.0, 1.0])}, ["x1", "x2"],
                     {"margin": 1.0}, "edge_margin", note="distances 1 (at the margin), 0.5, 5 and 0.5"))
    write("contrastive", LIB, "d = torch.linalg.vector_norm(x1 - x2, dim=-1); target * d**2 / 2 + "
          "(1 - target) * torch.clamp(margin - d, min=0)**2 / 2 (Hadsell et al. 2006, eq. 4 with Y = 1 - target)",
          "l = target*d^2/2 + (1-target)*max(margin-d, 0)^2/2, d the Euclidean distance over the last axis. "
          "mean = sum/numel.", cases)


def info_nce():
    rng = np.random.default_rng(202)

    def fn(query, positive_key, temperature, reduction):
        q, k = F.normalize(query, dim=-1), F.normalize(positive_key, dim=-1)
        logits = q @ k.T / temperature
        return F.cross_entropy(logits, torch.arange(len(q)), reduction=reduction)

    cases = [run(fn, {"query": normal(rng, (5, 4)), "positive_key": normal(rng, (5, 4))},
                 ["query", "positive_key"], {"temperature": t}, cid)
             for cid, t in (("random_t0.1", 0.1), ("random_t1", 1.0), ("random_t0.05", 0.05))]
    q = normal(rng, (4, 3))
    cases.append(run(fn, {"query": q, "positive_key": q + normal(rng, (4, 3), 0.01)}, ["query", "positive_key"],
                     {"temperature": 0.07}, "near_positive", note="keys close to their queries"))
    write("info_nce", LIB, "F.cross_entropy(F.normalize(query) @ F.normalize(positive_key).T / temperature, "
          "torch.arange(N), reduction=reduction) (in-batch InfoNCE, as the info-nce-pytorch package)",
          "l_n = -log softmax_m(cos(q_n, k_m)/t)[n]. mean = sum/N.", cases)


def nt_xent():
    rng = np.random.default_rng(203)

    def fn(z_i, z_j, temperature, reduction):
        n = len(z_i)
        z = F.normalize(torch.cat([z_i, z_j]), dim=-1)
        sim = (z @ z.T / temperature).masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
        target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
        per = F.cross_entropy(sim, target, reduction="none")  # one value per anchor, 2N
        pair = per[:n] + per[n:]
        return reduce(pair, reduction, denominator=2 * n)

    cases = [run(fn, {"z_i": normal(rng, (4, 5)), "z_j": normal(rng, (4, 5))}, ["z_i", "z_j"],
                 {"temperature": t}, cid)
             for cid, t in (("random_t0.5", 0.5), ("random_t0.1", 0.1), ("random_t2", 2.0))]
    z = normal(rng, (3, 4))
    cases.append(run(fn, {"z_i": z, "z_j": z + normal(rng, (3, 4), 0.05)}, ["z_i", "z_j"],
                     {"temperature": 0.5}, "close_views", note="the second view is the first plus small noise"))
    write("nt_xent", LIB, "z = F.normalize(torch.cat([z_i, z_j])); sim = (z @ z.T / t).masked_fill(eye, -inf); "
          "per-anchor F.cross_entropy(sim, positives) (SimCLR's NT-Xent); the element of pair n is "
          "l[n] + l[N + n] and 'mean' divides the sum by 2N",
          "l = -log(exp(s(a,p)) / sum_{k != a} exp(s(a,k))), s = cos/t, over 2N anchors; per pair l_i + l_j. "
          "mean = sum/(2N).", cases)


def triplet_batch_hard():
    rng = np.random.default_rng(204)

    def fn(embeddings, labels, margin, reduction):
        d = torch.linalg.vector_norm(embeddings[:, None, :] - embeddings[None, :, :], dim=-1)
        same = labels[:, None] == labels[None, :]
        eye = torch.eye(len(labels), dtype=torch.bool)
        d_pos = torch.amax(torch.where(same & ~eye, d, torch.zeros_like(d)), dim=1)
        d_neg = torch.amin(torch.where(same, torch.full_like(d, 1e9), d), dim=1)
        return reduce(torch.clamp(margin + d_pos - d_neg, min=0), reduction)

    cases = []
    for cid, n, margin in (("random_margin0.3", 6, 0.3), ("random_margin1", 8, 1.0), ("random_margin2", 5, 2.0)):
        cases.append(run(fn, {"embeddings": normal(rng, (n, 3)), "labels": rng.integers(0, 3, size=(n,))},
                         ["embeddings"], {"margin": margin}, cid))
    cases.append(run(fn, {"embeddings": normal(rng, (4, 3)), "labels": np.array([0, 1, 2, 2])}, ["embeddings"],
                     {"margin": 0.5}, "lonely_anchors", note="labels 0 and 1 have no positive"))
    write("triplet_batch_hard", LIB, "d = pairwise Euclidean distances; d_pos = amax(where(same & ~eye, d, 0)); "
          "d_neg = amin(where(same, 1e9, d)); clamp(margin + d_pos - d_neg, min=0) (Hermans et al. 2017)",
          "l_n = max(margin + max_{m: y_m = y_n, m != n} d(n, m) - min_{m: y_m != y_n} d(n, m), 0). "
          "mean = sum/N.", cases)


def total_variation():
    rng = np.random.default_rng(205)

    def fn(img, average, reduction):
        per = kornia.losses.total_variation(img, reduction="mean" if average else "sum")
        return reduce(per, reduction)

    cases = []
    for cid, shape, average in (("random_sum", (2, 3, 4, 5), False), ("random_mean", (2, 3, 4, 5), True),
                                ("one_image", (4, 6), False), ("channels_mean", (3, 5, 4), True),
                                ("small_mean", (1, 2, 2), True)):
        cases.append(run(fn, {"img": normal(rng, shape)}, ["img"], {"average": average}, cid))
    write("total_variation", f"kornia {kornia.__version__}, {LIB}",
          "kornia.losses.total_variation(img, reduction='mean' if average else 'sum'), one value per image; "
          "then 'none' (those values), 'mean' or 'sum' of them",
          "l = sum |img[h+1,w] - img[h,w]| + sum |img[h,w+1] - img[h,w]| per image over [..., H, W]; average: "
          "each direction's sum over its count of differences. mean = sum/number of images.", cases)


if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
    for make in (contrastive, info_nce, nt_xent, triplet_batch_hard, total_variation):
        make()
