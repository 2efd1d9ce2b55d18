"""Sentiment checkpoints alone and averaged: each one's accuracy on the held-out rows, whole and as
short texts, and every combination's accuracy and calibration error.

    python -m benchmarks.ensemble --checkpoint checkpoints/sentiment --also runs/sentiment-bwd runs/sentiment-s2 \\
        --data-dir ../shared/data/imdb --split selection --json docs/experiments/NAME/ensemble_selection.json

Why: ULMFiT's best IMDb result (Howard & Ruder 2018, section 4) averages the predictions of a
classifier fine-tuned from a forward LM and one from a backward LM (`--set reverse=1`); two models of
the same direction with other seeds are the control that says how much of a gain is the second
reading order and how much is averaging two models. Each model's probabilities are its calibrated
ones (softmax of the label scores at its fitted temperature), as the app shows them; a group's are
`classifier.combine_readers`' (the mean of the members' log-probabilities, renormalised), as the app's
verdict is, before the pair's own temperature; the ECE of the plain mean of their probabilities
stands beside it, the other way to average (the labels are the same with two readers).

Short text is scored as a whole and by where the sentence comes from (a review's first sentence or
its last: they differ, first sentences are mostly set-up). `--baseline` adds the TF-IDF + LR row
(`benchmarks.sentiment_baseline`, trained on the same training rows), the figure the issue's target
is measured against, so that a variant is chosen against it on the selection rows too.

Choose on `--split selection`; score the chosen combination once on `--split report`. `--rows` also
writes every row's P(positive) per model and the rows' labels (a local look: they are the data's, so
such a file is not committed).
"""

import argparse
import itertools
import time

import numpy as np
import torch

from benchmarks.bootstrap import accuracy_with_interval
from benchmarks.common import add_also, add_checkpoint, add_device, benchmark_parser, parse, write_json
from benchmarks.sentiment_baseline import imdb_split
from classifier import Reader, combine_readers
from storage import resolve_checkpoint
from training.calibration import expected_calibration_error
from training.heldout import HELD_OUT_PARTS, add_held_out_arguments, short_texts
from training.linear_evidence import fit_linear

BASELINE = "TF-IDF + LR"


def combinations(names: list[str]) -> list[tuple[str, ...]]:
    """Every model alone, then every group of two or more."""
    return [c for k in range(1, len(names) + 1) for c in itertools.combinations(names, k)]


def print_table(table: list[dict], checkpoints: list[str]) -> None:
    """The table on the console, each checkpoint named once by its number ("1 + 3"), so that a
    group of long paths stays one readable row; the JSON keeps the paths."""
    for i, checkpoint in enumerate(checkpoints, start=1):
        print(f"[{i}] {checkpoint}")
    number = {c: str(i) for i, c in enumerate(checkpoints, start=1)}
    names = [" + ".join(number.get(m, m) for m in row["models"]) for row in table]
    width = max(len(n) for n in [*names, "models"]) + 2
    print(f"{'models':{width}}{'full reviews':>13}{'short text':>11}{'first':>8}{'last':>8}{'ECE (full)':>11}"
          f"{'of P mean':>10}")
    for name, row in zip(names, table, strict=True):
        full, brief = row["full_reviews"], row["short_text"]
        print(f"{name:{width}}{full['accuracy']:>13.2%}"
              f"{brief['accuracy']:>11.2%}"
              f"{brief['by_position']['first']['accuracy']:>8.1%}{brief['by_position']['last']['accuracy']:>8.1%}"
              f"{full['ece']:>11.4f}{full['ece_mean_of_probabilities']:>10.4f}")


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("ensemble", __doc__)
    add_checkpoint(parser)
    add_also(parser)
    add_device(parser)
    add_held_out_arguments(parser)
    parser.add_argument("--split", choices=HELD_OUT_PARTS[1:], default="selection")
    parser.add_argument("--max-tokens", type=int, default=16384, help="padded source tokens per batch")
    parser.add_argument("--rows", action="store_true", help="also write each row's P(positive) per model")
    parser.add_argument("--baseline", action="store_true", help="add TF-IDF + LR, alone, as the last row")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)
    checkpoints = [args.checkpoint, *args.also]
    train_texts, train_labels, texts, labels = imdb_split(args.data_dir, args.val_size, args.seed, args.split)
    short = short_texts(texts, labels)
    checks = {"full_reviews": (texts, labels), "short_text": ([r.text for r in short], [r.label for r in short])}

    probs, seconds = {}, {}
    for checkpoint in checkpoints:
        start = time.perf_counter()
        reader = Reader.from_pretrained(resolve_checkpoint(checkpoint), args.device)
        probs[checkpoint] = {name: reader.read_texts(texts, args.max_tokens) for name, (texts, _) in checks.items()}
        seconds[checkpoint] = round(time.perf_counter() - start, 1)

    positions = np.array([r.position for r in short])

    def scored(verdict: torch.Tensor, mean: torch.Tensor, name: str) -> dict:
        """Accuracy with its interval and both calibration errors of (N, K) probabilities; short text
        also by position."""
        truth = checks[name][1]
        correct = verdict.argmax(-1).numpy() == np.asarray(truth)
        figures = {**accuracy_with_interval(correct), "ece": expected_calibration_error(verdict, torch.tensor(truth)),
                   "ece_mean_of_probabilities": expected_calibration_error(mean, torch.tensor(truth))}
        if name == "short_text":
            figures["by_position"] = {p: accuracy_with_interval(correct[positions == p]) for p in ("first", "last")}
        return figures

    table = []
    for group in combinations(checkpoints):
        row = {"models": list(group)}
        for name in checks:
            verdict = combine_readers([probs[c][name] for c in group]).exp()  # (N, K), at T = 1
            row[name] = scored(verdict, torch.stack([probs[c][name].exp() for c in group]).mean(0), name)
        table.append(row)
    if args.baseline:
        model = fit_linear(train_texts, train_labels)
        row = {"models": [BASELINE]}
        for name, (texts, _) in checks.items():
            p = torch.tensor(model.predict_proba(texts), dtype=torch.float32)
            row[name] = scored(p, p, name)
        table.append(row)

    print_table(table, checkpoints)
    result = {"split": args.split, "data_dir": args.data_dir, "examples": {k: len(v[1]) for k, v in checks.items()},
              "held_out": {"val_size": args.val_size, "seed": args.seed}, "model_time_s": seconds, "table": table}
    if args.rows:
        result["p_positive"] = {c: {name: [round(float(p), 5) for p in probs[c][name][:, 1].exp()] for name in checks}
                                for c in checkpoints}
        result["labels"] = {name: list(truth) for name, (_, truth) in checks.items()}
    write_json(result, args)
    return result


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
