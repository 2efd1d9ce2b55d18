"""The peak memory of a training step on a CPU, measured, and the estimate `training.memory` makes of it.

    python -m benchmarks.train_memory [--threads 1]

Run from the repository root, on a machine with ~8 GB free. Each probe is a fresh process (so its
peak resident memory, Linux's VmHWM, is its own): a model of one shape in training mode, two steps
(forward with `loss_only`, backward, AdamW) on `rows` rows of `length` random tokens, float32, the
source and target lengths each stack reads at their longest. The shapes: the shipped classifier's
(checkpoints/sentiment/config.json: 6 x 320, 5 heads, dropout 0.1), the laptop preset's (4 x 256)
and the small one's (3 x 192), each at several rows x lengths; and the shipped LM's
(checkpoints/lm/config.json, dropout 0: the fused kernel keeps no attention weights) with and
without dropout, and the classifier without dropout.

Three constants come out, and `training/memory.py` holds them:
- `bytes_per_weight`: what autograd keeps per attention weight under dropout, counted directly
  (`torch.autograd.graph.saved_tensors_hooks`, distinct storages, parameters left out) as the growth
  of the saved bytes between rows of 256 and of 1,024 tokens at the same 2,048 tokens, per
  encoder layer and head, in the shipped classifier's shape;
- `bytes_per_channel` (under dropout) and `bytes_per_channel_no_dropout`: the median, over the
  probes with dropout and over those without, of what the rest of a step's peak costs per token,
  layer and model channel: (peak - the process before the step - the optimizer's 12 bytes a
  parameter - the attention term) / (layers x tokens x d_model).
Each probe's line then sets the estimate beside the measured peak (`ratio` = estimate / measured).
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from benchmarks.common import benchmark_parser, parse, write_json
from model import DecoderOnlyLM, EncoderDecoder, read_config
from model.pretrained import MODEL_TYPES
from training import memory

ROOT = Path(__file__).resolve().parent.parent
CLASSIFIER, LM = ROOT / "checkpoints" / "sentiment", ROOT / "checkpoints" / "lm"
LAPTOP = {"n_encoder_layer": 4, "n_head": 4, "d_model": 256, "d_ff": 1024}
SMALL = {"n_encoder_layer": 3, "n_head": 4, "d_model": 192, "d_ff": 768}
# (shape, changes to its config, rows, longest length): the length sets max_src_len or block_size
PROBES = [("classifier", {}, 2, 1024), ("classifier", {}, 4, 1024), ("classifier", {}, 8, 1024),
          ("classifier", {}, 8, 512), ("classifier", {}, 16, 256), ("classifier", {}, 32, 128),
          ("classifier", LAPTOP, 16, 256), ("classifier", LAPTOP, 32, 128), ("classifier", SMALL, 4, 1024),
          ("lm", {}, 16, 256), ("lm", {}, 32, 256), ("lm", {"dropout": 0.1}, 16, 256),
          ("classifier", {"dropout": 0.0}, 4, 1024), ("classifier", {"dropout": 0.0}, 16, 256)]


def config_of(shape: str, changes: dict, length: int):
    """The config of that shape, its longest length set to `length`."""
    raw = {**read_config(CLASSIFIER if shape == "classifier" else LM), **changes}
    if shape == "classifier":
        raw["max_src_len"] = length  # (how a longer review is cut is classifier.json's, no memory)
    else:
        raw["block_size"] = length
    return MODEL_TYPES[raw.pop("model_type")].config_class(**raw)


def build(shape: str, changes: dict, length: int) -> torch.nn.Module:
    """A freshly initialised model of that shape in training mode."""
    cls = EncoderDecoder if shape == "classifier" else DecoderOnlyLM
    return cls(config_of(shape, changes, length)).train()


def batch(model: torch.nn.Module, rows: int) -> tuple:
    """The model's arguments for one step of `rows` rows at its longest lengths (random tokens)."""
    c = model.config
    if hasattr(c, "block_size"):
        ids = torch.randint(3, c.vocab_size, (rows, c.block_size))
        return (ids,), {"targets": ids, "loss_only": True}
    src = torch.randint(3, c.vocab_size, (rows, c.max_src_len))
    tgt = torch.randint(3, c.vocab_size, (rows, c.max_tgt_len))
    return (src, tgt, torch.ones_like(src), tgt), {"loss_only": True}


