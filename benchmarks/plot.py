"""The ratios of a run as one figure: generated / built-in per loss, per framework and mode,
with the targets drawn in (matplotlib, Agg; skipped, with a note, where it is not installed)."""

from __future__ import annotations

from pathlib import Path

NAME = "img/benchmarks_ratios.png"


def ratio_lines(data: dict, out_dir: Path, median: float, worst: float) -> list[str]:
    """Draw the figure next to benchmarks.md; the markdown that shows it."""
    panels = [(fw, mode, {c: r["ratios"]["gen/builtin"] for c, r in cases.items() if "gen/builtin" in r["ratios"]})
              for fw, modes in data["timing"].items() for mode, cases in modes.items()]
    panels = [p for p in panels if p[2]]
    if not panels:
        return []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["(No ratio plot: matplotlib is not installed; `pip install losscc[docs]`.)", ""]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.3 * len(panels)), dpi=90)
    for ax, (fw, mode, ratios) in zip(axes if len(panels) > 1 else [axes], panels):
        names = list(ratios)
        vals = [ratios[n] for n in names]
        ax.bar(range(len(names)), vals, color=["#c44e52" if v > worst else "#4c72b0" for v in vals])
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axhline(worst, color="#c44e52", linewidth=0.8, linestyle="--")
        ax.axhline(median, color="#55a868", linewidth=0.8, linestyle=":")
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("gen / built-in", fontsize=8)
        ax.set_title(f"{fw} {mode}", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    path = out_dir / NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return [f"![generated / built-in per loss, this run; dashed: {worst}x, dotted: the median target {median}]({NAME})",
            "", f"Bars above {worst} are red; the dotted line is the median target ({median}), the solid one parity.",
            ""]
