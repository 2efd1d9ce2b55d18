"""How faithful is each attribution method? ERASER's comprehensiveness and sufficiency
(DeYoung et al., 2020) on the held-out validation reviews, for every method of `inspection.attribution`.

For each review, the tokens are ranked by the method's scores for the label the model writes, and
the probability of that label is read again after

- deleting the top 1/5/10/20/50% of the tokens: comprehensiveness = P(full) − P(deleted), averaged
  over the five bins (AOPC). Higher is more faithful: the tokens named did carry the prediction.
- keeping only those tokens: sufficiency = P(full) − P(kept only), AOPC likewise. Lower is more
  faithful: the tokens named suffice on their own.

Reviews are read as the model reads them (clean-up, head + tail truncation, end token), and
deleted tokens are removed from the sequence, not masked. `random` is the floor.

The language model gets the same test on a next-token task (`--tasks lm`): on each held-out review
(the LM holds out the same rows, same --val-size and --seed), the token the LM would write after
the review's first `--lm-context` tokens is explained by each method (`model.attribute_token`), and
its probability is read again with the top context tokens deleted or kept alone
(`model.token_faithfulness`).

    python -m benchmarks.faithfulness --limit 100 [--tasks classifier lm] [--data-dir ../shared/data/imdb]

Prints the machine line, then exactly one line per method and task, `<method>: comprehensiveness X
sufficiency Y` for the classifier and `lm <method>: ...` for the LM (progress goes to stderr), and
writes the figures, with standard errors and timings, as JSON (benchmarks/results/faithfulness.json
unless `--json`/`--no-json`; the LM's under "lm", each task with the run that made it). Everything
runs in float32, the reference: how far bf16 moves an explanation is `benchmarks.precision_agreement`'s
question.
"""

import argparse
import json
import math
import statistics
import sys
import time

import torch

from benchmarks.common import add_checkpoint, add_device, benchmark_parser, parse, write_json
from classifier import Reader
from inspection import ERASER_FRACTIONS, METHODS, attribute, attribute_token, faithfulness, token_faithfulness
from model import load_pretrained
from tokenization import BPETokenizer, prompt_ids, read_review
from training.data import validation_rows
from training.heldout import add_held_out_arguments


def mean_and_se(values: list[float]) -> tuple[float, float]:
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return statistics.fmean(values), se


def summarise(scores: dict[str, dict[str, list[float]]], prefix: str = "") -> dict:
    """Mean and standard error per method, each printed as `<prefix><method>: comprehensiveness X
    sufficiency Y`."""
    summary = {}
    for method, s in scores.items():
        comp, comp_se = mean_and_se(s["comprehensiveness"])
        suff, suff_se = mean_and_se(s["sufficiency"])
        summary[method] = {"comprehensiveness": comp, "comprehensiveness_se": comp_se, "sufficiency": suff,
                           "sufficiency_se": suff_se, "mean_seconds": statistics.fmean(s["seconds"])}
        print(f"{prefix}{method}: comprehensiveness {comp:.4f} sufficiency {suff:.4f}")
    return summary