def peak_resident() -> int:
    """This process's peak resident memory in bytes (Linux's VmHWM). Not `ru_maxrss`: Linux carries
    that over from the parent across exec, so a child would report the benchmark's own peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("this benchmark reads /proc/self/status (Linux)")


def probe(shape: str, changes: dict, rows: int, length: int) -> dict:
    """In this process: two training steps, and the peak resident memory before and after them."""
    model = build(shape, changes, length)
    optimizer = torch.optim.AdamW(model.parameters())
    args, kwargs = batch(model, rows)
    before = peak_resident()
    for _ in range(2):
        model(*args, **kwargs).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return {"before": before, "peak": peak_resident(), "parameters": model.num_parameters()}


def saved_bytes(model: torch.nn.Module, rows: int) -> int:
    """The bytes autograd keeps for the backward pass of one forward (distinct storages, no parameters)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    args, kwargs = batch(model, rows)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(*args, **kwargs)
    return sum(n for ptr, n in kept.items() if ptr not in params)


def bytes_per_weight() -> float:
    """Saved bytes per attention weight, per encoder layer and head (the shipped classifier's shape):
    2 rows of 1,024 against 8 rows of 256 (2,048 tokens either way; a single row would let some
    tensors stay views of a larger one), the difference over the weights added."""
    long, short = build("classifier", {}, 1024), build("classifier", {}, 256)
    c = long.config
    extra_weights = c.n_encoder_layer * c.n_head * 2048 * (1024 - 256)  # tokens x (T_long - T_short) per head
    return (saved_bytes(long, 2) - saved_bytes(short, 8)) / extra_weights


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("train_memory", __doc__)
    parser.add_argument("--probe", help=argparse.SUPPRESS)  # the child process: one probe, one JSON line
    return parser


def main(argv: list[str] | None = None) -> None:
    child = arguments().parse_args(argv)
    if child.probe:
        torch.set_num_threads(max(child.threads, 1))
        print(json.dumps(probe(*json.loads(child.probe))))
        return
    args = parse(arguments(), argv, precision="fp32")
    per_weight = bytes_per_weight()
    print(f"autograd keeps {per_weight:.2f} bytes per attention weight (per encoder layer and head) under dropout")
    runs = []
    for shape, changes, rows, length in PROBES:
        cmd = [sys.executable, "-m", "benchmarks.train_memory", "--no-json", "--threads", str(args.threads),
               "--probe", json.dumps([shape, changes, rows, length])]
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
        run = {"shape": shape, "changes": changes, "rows": rows, "length": length,
               **json.loads(out.strip().splitlines()[-1])}
        run["config"] = config_of(shape, changes, length)
        runs.append(run)
        print(f"{shape:10} {json.dumps(changes):>40} {rows:3} x {length:5}: peak {run['peak'] / 1e9:5.2f} GB "
              f"({(run['peak'] - run['before']) / 1e9:5.2f} GB over the process before the step)", flush=True)
    per_channel = {}  # fitted apart under dropout and without: dropout keeps a mask per activation
    for dropout in (True, False):
        group = [r for r in runs if (r["config"].dropout > 0) == dropout]
        for r in group:  # the estimate is linear in bytes_per_channel: read its slope off two evaluations
            at0, at1 = (memory.training_bytes(r["config"], r["rows"], r["parameters"], c, per_weight) for c in (0, 1))
            r["measured"] = r["peak"] - r["before"]
            r["per_channel"] = round((r["measured"] - at0) / (at1 - at0), 1)
        per_channel[dropout] = statistics.median(r["per_channel"] for r in group)
    for r in runs:
        config = r.pop("config")
        r["estimate"] = memory.training_bytes(config, r["rows"], r["parameters"], per_channel[config.dropout > 0],
                                              per_weight)
        r["ratio"] = round(r["estimate"] / r["measured"], 3)
        print(f"{r['shape']:10} {json.dumps(r['changes']):>40} {r['rows']:3} x {r['length']:5}: measured "
              f"{r['measured'] / 1e9:5.2f} GB, estimate {r['estimate'] / 1e9:5.2f} GB (x{r['ratio']})")
    print(f"bytes_per_channel {per_channel[True]:.1f} under dropout, {per_channel[False]:.1f} without; "
          f"bytes_per_weight {per_weight:.2f}")
    write_json({"bytes_per_channel": round(per_channel[True], 1),
                "bytes_per_channel_no_dropout": round(per_channel[False], 1),
                "bytes_per_weight": round(per_weight, 2), "probes": runs}, args)


if __name__ == "__main__":
    main()
