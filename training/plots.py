"""The training curve figure written next to every checkpoint."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402

from storage import atomic_write  # noqa: E402


def plot_curve(history: list[dict], path: Path, title: str) -> None:
    """Train and validation loss against step; validation accuracy on a second axis if present."""
    steps = [h["step"] for h in history]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    train = [(s, h["train_loss"]) for s, h in zip(steps, history, strict=True) if h.get("train_loss") is not None]
    if train:
        ax.plot(*zip(*train, strict=True), label="train loss", color="tab:blue")
    ax.plot(steps, [h["val_loss"] for h in history], "o-", label="validation loss", color="tab:orange", ms=3)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    losses = [v for _, v in train] + [h["val_loss"] for h in history]
    if min(losses) > 0 and max(losses) / min(losses) > 10:  # a classifier's loss falls 100-fold
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    lines, labels = ax.get_legend_handles_labels()
    if any("val_accuracy" in h for h in history):
        ax2 = ax.twinx()
        ax2.plot(steps, [h["val_accuracy"] for h in history], "s--", color="tab:green", ms=3,
                 label="validation accuracy")
        ax2.set_ylabel("accuracy")
        more = ax2.get_legend_handles_labels()
        lines, labels = lines + more[0], labels + more[1]
    ax.legend(lines, labels, loc="upper right")
    ax.set_title(title)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))
    plt.close(fig)


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
