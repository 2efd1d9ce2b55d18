"""A sentiment checkpoint and the TF-IDF + logistic-regression baseline, side by side, on the rows
nothing was tuned on: the report part of the held-out reviews (`training.heldout`), whole and as
short texts (each review's first and last sentence). Each accuracy has a 95% percentile bootstrap
interval; the difference (ours - baseline, same rows) has a paired bootstrap interval.

    python -m benchmarks.sentiment_report --checkpoint checkpoints/sentiment --data-dir ../shared/data/imdb \\
        --json benchmarks/results/sentiment_report_shipped.json

`--also DIR ...` scores an ensemble: the checkpoint and the other classifiers combined as the app's
verdict combines its readers (`classifier.Classifier`; `benchmarks.ensemble` chooses combinations
on the selection rows).

The baseline trains on the same 22,500 reviews as `training.run --task sentiment` and reads each
review whole; the checkpoint reads it as its config says (max_src_len, src_keep_tail). Reviews are
scored in length-bucketed batches (`--max-tokens` padded tokens each), in float32: the accuracy is
the checkpoint's, not a precision's.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks.bootstrap import accuracy_with_interval, bootstrap_interval
from benchmarks.common import add_also, add_checkpoint, add_device, benchmark_parser, parse, read_classifier, write_json
from benchmarks.sentiment_baseline import imdb_split
from storage import METRICS_NAME, resolve_checkpoint
from training.heldout import SELECTION_FRACTION, add_held_out_arguments, short_texts
from training.linear_evidence import fit_linear


def compare(ours: np.ndarray, baseline: np.ndarray) -> dict:
    """Both accuracies with intervals, and the paired difference in points."""
    low, high = bootstrap_interval(ours.astype(np.int64) - baseline.astype(np.int64))
    diff = float(ours.mean() - baseline.mean())
    return {"ours": accuracy_with_interval(ours), "baseline": accuracy_with_interval(baseline),
            "difference": diff, "difference_ci95": [low, high]}


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("sentiment_report", __doc__)
    add_checkpoint(parser)
    add_also(parser)
    add_device(parser)
    add_held_out_arguments(parser)
    parser.add_argument("--limit", type=int, help="score only the first N report reviews (a quick check)")
    parser.add_argument("--max-tokens", type=int, default=16384, help="padded source tokens per batch")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)

    ckpt = resolve_checkpoint(args.checkpoint)
    train_texts, train_labels, texts, labels = imdb_split(args.data_dir, args.val_size, args.seed, "report")
    texts, labels = texts[: args.limit], labels[: args.limit]
    short = short_texts(texts, labels)
    checks = {"full_reviews": (texts, labels), "short_text": ([r.text for r in short], [r.label for r in short])}

    start = time.perf_counter()
    baseline = fit_linear(train_texts, train_labels)
    baseline_s = time.perf_counter() - start
    start = time.perf_counter()
    ours = read_classifier([args.checkpoint, *args.also], args.device)
    model_s = time.perf_counter() - start
    result = {"checkpoint": str(args.checkpoint), **({"also": args.also} if args.also else {}),
              "data_dir": args.data_dir, "split": "report",
              "held_out": {"val_size": args.val_size, "seed": args.seed, "selection_fraction": SELECTION_FRACTION,
                           "report_examples": len(texts)}}
    for name, (rows, truth) in checks.items():
        right = ours.read_texts(rows, args.max_tokens).log_probs.argmax(-1).numpy() == np.asarray(truth)
        result[name] = compare(right, np.asarray(baseline.predict(rows)) == np.asarray(truth))
    result["model_time_s"] = round(model_s, 1)
    result["baseline_fit_time_s"] = round(baseline_s, 1)
    metrics_path = Path(ckpt) / METRICS_NAME
    if metrics_path.is_file():  # how the checkpoint was chosen: on how many held-out rows, at which step
        metrics = json.loads(metrics_path.read_text())
        result["checkpoint_chosen_on_examples"] = metrics.get("val_examples")
        result["checkpoint_command"] = metrics.get("command")

    print(f"{'':14}{'ours':>24}{'baseline':>24}{'ours - baseline':>26}")
    for name in checks:
        r = result[name]
        cell = lambda a: f"{a['accuracy']:.2%} [{a['ci95'][0]:.2%}, {a['ci95'][1]:.2%}]"
        low, high = (100 * x for x in r["difference_ci95"])
        diff = f"{r['difference'] * 100:+.2f} [{low:+.2f}, {high:+.2f}]"
        print(f"{name:14}{cell(r['ours']):>24}{cell(r['baseline']):>24}{diff:>26}   n={r['ours']['examples']}")
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()
