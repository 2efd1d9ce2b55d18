"""How much of a sentiment batch is padding: random or length-sorted batches of a fixed size
against token-budget, length-bucketed batches (`training.bucketing`).

    python -m benchmarks.bucketing [--data-dir ../shared/data/imdb] [--time 300] [--json PATH | --no-json]

The reviews are the 22,500 training reviews of `training.run --task sentiment`, cut as the shipped
classifier reads them (its tokenizer, max_src_len and src_keep_tail). Printed per scheme: batches
per epoch, mean reviews per batch, and the share of the padded (B x T_max) source tokens that are
real; these counts do not depend on the machine. `--time N` also times the shipped classifier's
evaluation of N held-out selection reviews, in sorted batches of 32 (the previous scheme) and in
token-budget batches (float32, as `training.evaluate` scores), and checks both give the same
predictions.
"""

import argparse
import time

import numpy as np
import torch

from benchmarks.common import SEED, VAL_SIZE, add_checkpoint, benchmark_parser, parse, write_json
from benchmarks.sentiment_baseline import imdb_split
from classifier import Reader
from tokenization.batches import cut_by_budget, length_batches
from training.bucketing import BucketSampler
from training.data import PairSet, step_generator
from training.evaluate import classify
from training.training_args import TrainConfig


def padding_figures(batches: list[list[int]], lengths: np.ndarray) -> dict:
    real = sum(int(lengths[b].sum()) for b in batches)
    padded = sum(len(b) * int(lengths[b].max()) for b in batches)
    return {"batches": len(batches), "mean_rows": round(float(np.mean([len(b) for b in batches])), 1),
            "real_share": round(real / padded, 3), "largest_padded_batch": max(len(b) * int(lengths[b].max())
                                                                                for b in batches)}


@torch.inference_mode()
def sorted_fixed_scores(reader: Reader, pairs: PairSet, tokenizer, batch_size: int) -> torch.Tensor:
    """The previous evaluation: batches of `batch_size` reviews in length order."""
    model, candidates = reader.model, reader.candidates
    ids = {"pad_id": tokenizer.pad_id, "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id}
    out = torch.empty(len(pairs), len(candidates))
    for idx, batch in pairs.batches(batch_size, **ids):
        memory = model.encode(batch["src_ids"], batch["src_mask"])[0]
        out[idx] = model.candidate_scores(memory, candidates, batch["src_mask"])[0]
    return out


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("bucketing", __doc__)
    parser.add_argument("--data-dir", default="../shared/data/imdb")
    add_checkpoint(parser)
    parser.add_argument("--batch-size", type=int, default=32, help="the fixed batch size compared against")
    parser.add_argument("--train-tokens", type=int, default=32 * 1024,
                        help="training token budget (default: the worst case of a fixed batch of full reviews)")
    parser.add_argument("--eval-tokens", type=int, default=16384, help="evaluation token budget")
    parser.add_argument("--time", type=int, default=0, metavar="N", help="also time evaluation of N selection reviews")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)

    reader = Reader.from_pretrained(args.checkpoint)
    model, tokenizer = reader.model, reader.tokenizer
    train_texts, train_labels, selection_texts, _ = imdb_split(args.data_dir, VAL_SIZE, SEED, "selection")
    words = [reader.labels[y] for y in train_labels]
    pairs = PairSet.from_texts(train_texts, words, tokenizer, model.config, classifier=reader.classifier_config)
    lengths = np.array([len(s) for s in pairs.sources])
    n, B = len(lengths), args.batch_size
    random_batches = [torch.randint(0, n, (B,), generator=step_generator(TrainConfig.seed, s)).tolist()
                      for s in range(n // B)]
    order = np.argsort(lengths, kind="stable")
    result = {
        "reviews": n, "mean_tokens": round(float(lengths.mean()), 1), "max_src_len": model.config.max_src_len,
        "train": {f"random {B}": padding_figures(random_batches, lengths),
                  f"bucketed {args.train_tokens} tokens": padding_figures(
                      BucketSampler(lengths, args.train_tokens, seed=TrainConfig.seed).epoch(0), lengths)},
        "evaluate": {f"sorted {B}": padding_figures(cut_by_budget(order, lengths, 10**12, max_rows=B), lengths),
                     f"bucketed {args.eval_tokens} tokens": padding_figures(
                         length_batches(lengths, args.eval_tokens), lengths)},
    }
    if args.time:
        held = PairSet.from_texts(selection_texts[: args.time], [words[0]] * args.time, tokenizer, model.config,
                                  classifier=reader.classifier_config)
        start = time.perf_counter()
        before = sorted_fixed_scores(reader, held, tokenizer, B)
        fixed_s = time.perf_counter() - start
        start = time.perf_counter()
        after = classify(reader, held, args.eval_tokens)
        bucketed_s = time.perf_counter() - start
        result["timing"] = {"reviews": args.time, f"sorted {B} s": round(fixed_s, 1),
                            f"bucketed {args.eval_tokens} s": round(bucketed_s, 1),
                            "same_predictions": bool(torch.equal(before.argmax(-1), after.argmax(-1))),
                            "max_abs_score_change": float((before - after).abs().max())}
    write_json(result, args, echo=True)
    return result


if __name__ == "__main__":
    main()
