"""Calibration of a sentiment checkpoint: temperature fitted on the selection rows, expected
calibration error (15 bins) before and after on the report rows, which the fit never sees.

    python -m benchmarks.calibration --checkpoint checkpoints/sentiment --also checkpoints/sentiment-backward \\
        --data-dir ../shared/data/imdb

With `--also`, the figures are those of the readers' verdict (`model.combine_readers`), the
probabilities the app shows: each reader keeps the temperature its run fitted, the pair's own
temperature is fitted on the selection rows, and `--store` writes it into the last reader's config
(`pair_temperature`). It prints
ECE at T = 1 and at the fitted T, and writes benchmarks/results/calibration.json with both
reliability diagrams (the About tab draws the one at the fitted T). Scores are float32 whatever the
machine: the fitted T is the checkpoint's, not a precision's. `--store` writes each fitted T
into its checkpoint's config.json, where the app, `training.evaluate` and `/classify` read it.
"""

import argparse

import torch

from benchmarks.common import add_also, add_checkpoint, benchmark_parser, parse, write_json
from model import EncoderDecoder, combine_readers
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
    add_also(parser)
    add_held_out_arguments(parser)
    parser.add_argument("--limit", type=int, default=None, help="only the first N rows of each part (a quick look)")
    parser.add_argument("--max-tokens", type=int, default=16384, help="padded source tokens per batch")
    parser.add_argument("--store", action="store_true", help="write the fitted temperature into config.json")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)
    torch.manual_seed(0)
    folders = [resolve_checkpoint(c) for c in [args.checkpoint, *args.also]]
    models = [EncoderDecoder.from_pretrained(f).eval() for f in folders]
    parts = {part: held_out_rows(args.data_dir, args.val_size, args.seed, part) for part in ("selection", "report")}
    if args.limit:
        parts = {part: rows.select(range(min(args.limit, len(rows)))) for part, rows in parts.items()}
    scored = [{part: scores_and_labels(model, BPETokenizer.from_file(folder), rows, part, args.max_tokens)
               for part, rows in parts.items()} for model, folder in zip(models, folders, strict=True)]
    labels = scored[0]["report"][1]
    if len(models) == 1:  # one model's own T, fitted at T = 1 on the selection rows (its stored T plays no part)
        fitted = fit_temperature(*scored[0]["selection"])
        verdict = {part: scored[0][part][0] for part in parts}  # (N, K) scores, at T = 1
    else:  # each reader at its own stored T, and the pair's T fitted on the selection rows
        verdict = {part: combine_readers([(s[part][0] / m.config.temperature).log_softmax(-1)
                                          for s, m in zip(scored, models, strict=True)]) for part in parts}
        fitted = fit_temperature(verdict["selection"], scored[0]["selection"][1])
    result = {"checkpoint": str(args.checkpoint), **({"also": args.also} if args.also else {}), "bins": ECE_BINS,
              "temperature": fitted, "fitted": "the model's temperature" if len(models) == 1 else
              f"the pair's temperature (readers at theirs: {', '.join(f'{m.config.temperature:.4g}' for m in models)})",
              "fitted_on": f"selection rows ({len(scored[0]['selection'][1])})",
              "measured_on": f"report rows ({len(labels)})",
              "accuracy": (verdict["report"].argmax(-1) == labels).float().mean().item()}
    for name, t in (("before", 1.0), ("after", fitted)):
        probs = (verdict["report"] / t).softmax(-1)
        result[name] = {"temperature": t, "ece": expected_calibration_error(probs, labels),
                        "reliability": reliability(probs, labels)}
    print(f"T = {fitted:.3f} ({result['fitted']}, fitted on {result['fitted_on']}); on the {result['measured_on']}: "
          f"ECE {result['before']['ece']:.4f} at T = 1, {result['after']['ece']:.4f} at T = {fitted:.3f}")
    write_json(result, args)
    if args.store:
        model, folder = models[-1], folders[-1]
        setattr(model.config, "temperature" if len(models) == 1 else "pair_temperature", round(fitted, 4))
        model.save_config(folder)
    return result


if __name__ == "__main__":
    main()
