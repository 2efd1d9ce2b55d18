"""Does the classifier answer the same in bfloat16? The held-out reviews read in float32 and under
bfloat16 autocast (`model.autocast`, as the demo serves them with `--precision bf16`).

Per review: the label each precision writes, the largest change of any class probability, and for
the first `--ig-limit` reviews the rank correlation (Spearman) of integrated gradients' token scores
in bf16 against fp32. Goals (issue #21): the same label on >= 99.5% of reviews, IG rank correlation
>= 0.95. Only the numbers are compared, not the speed: bf16 is run here even on a CPU without
AVX512-BF16/AMX, where it is correct but emulated and slower (use `--limit` there). It compares
the two precisions, so it takes no `--precision`.

    python -m benchmarks.precision_agreement [--limit N] [--ig-limit N]

Prints `same label X% (n/N)`, `largest probability change X`, `IG rank correlation median X min Y`.
"""

import argparse
import statistics
import sys

import torch

from benchmarks.common import add_checkpoint, add_device, benchmark_parser, parse, write_json
from classifier import Reader
from inspection import attribute, rank_correlation
from model import autocast, bf16_native
from tokenization import read_review
from training.heldout import add_held_out_arguments, held_out_rows


def probabilities(model: Reader, ids: torch.Tensor, candidates: list[list[int]], precision: str,
                  device: str) -> torch.Tensor:
    """(n_labels,) float32 class probabilities of one review, the products in `precision`."""
    with torch.inference_mode(), autocast(device, precision):
        return model.read(ids[None], None, candidates)[0].float().exp().cpu()


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("precision_agreement", __doc__)
    add_checkpoint(parser)
    add_device(parser)
    add_held_out_arguments(parser)
    parser.add_argument("--limit", type=int, default=None, help="only the first N held-out reviews")
    parser.add_argument("--ig-limit", type=int, default=100, help="integrated gradients on the first N of those")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv, precision="fp32 and bf16")  # compared
    model = Reader.from_pretrained(args.checkpoint, args.device).eval()  # its tokenizer.json, classifier.json
    tokenizer, candidates = model.tokenizer, model.candidates
    rows = held_out_rows(args.data_dir, args.val_size, args.seed, "validation")
    rows = rows.select(range(min(args.limit, len(rows)))) if args.limit else rows

    same, changes, correlations = [], [], []
    for i, text in enumerate(rows["text"]):
        review = read_review(text, tokenizer, model.reading)
        ids, words = torch.tensor(review.ids), review.word_ids
        ids = ids.to(args.device)
        fp32, bf16 = (probabilities(model, ids, candidates, p, args.device) for p in ("fp32", "bf16"))
        same.append(int(fp32.argmax()) == int(bf16.argmax()))
        changes.append(float((fp32 - bf16).abs().max()))
        if i < args.ig_limit:
            scores = []
            for precision in ("fp32", "bf16"):
                with autocast(args.device, precision):
                    scores.append(attribute(model, ids, candidates, "integrated_gradients", label=int(fp32.argmax()),
                                            word_ids=words).scores.float())
            correlations.append(rank_correlation(*scores))
        print(f"{i + 1}/{len(rows)} reviews ({ids.numel()} tokens)", file=sys.stderr, flush=True)

    agree = sum(same) / len(same)
    print(f"same label {100 * agree:.2f}% ({sum(same)}/{len(same)})")
    print(f"largest probability change {max(changes):.4f} (median {statistics.median(changes):.4f})")
    if correlations:
        print(f"IG rank correlation median {statistics.median(correlations):.4f} min {min(correlations):.4f} "
              f"({len(correlations)} reviews)")
    result = {
        "checkpoint": args.checkpoint, "reviews": len(same), "val_size": args.val_size, "seed": args.seed,
        "bf16_native": bf16_native(args.device),
        "same_label": agree, "largest_probability_change": max(changes),
        "median_probability_change": statistics.median(changes),
        "ig_reviews": len(correlations),
        "ig_rank_correlation_median": statistics.median(correlations) if correlations else None,
        "ig_rank_correlation_min": min(correlations) if correlations else None,
    }
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()
