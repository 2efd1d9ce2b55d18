"""Sentiment checkpoints alone and averaged: each one's accuracy on the held-out rows, whole and as
short texts, and the accuracy of every combination's mean probability.

    python -m benchmarks.ensemble --checkpoint checkpoints/sentiment --also runs/sentiment-bwd runs/sentiment-s2 \\
        --data-dir ../shared/data/imdb --split selection --json docs/experiments/NAME/ensemble_selection.json

Why: ULMFiT's best IMDb result (Howard & Ruder 2018, section 4) averages the predictions of a
classifier fine-tuned from a forward LM and one from a backward LM (`--set reverse=1`); two models of
the same direction with other seeds are the control that says how much of a gain is the second
reading order and how much is averaging two models. Each model's probabilities are its calibrated
ones (softmax of the label scores at its fitted temperature), as the app shows them; a group's are
`model.combine_readers`' (the mean of the members' log-probabilities, renormalised), as the app's
verdict is.

Choose on `--split selection`; score the chosen combination once on `--split report`. `--rows` also
writes every row's P(positive) per model, so that other combinations can be scored without the models.
"""

import argparse
import itertools
import time

import numpy as np
import torch

from benchmarks.bootstrap import accuracy_with_interval
from benchmarks.common import add_also, add_checkpoint, add_device, benchmark_parser, parse, write_json
from model import combine_readers, load_pretrained
from storage import resolve_checkpoint
from tokenization import BPETokenizer, read_texts
from training.data import PairSet, label_column, text_column
from training.evaluate import classify
from training.heldout import HELD_OUT_PARTS, add_held_out_arguments, held_out_rows, short_texts


def log_probabilities(checkpoint: str, checks: dict, device: str, max_tokens: int) -> dict[str, torch.Tensor]:
    """Each check's rows -> the checkpoint's calibrated log P(label) (N, K), in row order."""
    folder = resolve_checkpoint(checkpoint)
    model, tokenizer = load_pretrained(folder, device), BPETokenizer.from_file(folder)
    out = {}
    for name, (texts, labels) in checks.items():
        pairs = PairSet.from_texts(texts, [model.config.labels[y] for y in labels], tokenizer, model.config)
        scores = classify(model, pairs, tokenizer, max_tokens)
        out[name] = (scores / model.config.temperature).log_softmax(-1)
    return out


def combinations(names: list[str]) -> list[tuple[str, ...]]:
    """Every model alone, then every group of two or more."""
    return [c for k in range(1, len(names) + 1) for c in itertools.combinations(names, k)]


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("ensemble", __doc__)
    add_checkpoint(parser)
    add_also(parser)
    add_device(parser)
    add_held_out_arguments(parser)
    parser.add_argument("--split", choices=HELD_OUT_PARTS[1:], default="selection")
    parser.add_argument("--max-tokens", type=int, default=16384, help="padded source tokens per batch")
    parser.add_argument("--rows", action="store_true", help="also write each row's P(positive) per model")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)
    checkpoints = [args.checkpoint, *args.also]
    rows = held_out_rows(args.data_dir, args.val_size, args.seed, args.split)
    texts = read_texts(text_column(rows, "text", args.split))
    labels = label_column(rows, "label", args.split, ["negative", "positive"])
    short = short_texts(texts, labels)
    checks = {"full_reviews": (texts, labels), "short_text": ([r.text for r in short], [r.label for r in short])}

    probs, seconds = {}, {}
    for checkpoint in checkpoints:
        start = time.perf_counter()
        probs[checkpoint] = log_probabilities(checkpoint, checks, args.device, args.max_tokens)
        seconds[checkpoint] = round(time.perf_counter() - start, 1)

    table = []
    for group in combinations(checkpoints):
        row = {"models": list(group)}
        for name, (_, truth) in checks.items():
            verdict = combine_readers([probs[c][name] for c in group])  # (N, K)
            row[name] = accuracy_with_interval(verdict.argmax(-1).numpy() == np.asarray(truth))
        table.append(row)

    print(f"{'models':60}{'full reviews':>16}{'short text':>16}")
    for row in table:
        print(f"{' + '.join(row['models'])[:60]:60}{row['full_reviews']['accuracy']:>16.2%}"
              f"{row['short_text']['accuracy']:>16.2%}")
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
