"""Print the README's results table from the checkpoints' metrics.json files, and draw the
quality-against-training-time frontier of each run.

    python -m training.report [checkpoints] [--frontier docs/frontier.png]

Every row names the metric, its value, the split it was measured on and the command that
reproduces it (as recorded in metrics.json by the run that produced the checkpoint).
"""

import argparse
import json
from pathlib import Path

ROWS = [  # (metrics.json key, label, split, format)
    ("val_bpb", "bits per byte", "validation (2,500 held-out train reviews)", "{:.3f}"),
    ("val_ppl", "perplexity (per token)", "validation", "{:.1f}"),
    ("val_loss", "cross-entropy (nats/token)", "validation", "{:.4f}"),
    ("val_accuracy", "accuracy", "validation (2,500 held-out train reviews)", "{:.2%}"),
    ("test_bpb", "bits per byte", "IMDB test", "{:.3f}"),
    ("test_accuracy", "accuracy", "IMDB test", "{:.2%}"),
]


def table(root: Path) -> str:
    lines = ["| model | metric | value | split | parameters | trained | command |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for path in sorted(root.glob("*/metrics.json")):
        m = json.loads(path.read_text())
        trained = (f"{m['steps']} steps, {m['tokens_seen'] / 1e6:.1f} M tokens, "
                   f"{m['train_time_s'] / 60:.0f} min, {m['device']}")
        for key, label, split, fmt in ROWS:
            if key in m and not (key == "val_loss" and "val_accuracy" in m):
                lines.append(f"| `{path.parent.name}` | {label} | {fmt.format(m[key])} | {split} | "
                             f"{m['parameters'] / 1e6:.2f} M | {trained} | `{m['command']}` |")
    return "\n".join(lines)


def frontier(root: Path, path: Path) -> None:
    """Validation quality against training time (from each run's evaluation history)."""
    from .plots import plot_frontier

    runs = {p.parent.name: json.loads(p.read_text()) for p in sorted(root.glob("*/metrics.json"))}
    plot_frontier(runs, path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m training.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="?", default="checkpoints", type=Path)
    parser.add_argument("--frontier", type=Path, help="also draw the frontier figure to this PNG")
    args = parser.parse_args(argv)
    print(table(args.checkpoints))
    if args.frontier:
        frontier(args.checkpoints, args.frontier)


if __name__ == "__main__":
    main()
