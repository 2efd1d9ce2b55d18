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