def lm_task(checkpoint: str, texts: list[str], methods: list[str], context: int, device: str) -> dict:
    """The next-token task: the token the LM writes after each review's first `context` tokens."""
    lm = load_pretrained(checkpoint, device).eval()
    tokenizer = BPETokenizer.from_file(checkpoint)
    scores = {m: {"comprehensiveness": [], "sufficiency": [], "seconds": []} for m in methods}
    for i, text in enumerate(texts):
        ids = torch.tensor(prompt_ids(text, tokenizer)[: 1 + context], device=device)
        with torch.inference_mode():
            chosen = lm(ids[None]).logits[0, -1].argmax()
        ids = torch.cat([ids, chosen[None]])
        for method in methods:
            start = time.perf_counter()
            result = attribute_token(lm, ids, ids.numel() - 1, method, seed=i)
            scores[method]["seconds"].append(time.perf_counter() - start)
            for name, value in token_faithfulness(lm, ids, result).items():
                scores[method][name].append(value)
        print(f"lm {i + 1}/{len(texts)} reviews", file=sys.stderr, flush=True)
    return {"checkpoint": checkpoint, "context_tokens": context, "methods": summarise(scores, "lm ")}


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("faithfulness", __doc__)
    add_checkpoint(parser)
    add_device(parser)
    add_held_out_arguments(parser)
    parser.add_argument("--limit", type=int, default=None, help="score only the first N validation reviews")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--tasks", nargs="+", choices=["classifier", "lm"], default=["classifier", "lm"])
    parser.add_argument("--lm-checkpoint", default="checkpoints/lm")
    parser.add_argument("--lm-context", type=int, default=64, help="review tokens before the LM's explained token")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)
    rows = validation_rows(args.data_dir, args.val_size, args.seed)
    rows = rows.select(range(min(args.limit, len(rows)))) if args.limit else rows
    run = {"command": args.command, "machine": args.machine}
    # a run of one task keeps the other task's figures in the file, with the run that made them
    # (None: a file written before the machine was recorded)
    kept = set(args.tasks) != {"classifier", "lm"} and args.json and args.json.exists()
    result = {"machine": None, **json.loads(args.json.read_text(encoding="utf-8"))} if kept else {}
    if "classifier" in args.tasks:
        result.update(classifier_task(args, rows["text"]), **run)
    if "lm" in args.tasks:
        lm = lm_task(args.lm_checkpoint, rows["text"], args.methods, args.lm_context, args.device)
        result["lm"] = {**lm, "reviews": len(rows), "val_size": args.val_size, "seed": args.seed, **run}
    write_json(result, args)
    return result


def classifier_task(args: argparse.Namespace, texts: list[str]) -> dict:
    """The classifier's label, explained on each review."""
    model = Reader.from_pretrained(args.checkpoint, args.device).eval()  # its tokenizer.json, classifier.json
    tokenizer, candidates = model.tokenizer, model.candidates
    scores = {m: {"comprehensiveness": [], "sufficiency": [], "seconds": []} for m in args.methods}
    ig_gaps, lengths = [], []
    for i, text in enumerate(texts):
        review = read_review(text, tokenizer, model.reading)
        ids = torch.tensor(review.ids, device=args.device)
        lengths.append(ids.numel())
        for method in args.methods:
            start = time.perf_counter()
            result = attribute(model, ids, candidates, method, seed=i, word_ids=review.word_ids)
            scores[method]["seconds"].append(time.perf_counter() - start)
            for name, value in faithfulness(model, ids, candidates, result).items():
                scores[method][name].append(value)
            if result.baseline_target is not None:  # completeness: |sum - (f(x) - f(x'))|, absolute and relative
                gap = result.target - result.baseline_target
                error = abs(float(result.scores.sum()) - gap)
                ig_gaps.append((error, error / max(abs(gap), 1e-6), result.steps, result.passes))
        print(f"{i + 1}/{len(texts)} reviews ({ids.numel()} tokens)", file=sys.stderr, flush=True)
    return {
        "checkpoint": args.checkpoint, "reviews": len(texts), "val_size": args.val_size, "seed": args.seed,
        "mean_tokens": statistics.fmean(lengths), "fractions": list(ERASER_FRACTIONS), "methods": summarise(scores),
        "integrated_gradients_completeness": {
            "mean_abs_error": statistics.fmean(g[0] for g in ig_gaps), "max_abs_error": max(g[0] for g in ig_gaps),
            "mean_rel_error": statistics.fmean(g[1] for g in ig_gaps), "max_rel_error": max(g[1] for g in ig_gaps),
            "mean_steps": statistics.fmean(g[2] for g in ig_gaps), "max_steps": max(g[2] for g in ig_gaps),
            "mean_passes": statistics.fmean(g[3] for g in ig_gaps), "max_passes": max(g[3] for g in ig_gaps),
        } if ig_gaps else None,
    }


if __name__ == "__main__":
    main()
