"""Case files from torchvision's box losses, in float64.

Run with a Python that has torch, torchvision and numpy (not dependencies of losscc):
    python tests/data/library/gen/torchvision_cases.py
It rewrites the torchvision-made files in tests/data/library/ (fixed seeds: the same
versions give the same bytes). Boxes are in the corner format (x1, y1, x2, y2) with
x1 < x2 and y1 < y2, as torchvision expects; the cases cover overlapping, nested,
disjoint and identical pairs, away from ties (touching edges), where the gradient is a
one-sided convention.
"""

import numpy as np
import torch
import torchvision
import torchvision.ops as tvo
from casefile import case, write

LIB = f"torchvision {torchvision.__version__}, torch {torch.__version__}"


def boxes(rng, n, decimals=4):
    """n random corner-format boxes: corners in [0, 4), sides in [0.1, 3)."""
    xy = rng.uniform(0.0, 4.0, size=(n, 2))
    wh = rng.uniform(0.1, 3.0, size=(n, 2))
    return np.round(np.concatenate([xy, xy + wh], axis=1), decimals)


def near(rng, b, scale=0.5, decimals=4):
    """Boxes near `b` (mostly overlapping it): each corner moved, sides kept positive."""
    xy = b[:, :2] + rng.normal(size=(len(b), 2)) * scale
    wh = np.maximum(b[:, 2:] - b[:, :2] + rng.normal(size=(len(b), 2)) * scale, 0.2)
    return np.round(np.concatenate([xy, xy + wh], axis=1), decimals)


# hand-picked pairs: nested, disjoint (apart in x, in y, both), identical, overlapping in a corner
EDGE1 = np.array([[0.0, 0.0, 4.0, 4.0], [0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0], [1.0, 2.0, 3.0, 5.0],
                  [0.0, 0.0, 2.0, 2.0], [-3.0, -1.0, -1.0, 2.0]])
EDGE2 = np.array([[1.0, 1.5, 2.0, 3.0], [2.0, 0.5, 3.0, 1.5], [2.0, 3.0, 5.0, 4.0], [1.0, 2.0, 3.0, 5.0],
                  [1.0, 1.0, 3.5, 2.5], [-2.5, 0.5, 0.5, 1.5]])


def run(fn, inputs, params, cid, note=None):
    """fn(**inputs, **params, reduction=r) for each r; gradient of the 'sum' result."""
    expected, grads = {}, {}
    for r in ("none", "mean", "sum"):
        ts = {k: torch.tensor(v, dtype=torch.float64, requires_grad=r == "sum") for k, v in inputs.items()}
        out = fn(**ts, **params, reduction=r)
        expected[r] = out.detach().numpy()
        if r == "sum":
            out.backward()
            grads = {k: ts[k].grad.numpy() for k in inputs}
    return case(cid, params, inputs, expected, grads, note)


def cases_for(fn, seed):
    rng = np.random.default_rng(seed)
    b1 = boxes(rng, 6)
    b3 = boxes(rng, 6)
    b4 = boxes(rng, 8).reshape(2, 4, 4)
    return [run(fn, {"boxes1": b1, "boxes2": near(rng, b1)}, {}, "overlapping"),
            run(fn, {"boxes1": b3, "boxes2": boxes(rng, 6)}, {}, "random_pairs",
                note="independent boxes: some overlap, some are disjoint"),
            run(fn, {"boxes1": b4, "boxes2": near(rng, b4.reshape(8, 4)).reshape(2, 4, 4)}, {}, "batch_2d",
                note="boxes of shape [2, 4, 4]: two batch axes"),
            run(fn, {"boxes1": EDGE1, "boxes2": EDGE2}, {"eps": 1e-7}, "edge_pairs",
                note="nested, disjoint in x, disjoint in both, identical, corner overlap, negative coordinates")]


def iou(boxes1, boxes2, reduction, eps=0.0):
    """1 - IoU of each pair, from torchvision.ops.box_iou (which has no eps)."""
    loss = 1 - torch.diagonal(tvo.box_iou(boxes1.reshape(-1, 4), boxes2.reshape(-1, 4))).reshape(boxes1.shape[:-1])
    return loss if reduction == "none" else loss.mean() if reduction == "mean" else loss.sum()


def iou_cases():
    rng = np.random.default_rng(301)
    b1 = boxes(rng, 6)
    cases = [run(iou, {"boxes1": b1, "boxes2": near(rng, b1)}, {"eps": 0.0}, "overlapping"),
             run(iou, {"boxes1": EDGE1, "boxes2": EDGE2}, {"eps": 0.0}, "edge_pairs",
                 note="nested, disjoint in x, disjoint in both, identical, corner overlap, negative coordinates")]
    write("iou_loss", LIB, "1 - torch.diagonal(torchvision.ops.box_iou(boxes1, boxes2)), reduced by reduction",
          "l = 1 - I / U of each pair of (x1, y1, x2, y2) boxes (box_iou has no eps: eps = 0). mean = sum/numel.",
          cases)


if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
    iou_cases()
    write("giou_loss", LIB, "torchvision.ops.generalized_box_iou_loss(boxes1, boxes2, reduction=reduction, eps=eps)",
          "l = 1 - I / (U + eps) + (C - U) / (C + eps), C the smallest enclosing box's area. mean = sum/numel.",
          cases_for(tvo.generalized_box_iou_loss, 302))
    write("diou_loss", LIB, "torchvision.ops.distance_box_iou_loss(boxes1, boxes2, reduction=reduction, eps=eps)",
          "l = 1 - I / (U + eps) + d^2 / (c^2 + eps), d the centres' distance, c the enclosing box's diagonal. "
          "mean = sum/numel.", cases_for(tvo.distance_box_iou_loss, 303))
