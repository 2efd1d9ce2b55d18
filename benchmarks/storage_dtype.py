"""How much storing a classifier in float16 changes its answers.

    python -m benchmarks.storage_dtype [--checkpoint checkpoints/sentiment] [--data-dir ../shared/data/imdb]
                                       [--limit N] [--json PATH | --no-json]

Run from the repository root, after `python -m training.run ... --save-dtype float16`: it takes
the float32 weights of that run's last step from `trainer_state.pt` (not committed: it exists where
the run trained), rounds a copy through the checkpoint's storage dtype and back to float32 (what
saving and loading the checkpoint does), and scores both on the same validation reviews (the
fixed-seed split of training.run). Printed are each one's accuracy, how often they predict the
same label, and the largest change in a class probability.
"""

import argparse
import copy
import sys
from pathlib import Path

import torch
from safetensors import safe_open

from benchmarks.common import add_checkpoint, benchmark_parser, parse, write_json
from classifier import ClassifierConfig, Reader
from model import load_pretrained
from storage import STATE_NAME, WEIGHTS_NAME
from tokenization import BPETokenizer, clean_texts
from training.data import PairSet, validation_rows
from training.evaluate import classify
from training.heldout import add_held_out_arguments


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("storage_dtype", __doc__)
    add_checkpoint(parser)
    add_held_out_arguments(parser)
    parser.add_argument("--limit", type=int, help="score only the first N validation reviews")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)

    ckpt = Path(args.checkpoint)
    state_path = ckpt / STATE_NAME
    if not state_path.is_file():
        sys.exit(f"error: {state_path} is missing: run this where the checkpoint was trained")
    with safe_open(ckpt / WEIGHTS_NAME, "pt") as f:
        (stored_dtype,) = {f.get_tensor(k).dtype for k in f.keys()}
    state = torch.load(state_path, map_location="cpu", weights_only=True)
    full = load_pretrained(ckpt)
    full.load_state_dict(state["model"])
    stored = copy.deepcopy(full)
    for p in stored.parameters():
        p.data = p.data.to(stored_dtype).float()

    tokenizer = BPETokenizer.from_file(ckpt)
    rows = validation_rows(args.data_dir, args.val_size, args.seed)
    rows = rows.select(range(min(args.limit, len(rows)))) if args.limit else rows
    texts, labels = clean_texts(rows["text"]), torch.tensor(rows["label"])
    settings = ClassifierConfig.from_pretrained(ckpt)
    words = [settings.labels[y] for y in labels.tolist()]
    pairs = PairSet.from_texts(texts, words, tokenizer, stored.config, classifier=settings)

    p16, p32 = (classify(Reader(m, tokenizer, classifier_config=settings), pairs, max_tokens=16384).softmax(-1)
                for m in (stored, full))
    result = {
        "checkpoint": str(ckpt), "stored_dtype": str(stored_dtype), "step": state["step"], "examples": len(rows),
        "accuracy_stored": (p16.argmax(-1) == labels).float().mean().item(),
        "accuracy_float32": (p32.argmax(-1) == labels).float().mean().item(),
        "same_prediction": (p16.argmax(-1) == p32.argmax(-1)).float().mean().item(),
        "max_abs_prob_change": (p16 - p32).abs().max().item(),
    }
    write_json(result, args, echo=True)
    return result


if __name__ == "__main__":
    main()
