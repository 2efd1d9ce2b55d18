"""Where a fine-tuning step's time goes: the shipped sentiment recipe's step (`training.trainer`),
cut into its parts with a device synchronisation between them, then 10 steps under torch.profiler.

    python docs/experiments/sentiment-backward-2026-11-27/profile_step.py --data-dir ../shared/data/imdb \
        --device cuda --out runs/profile

Why: on a lent H100 the fine-tune kept the GPU 7% busy (two runs at once), at ~225 ms a step against
~30 ms for a language-model step of as many tokens. The parts say whether the time is the data, the
model's forward or backward, or the optimizer; the profiler's table names the operators.
"""

import argparse
import json
import time
from pathlib import Path

import torch

from model import autocast, load_pretrained
from tokenization import BPETokenizer
from training.data import load_splits
from training.recipe import Recipe, apply_unfreezing, training_loss
from training.task import TaskOptions
from training.tasks import SentimentTask
from training.trainer import make_optimizer
from training.training_args import TrainConfig

parser = argparse.ArgumentParser()
parser.add_argument("--data-dir", default="../shared/data/imdb")
parser.add_argument("--device", default="cuda")
parser.add_argument("--max-examples", type=int, default=6000)
parser.add_argument("--max-tokens", type=int, default=16384)
parser.add_argument("--max-src-len", type=int, default=1024)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--out", type=Path, default=Path("runs/profile"))
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)
sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)

task = SentimentTask(load_splits(args.data_dir), TaskOptions(val_size=2500, seed=1337, max_examples=args.max_examples))
tok = BPETokenizer.from_file("checkpoints/tokenizer.json")
cfg = TrainConfig(max_tokens=args.max_tokens, max_steps=1900, lr=1e-3, warmup_steps=190, precision="auto",
                  recipe=Recipe(layer_decay=0.385, unfreeze_every=100, label_smoothing=0.1, crop_prob=0.3,
                                schedule="stlr"))
lm = load_pretrained("checkpoints/lm")
shape = {"d_model": 320, "n_head": 5, "d_ff": 1280, "n_encoder_layer": 6, "n_decoder_layer": 1, "norm_first": True,
         "max_src_len": args.max_src_len, "src_keep_tail": min(384, args.max_src_len // 2), "causal_encoder": True}
data = task.prepare(tok, shape, cfg)
model = task.build(data)
model.init_from(lm)
model.to(args.device).train()
optimizer = make_optimizer(model, cfg)
amp = autocast(args.device, "bf16" if args.device.startswith("cuda") else "fp32")
apply_unfreezing(model, 800, 100)  # every layer trains, as in the second half of the run

parts = {k: [] for k in ("batch", "to_device", "forward", "backward", "clip", "optimizer", "step")}


def step(i: int, timed: bool) -> None:
    t = [time.perf_counter()]

    def mark():
        if timed:
            sync()
        t.append(time.perf_counter())

    batch = task.batch(data, i)
    mark()
    batch = {k: v.to(args.device) for k, v in batch.items()}
    mark()
    with amp:
        loss = training_loss(model, model, batch, cfg.recipe)
    mark()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    mark()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    mark()
    optimizer.step()
    loss.item()
    mark()
    if timed:
        for name, a, b in zip(list(parts)[:-1], t, t[1:], strict=False):
            parts[name].append(1000 * (b - a))
        parts["step"].append(1000 * (t[-1] - t[0]))


for i in range(5):
    step(i, False)
sync()
for i in range(5, 5 + args.steps):
    step(i, True)
sync()
start = time.perf_counter()
for i in range(100, 100 + args.steps):  # untimed parts: the real pace, no synchronisation in between
    step(i, False)
sync()
free_ms = 1000 * (time.perf_counter() - start) / args.steps
median = {k: sorted(v)[len(v) // 2] for k, v in parts.items()}
result = {"device": args.device, "median_ms": median, "free_running_ms_per_step": free_ms,
          "torch": torch.__version__, "steps": args.steps}
print(json.dumps(result, indent=1))
(args.out / "step_parts.json").write_text(json.dumps(result, indent=1))

activities = [torch.profiler.ProfilerActivity.CPU] + (
    [torch.profiler.ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
with torch.profiler.profile(activities=activities) as prof:
    for i in range(200, 210):
        step(i, False)
    sync()
for key in ["self_cpu_time_total"] + (["self_cuda_time_total"] if args.device.startswith("cuda") else []):
    table = prof.key_averages().table(sort_by=key, row_limit=25)
    (args.out / f"profile_{key}.txt").write_text(table)
    print(table[:6000])
