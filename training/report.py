"""Print the README's results table from the checkpoints' metrics.json files, and draw the
quality-against-training-time frontier of each run.

    python -m training.report [checkpoints ...] [--frontier docs/frontier.png]

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


def table(runs: dict[str, dict]) -> str:
    lines = ["| model | metric | value | split | parameters | trained | command |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, m in runs.items():
        minutes = m["train_time_s"] / 60
        trained = (f"{m['steps']} steps, {m['tokens_seen'] / 1e6:.1f} M tokens, "
                   f"{minutes:.{1 if minutes < 10 else 0}f} min, {m['device']}")
        for key, label, split, fmt in ROWS:
            if key in m and not (key == "val_loss" and "val_accuracy" in m):
                lines.append(f"| `{name}` | {label} | {fmt.format(m[key])} | {split} | "
                             f"{m['parameters'] / 1e6:.2f} M | {trained} | `{m['command']}` |")
    return "\n".join(lines)


def load_runs(roots: list[Path]) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for root in roots for p in sorted(root.glob("*/metrics.json"))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m training.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="*", type=Path, default=[Path("checkpoints")],
                        help="folders whose */metrics.json are read (default: checkpoints)")
    parser.add_argument("--frontier", type=Path, help="also draw the quality-vs-time figure to this PNG")
    args = parser.parse_args(argv)
    runs = load_runs(args.roots)
    print(table(runs))
    if args.frontier:
        from .plots import plot_frontier

        plot_frontier(runs, args.frontier)


if __name__ == "__main__":
    main()
