"""Seconds of one training step of our LM at 4 layers x 256, in float32 or under bfloat16 autocast: the
figure that tells which commit is slower when `benchmarks.train_throughput`'s ratio against nanoGPT
moves (that ratio mixes ours and the reference; this times ours alone, quickly).

    python -m benchmarks.step_time --dtype bf16 --steps 15 --no-json

Compare two commits by running it from a worktree of each (copy this file into the older one),
alternately, several times: a shared machine's slow spells then hit both. The step is
`benchmarks.train_throughput.step` (forward with `loss_only`, backward, AdamW from `make_optimizer`)
on one fixed (16, 256) batch of random tokens, after one warm-up step; the median of `--steps`,
in wall-clock seconds, in process CPU seconds (the step's own work with one thread: steadier than
wall-clock on a shared machine) and in minor page faults (fresh memory touched, part of the time).

A model's speed on the CPU depends on the kernels oneDNN picks for its ISA: an AMX core runs the
bf16 products several times faster than an AVX512-BF16 one. `ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16`
in the environment makes an AMX machine run the AVX512-BF16 kernels (its `lscpu` flags say which).

When two commits differ in time, `--ops PATH` says whether they run different work: it writes every
aten op of one step (after the warm-up), with its tensors' dtypes, shapes, strides and storage
offsets (autocast's casts included: they are `_to_copy` ops), one line each, and times nothing.
Two commits that run the same ops on the same layouts write identical files (`cmp`), and then a
difference in time is not in the tensor work. `--profile PATH` times by op instead: `torch.profiler`
over `--steps` steps, its table by self CPU time printed, and per op and per op and input shapes
the calls and self CPU milliseconds a step written to PATH as JSON (nested ops counted too).
"""

import argparse
import json
import resource
import statistics
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from benchmarks.common import benchmark_parser, parse, write_json
from benchmarks.train_throughput import SMALL, step
from model import DecoderOnlyLM
from training.trainer import make_optimizer
from training.training_args import TrainConfig


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("step_time", __doc__)
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="bf16", help="autocast to this (default bf16)")
    parser.add_argument("--steps", type=int, default=15, help="timed steps after one warm-up (default 15)")
    parser.add_argument("--ops", metavar="PATH", help="write one step's aten ops with their tensors' layouts "
                        "here instead of timing (compare two commits' files with cmp)")
    parser.add_argument("--profile", metavar="PATH", help="profile --steps steps by op instead: print the table, "
                        "write calls and self CPU ms a step per op (and per op and shapes) here as JSON")
    return parser


def layout(x) -> str:
    """An argument as the op log writes it: a tensor as dtype[shape] strides +offset, a number, string,
    dtype or device as its repr, anything else as its type (its repr would hold an address)."""
    if isinstance(x, torch.Tensor):
        return f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)} {list(x.stride())} +{x.storage_offset()}"
    if x is None or isinstance(x, (bool, int, float, str, torch.dtype, torch.device, torch.memory_format)):
        return repr(x)
    return type(x).__name__


class OpLog(TorchDispatchMode):
    """Every aten op run inside it, as a line: `op(arguments) -> results`."""

    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        arguments = ", ".join(layout(a) for a in tree_leaves((args, kwargs or {})))
        self.lines.append(f"{func}({arguments}) -> {', '.join(layout(o) for o in tree_leaves(out))}")
        return out


def profile_steps(model, optimizer, args, idx, targets) -> dict:
    """`--profile`: the steps under `torch.profiler` (CPU, input shapes recorded), by op."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(args.steps):
            step(model, optimizer, args.dtype, idx, targets)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))

    def per_step(event) -> dict:
        return {"calls": event.count / args.steps, "self_ms": event.self_cpu_time_total / 1e3 / args.steps}

    result = {"steps": args.steps, "dtype": args.dtype,
              "by_op": {e.key: per_step(e) for e in prof.key_averages()},
              "by_op_and_shapes": {f"{e.key} {e.input_shapes}": per_step(e)
                                   for e in prof.key_averages(group_by_input_shape=True)}}
    Path(args.profile).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)
    torch.manual_seed(0)
    model = DecoderOnlyLM(SMALL)
    optimizer = make_optimizer(model, TrainConfig())
    idx, targets = (torch.randint(0, SMALL.vocab_size, (16, SMALL.block_size)) for _ in range(2))
    step(model, optimizer, args.dtype, idx, targets)  # warm-up
    if args.ops:
        with OpLog() as log:
            step(model, optimizer, args.dtype, idx, targets)
        Path(args.ops).write_text("\n".join(log.lines) + "\n", encoding="utf-8")
        print(f"{len(log.lines)} ops of one {args.dtype} step written to {args.ops}")
        return {"ops": len(log.lines)}
    if args.profile:
        return profile_steps(model, optimizer, args, idx, targets)
    seconds, cpu_seconds, faults = [], [], []
    for _ in range(args.steps):
        faults_before, cpu_before, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time(), \
            time.perf_counter()
        step(model, optimizer, args.dtype, idx, targets)
        seconds.append(time.perf_counter() - start)
        cpu_seconds.append(time.process_time() - cpu_before)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before)
    result = {"shape": "4 x 256, batch 16 x 256", "dtype": args.dtype, "median_s": statistics.median(seconds),
              "median_cpu_s": statistics.median(cpu_seconds), "median_minor_faults": statistics.median(faults),
              "seconds": seconds}
    print(f"{args.dtype}: median {result['median_s']:.3f} s a step over {args.steps} "
          f"(CPU {result['median_cpu_s']:.3f} s, {result['median_minor_faults']:.0f} minor faults)")
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()
