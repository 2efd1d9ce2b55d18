"""Calibration of a sentiment checkpoint: temperature fitted on the selection rows, expected
calibration error (15 bins) before and after on the report rows, which the fit never sees.

    python -m benchmarks.calibration --checkpoint checkpoints/sentiment --data-dir ../shared/data/imdb

prints ECE at T = 1 and at the fitted T, and writes benchmarks/results/calibration.json with both
reliability diagrams (the About tab draws the one at the fitted T). Scores are float32 whatever the
machine: the fitted T is the checkpoint's, not a precision's. `--store` writes the fitted T
into the checkpoint's config.json, where the app, `training.evaluate` and `/classify` read it.
"""

import argparse

import torch

from benchmarks.common import add_checkpoint, benchmark_parser, parse, write_json
from model import EncoderDecoder
from storage import resolve_checkpoint
from tokenization import BPETokenizer, read_texts
from training.calibration import ECE_BINS, expected_calibration_error, fit_temperature, reliability
from training.data import PairSet, label_column, text_column
from training.evaluate import classify
from training.heldout import add_held_out_arguments, held_out_rows


def scores_and_labels(model: EncoderDecoder, tokenizer: BPETokenizer, rows, part: str, max_tokens: int):
    """Label scores (N, K) at T = 1 and the true labels (N,) of one held-out part."""
    texts = read_texts(text_column(rows, "text", part))
    labels = label_column(rows, "label", part, model.config.labels)
    pairs = PairSet.from_texts(texts, [model.config.labels[y] for y in labels], tokenizer, model.config)
    return classify(model, pairs, tokenizer, max_tokens), torch.tensor(labels)


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("calibration", __doc__)
    add_checkpoint(parser)
    add_held_out_arguments(parser)
    parser.add_argument("--limit", type=int, default=None, help="only the first N rows of each part (a quick look)")
    parser.add_argument("--max-tokens", type=int, default=16384, help="padded source tokens per batch")
    parser.add_argument("--store", action="store_true", help="write the fitted temperature into config.json")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)
    torch.manual_seed(0)
    ckpt = resolve_checkpoint(args.checkpoint)
    model, tokenizer = EncoderDecoder.from_pretrained(ckpt).eval(), BPETokenizer.from_file(ckpt)
    parts = {}
    for part in ("selection", "report"):
        rows = held_out_rows(args.data_dir, args.val_size, args.seed, part)
        rows = rows.select(range(min(args.limit, len(rows)))) if args.limit else rows
        parts[part] = scores_and_labels(model, tokenizer, rows, part, args.max_tokens)
    temperature = fit_temperature(*parts["selection"])  # the checkpoint's own T plays no part: scores are at T = 1
    scores, labels = parts["report"]
    result = {"checkpoint": str(args.checkpoint), "bins": ECE_BINS, "temperature": temperature,
              "fitted_on": f"selection rows ({len(parts['selection'][1])})",
              "measured_on": f"report rows ({len(labels)})",
              "accuracy": (scores.argmax(-1) == labels).float().mean().item()}
    for name, t in (("before", 1.0), ("after", temperature)):
        probs = (scores / t).softmax(-1)
        result[name] = {"temperature": t, "ece": expected_calibration_error(probs, labels),
                        "reliability": reliability(probs, labels)}
    print(f"T = {temperature:.3f} (fitted on {result['fitted_on']}); on the {result['measured_on']}: "
          f"ECE {result['before']['ece']:.4f} at T = 1, {result['after']['ece']:.4f} at T = {temperature:.3f}")
    write_json(result, args)
    if args.store:
        model.config.temperature = round(temperature, 4)
        model.save_config(ckpt)
    return result


if __name__ == "__main__":
    main()
