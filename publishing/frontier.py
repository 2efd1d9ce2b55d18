"""The quality-vs-time figure of many runs (docs/frontier.png), drawn by `publishing.report --frontier`."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402

from storage import atomic_write  # noqa: E402


def plot_frontier(runs: dict[str, dict], path: Path) -> None:
    """One panel per metric: validation bits per byte (LMs) and accuracy (classifiers) against
    minutes of training, one line per run, read from the runs' evaluation histories. The time
    axis is logarithmic: GPU runs take minutes where CPU runs take hours."""
    panels = [("val_bpb", "validation bits per byte (lower is better)"),
              ("val_accuracy", "validation accuracy (higher is better)")]
    panels = [(k, label) for k, label in panels if any(k in h for m in runs.values() for h in m["history"])]
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 5), dpi=110, squeeze=False)
    for ax, (key, label) in zip(axes[0], panels, strict=True):
        for name, m in runs.items():
            points = [(h["time_s"] / 60, h[key]) for h in m["history"] if key in h]
            if points:
                ax.plot(*zip(*points, strict=True), "o-", ms=3, label=f"{name} ({m['device']})")
        ax.set_xscale("log")
        ax.set_xlabel("training time (minutes, log scale)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))
    plt.close(fig)
