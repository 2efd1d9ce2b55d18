"""Seconds of one training step of our LM at 4 layers x 256, in float32 or under bfloat16 autocast: the
figure that tells which commit is slower when `benchmarks.train_throughput`'s ratio against nanoGPT
moves (that ratio mixes ours and the reference; this times ours alone, quickly).

    python -m benchmarks.step_time --dtype bf16 --steps 15 --no-json

Compare two commits by running it from a worktree of each (copy this file into the older one),
alternately, several times: a shared machine's slow spells then hit both. The step is
`benchmarks.train_throughput.step` (forward with `loss_only`, backward, AdamW from `make_optimizer`)
on one fixed (16, 256) batch of random tokens, after one warm-up step; the median of `--steps`.
"""

import argparse
import statistics
import time

import torch

from benchmarks.common import benchmark_parser, parse, write_json
from benchmarks.train_throughput import SMALL, step
from model import DecoderOnlyLM
from training.trainer import make_optimizer
from training.training_args import TrainConfig


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("step_time", __doc__)
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="bf16", help="autocast to this (default bf16)")
    parser.add_argument("--steps", type=int, default=15, help="timed steps after one warm-up (default 15)")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)
    torch.manual_seed(0)
    model = DecoderOnlyLM(SMALL)
    optimizer = make_optimizer(model, TrainConfig())
    idx, targets = (torch.randint(0, SMALL.vocab_size, (16, SMALL.block_size)) for _ in range(2))
    step(model, optimizer, args.dtype, idx, targets)  # warm-up
    seconds = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step(model, optimizer, args.dtype, idx, targets)
        seconds.append(time.perf_counter() - start)
    result = {"shape": "4 x 256, batch 16 x 256", "dtype": args.dtype, "median_s": statistics.median(seconds),
              "seconds": seconds}
    print(f"{args.dtype}: median {result['median_s']:.3f} s a step over {args.steps}")
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()
