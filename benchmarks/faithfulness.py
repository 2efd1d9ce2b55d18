"""How faithful is each attribution method? ERASER's comprehensiveness and sufficiency
(DeYoung et al., 2020) on the held-out validation reviews, for every method of `model.attribution`.

For each review, the tokens are ranked by the method's scores for the label the model writes, and
the probability of that label is read again after

- deleting the top 1/5/10/20/50% of the tokens: comprehensiveness = P(full) − P(deleted), averaged
  over the five bins (AOPC). Higher is more faithful: the tokens named did carry the prediction.
- keeping only those tokens: sufficiency = P(full) − P(kept only), AOPC likewise. Lower is more
  faithful: the tokens named suffice on their own.

Reviews are read as the model reads them (clean-up, head + tail truncation, end token), and
deleted tokens are removed from the sequence, not masked. `random` is the floor.

    python -m benchmarks.faithfulness --limit 100 [--data-dir ../shared/data/imdb] [--json PATH]

Prints exactly one line per method, `<method>: comprehensiveness X sufficiency Y` (progress goes to
stderr), and writes the figures, with standard errors and timings, as JSON (default
benchmarks/results/faithfulness.json).
"""

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch

from demo.sentiment import read_source
from model import ERASER_FRACTIONS, METHODS, attribute, faithfulness, load_pretrained
from tokenization import BPETokenizer, clean_text, word_ids
from training.data import validation_rows
from training.evaluate import label_candidates

RESULTS = Path(__file__).resolve().parent / "results"


def source(text: str, tokenizer: BPETokenizer, max_src_len: int, keep_tail: int):
    """(ids (S,), word ids) of a review as the classifier reads it: `encode(text) + [eos]`, cut as
    training cut it. The end token is a word of its own."""
    read = read_source(clean_text(text), tokenizer, max_src_len, "review", keep_tail, "cpu")
    return read.ids[0], word_ids([p.text for p in read.pieces] + [""])


def mean_and_se(values: list[float]) -> tuple[float, float]:
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return statistics.fmean(values), se


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.faithfulness", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default="checkpoints/sentiment")
    parser.add_argument("--data-dir", default="../shared/data/imdb")
    parser.add_argument("--val-size", type=int, default=2500, help="as training.run --val-size")
    parser.add_argument("--seed", type=int, default=1337, help="as training.run --seed")
    parser.add_argument("--limit", type=int, default=None, help="score only the first N validation reviews")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", default=str(RESULTS / "faithfulness.json"))
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    model = load_pretrained(args.checkpoint, args.device).eval()
    tokenizer = BPETokenizer.from_file(args.checkpoint)  # the folder holding tokenizer.json
    candidates = label_candidates(model, tokenizer)
    rows = validation_rows(args.data_dir, args.val_size, args.seed)
    rows = rows.select(range(min(args.limit, len(rows)))) if args.limit else rows

    scores = {m: {"comprehensiveness": [], "sufficiency": [], "seconds": []} for m in args.methods}
    ig_gaps, lengths = [], []
    for i, text in enumerate(rows["text"]):
        ids, words = source(text, tokenizer, model.config.max_src_len, model.config.src_keep_tail)
        ids = ids.to(args.device)
        lengths.append(ids.numel())
        for method in args.methods:
            start = time.perf_counter()
            result = attribute(model, ids, candidates, method, seed=i, word_ids=words)
            scores[method]["seconds"].append(time.perf_counter() - start)
            for name, value in faithfulness(model, ids, candidates, result).items():
                scores[method][name].append(value)
            if result.baseline_target is not None:  # completeness: |sum - (f(x) - f(x'))|, absolute and relative
                gap = result.target - result.baseline_target
                error = abs(float(result.scores.sum()) - gap)
                ig_gaps.append((error, error / max(abs(gap), 1e-6), result.steps))
        print(f"{i + 1}/{len(rows)} reviews ({ids.numel()} tokens)", file=sys.stderr, flush=True)

    summary = {}
    for method, s in scores.items():
        comp, comp_se = mean_and_se(s["comprehensiveness"])
        suff, suff_se = mean_and_se(s["sufficiency"])
        summary[method] = {"comprehensiveness": comp, "comprehensiveness_se": comp_se, "sufficiency": suff,
                           "sufficiency_se": suff_se, "mean_seconds": statistics.fmean(s["seconds"])}
        print(f"{method}: comprehensiveness {comp:.4f} sufficiency {suff:.4f}")
    result = {
        "checkpoint": args.checkpoint, "reviews": len(rows), "val_size": args.val_size, "seed": args.seed,
        "mean_tokens": statistics.fmean(lengths), "fractions": list(ERASER_FRACTIONS),
        "threads": args.threads, "device": args.device, "methods": summary,
        "integrated_gradients_completeness": {
            "mean_abs_error": statistics.fmean(g[0] for g in ig_gaps), "max_abs_error": max(g[0] for g in ig_gaps),
            "mean_rel_error": statistics.fmean(g[1] for g in ig_gaps), "max_rel_error": max(g[1] for g in ig_gaps),
            "mean_steps": statistics.fmean(g[2] for g in ig_gaps), "max_steps": max(g[2] for g in ig_gaps),
        } if ig_gaps else None,
        "command": "python -m benchmarks.faithfulness " + " ".join(sys.argv[1:] if argv is None else argv),
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
