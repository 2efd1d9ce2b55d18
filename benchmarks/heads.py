"""Heads with names (`inspection.head_kinds`): every head of an LM scored for the start-token sink,
previous-token, induction and negation behaviours on held-out reviews (the report rows, which no
threshold was tuned on: the thresholds were set before this ran), with the LM's loss on each copy of
a repeated random sequence (what an induction head would make fall).

    python -m benchmarks.heads --checkpoint checkpoints/lm --data-dir ../shared/data/imdb --store

`--store` also writes the table beside the checkpoint (`heads.json`), where the app reads it: the
app runs with no data, so it serves the table measured here.
"""

import argparse
import json
from pathlib import Path

from benchmarks.common import add_checkpoint, benchmark_parser, parse, write_json
from inspection.head_kinds import HEADS_NAME, KINDS, THRESHOLDS, copy_loss, repeated_random, score_heads
from model import load_pretrained
from tokenization import BPETokenizer
from training.heldout import add_held_out_arguments, held_out_rows


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("heads", __doc__)
    add_checkpoint(parser, "checkpoints/lm", "the language model's folder")
    add_held_out_arguments(parser)
    parser.add_argument("--reviews", type=int, default=300, help="held-out report reviews to score on")
    parser.add_argument("--store", action="store_true", help=f"write the table beside the checkpoint ({HEADS_NAME})")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)
    model, tokenizer = load_pretrained(args.checkpoint), BPETokenizer.from_file(args.checkpoint)
    rows = held_out_rows(args.data_dir, args.val_size, args.seed, "report")
    texts = rows.select(range(min(args.reviews, len(rows))))["text"]
    scores = score_heads(model, tokenizer, texts)
    first, second = copy_loss(model, repeated_random(model, 50))
    result = {"checkpoint": str(args.checkpoint), "texts": f"{len(texts)} held-out report reviews",
              "thresholds": THRESHOLDS,
              "copy_loss_nats": {"first_copy": round(first, 3), "second_copy": round(second, 3)},
              "heads": [{"layer": s.layer, "head": s.head, "kind": s.kind, "score": s.score, "named": s.named}
                        for s in scores]}
    for kind in KINDS:
        best = max((s for s in scores if s.kind == kind), key=lambda s: s.score)
        named = sum(s.named for s in scores if s.kind == kind)
        print(f"{kind:10} best: layer {best.layer} head {best.head} {best.score:.3f}; {named} heads named "
              f"(score >= {THRESHOLDS[kind]})")
    print(f"repeated random sequence: loss {first:.2f} nats on the first copy, {second:.2f} on the second")
    write_json(result, args)
    if args.store:
        (Path(args.checkpoint) / HEADS_NAME).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
