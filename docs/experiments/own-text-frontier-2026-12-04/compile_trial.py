"""Does torch.compile repay its compile time for the laptop LM's training step on this CPU?

    python docs/experiments/own-text-frontier-2026-12-04/compile_trial.py [threads]

The laptop preset's shape (4 layers x 192, d_ff 768, 256 tokens, a 2,048-token vocabulary), batch 16,
bfloat16 autocast, AdamW from `training.trainer.make_optimizer`: the first step (the compile), the
second, and the median of 15 more, eager and then compiled, from the same initial weights.
"""

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root

from model import DecoderOnlyConfig, DecoderOnlyLM  # noqa: E402
from model.precision import autocast  # noqa: E402
from training.trainer import make_optimizer  # noqa: E402
from training.training_args import TrainConfig  # noqa: E402

SHAPE = DecoderOnlyConfig(vocab_size=2048, n_layer=4, n_head=4, d_model=192, d_ff=768, block_size=256, dropout=0.0)


def trainer_step(compiled: bool, idx: torch.Tensor, targets: torch.Tensor):
    torch.manual_seed(0)
    model = DecoderOnlyLM(SHAPE).train()
    optimizer = make_optimizer(model, TrainConfig())
    forward = torch.compile(model) if compiled else model

    def step() -> float:
        with autocast("cpu", "bf16"):
            loss = forward(idx, targets=targets, loss_only=True).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


def seconds(step) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def main() -> None:
    torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
    idx, targets = (torch.randint(0, SHAPE.vocab_size, (16, SHAPE.block_size)) for _ in range(2))
    for compiled in (False, True):
        step = trainer_step(compiled, idx, targets)
        first, second = seconds(step), seconds(step)
        median = statistics.median(seconds(step) for _ in range(15))
        print(f"compiled={compiled}: first step {first:.1f} s, second {second:.2f} s, median of 15 {median:.3f} s",
              flush=True)


if __name__ == "__main__":
    main()
