"""Calibration of a sentiment checkpoint: temperature fitted on the selection rows, expected
calibration error (15 bins) before and after on the report rows, which the fit never sees.

    python -m benchmarks.calibration --checkpoint checkpoints/sentiment --also checkpoints/sentiment-backward \\
        --data-dir ../shared/data/imdb

The same temperature is then measured on the report rows' short texts (each review's first and last
sentence, `training.heldout.short_texts`, labelled with the review's label: the kind of one-line
text the app is typed): the fit saw only full reviews, so whether it holds on short text is a
measurement, not an assumption (the model card states what it found). Beside the ECE: the mean
confidence against the accuracy (over- or under-confident on the whole), and the share of texts
that are wrong at a confidence of 0.9 or more ("confidently wrong").

With `--also`, the figures are those of the readers' verdict (`classifier.combine_readers`), the
probabilities the app shows: each reader keeps the temperature its run fitted, the pair's own
temperature is fitted on the selection rows, and `--store` writes it into the last reader's
classifier.json (`pair_temperature`). It prints
ECE at T = 1 and at the fitted T, and writes benchmarks/results/calibration.json with both
reliability diagrams (the About tab draws the one at the fitted T). Scores are float32 whatever the
machine: the fitted T is the checkpoint's, not a precision's. `--store` writes each fitted T
into its checkpoint's classifier.json (config.json and the weights stay as they are), where the app,
`training.evaluate` and `/classify` read it.
"""

import argparse

import torch

from benchmarks.common import add_also, add_checkpoint, benchmark_parser, parse, write_json
from classifier import Reader, calibrated, combine_readers
from storage import resolve_checkpoint
from tokenization import clean_texts
from training.calibration import ECE_BINS, expected_calibration_error, fit_temperature, reliability
from training.data import label_column, text_column
from training.heldout import add_held_out_arguments, held_out_rows, short_texts

SURE = 0.9  # "confidently wrong": wrong at this confidence or more


def held_out_texts(rows, part: str, labels: list[str]) -> dict[str, tuple[list[str], list[int]]]:
    """(texts, label indices) of one held-out part: its full reviews, and their short texts (first
    and last sentences) when `part` is the report rows."""
    texts = clean_texts(text_column(rows, "text", part))
    truth = label_column(rows, "label", part, labels)
    found = {"full_reviews": (texts, truth)}
    if part == "report":
        short = short_texts(texts, truth)
        found["short_text"] = ([r.text for r in short], [r.label for r in short])
    return found


def at_temperature(scores: torch.Tensor, labels: torch.Tensor, t: float) -> dict:
    """Calibration figures of label scores (N, K) softmaxed at temperature t."""
    probs = (scores / t).softmax(-1)
    confidence, correct = probs.max(-1).values, probs.argmax(-1) == labels
    return {"temperature": t, "ece": expected_calibration_error(probs, labels),
            "mean_confidence": confidence.mean().item(), "accuracy": correct.float().mean().item(),
            "wrong_and_sure": ((confidence >= SURE) & ~correct).float().mean().item(),
            "reliability": reliability(probs, labels)}


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("calibration", __doc__)
    add_checkpoint(parser)
    add_also(parser)
    add_held_out_arguments(parser)
    parser.add_argument("--limit", type=int, default=None, help="only the first N rows of each part (a quick look)")
    parser.add_argument("--max-tokens", type=int, default=16384, help="padded source tokens per batch")
    parser.add_argument("--store", action="store_true", help="write the fitted temperature into classifier.json")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)
    torch.manual_seed(0)
    folders = [resolve_checkpoint(c) for c in [args.checkpoint, *args.also]]
    readers = [Reader.from_pretrained(f) for f in folders]
    models = [r.model for r in readers]
    parts = {part: held_out_rows(args.data_dir, args.val_size, args.seed, part) for part in ("selection", "report")}
    if args.limit:
        parts = {part: rows.select(range(min(args.limit, len(rows)))) for part, rows in parts.items()}
    checks = {(part, kind): (texts, torch.tensor(truth)) for part, rows in parts.items()
              for kind, (texts, truth) in held_out_texts(rows, part, readers[0].labels).items()}
    scored = [{key: reader.score_texts(texts, args.max_tokens) for key, (texts, _) in checks.items()}
              for reader in readers]  # (N, K) label scores, before any temperature
    if len(models) == 1:  # one model's own T, fitted at T = 1 on the selection rows (its stored T plays no part)
        verdict = {key: calibrated(s, 1.0) for key, s in scored[0].items()}
    else:  # each reader at its own stored T, and the pair's T fitted on the selection rows
        verdict = {key: combine_readers([calibrated(s[key], r.temperature)
                                         for s, r in zip(scored, readers, strict=True)]) for key in checks}
    fitted = fit_temperature(verdict["selection", "full_reviews"], checks["selection", "full_reviews"][1])
    labels = checks["report", "full_reviews"][1]
    result = {"checkpoint": str(args.checkpoint), **({"also": args.also} if args.also else {}), "bins": ECE_BINS,
              "temperature": fitted, "fitted": "the model's temperature" if len(models) == 1 else
              f"the pair's temperature (readers at theirs: {', '.join(f'{r.temperature:.4g}' for r in readers)})",
              "fitted_on": f"selection rows ({len(checks['selection', 'full_reviews'][1])})",
              "measured_on": f"report rows ({len(labels)})",
              "accuracy": (verdict["report", "full_reviews"].argmax(-1) == labels).float().mean().item()}
    for name, t in (("before", 1.0), ("after", fitted)):
        result[name] = at_temperature(verdict["report", "full_reviews"], labels, t)
    short = checks["report", "short_text"][1]
    result["short_text"] = {"measured_on": f"the report rows' first and last sentences ({len(short)})",
                            "sure": SURE, **{name: at_temperature(verdict["report", "short_text"], short, t)
                                             for name, t in (("before", 1.0), ("after", fitted))}}
    after = result["short_text"]["after"]
    print(f"T = {fitted:.3f} ({result['fitted']}, fitted on {result['fitted_on']}); on the {result['measured_on']}: "
          f"ECE {result['before']['ece']:.4f} at T = 1, {result['after']['ece']:.4f} at T = {fitted:.3f}; on their "
          f"{len(short)} short texts at T = {fitted:.3f}: ECE {after['ece']:.4f}, mean confidence "
          f"{after['mean_confidence']:.3f} for an accuracy of {after['accuracy']:.3f}, "
          f"{after['wrong_and_sure']:.1%} wrong at {SURE:.0%} or more")
    write_json(result, args)
    if args.store:
        settings, folder = readers[-1].classifier_config, folders[-1]
        setattr(settings, "temperature" if len(models) == 1 else "pair_temperature", round(fitted, 4))
        settings.save_pretrained(folder)
    return result


if __name__ == "__main__":
    main()
