"""Training throughput of our DecoderOnlyLM against nanoGPT's GPT, at two shapes.

    OMP_WAIT_POLICY=PASSIVE python -m benchmarks.train_throughput [--rounds 6] [--repeats 3] [--threads 1]

Run from the repository root. The reference follows nanoGPT's `model.py` layout (Karpathy, 2022),
written out here: learned position embedding, a fused qkv `Linear` with bias,
`F.scaled_dot_product_attention(is_causal=True)`, an MLP with `nn.GELU`, pre-norm `LayerNorm`s
with bias, a final LayerNorm and an `lm_head` tied to the token embedding; its init
(N(0, 0.02), the residual projections scaled by 1/√(2·n_layer)) and its optimizer set-up
(`configure_optimizers`: AdamW with weight decay on every matrix, none on vectors, `fused` only
on CUDA). The AdamW hyper-parameters (lr, betas, weight decay) are ours (`training.trainer`), and
ours gets its optimizer from `make_optimizer`, as in training.

One step is forward + backward + AdamW update on a (batch, 256) batch of random tokens, CPU,
dropout 0. Ours runs twice, in float32 and under bfloat16 autocast (`model.precision`, as
`training.run --precision bf16` trains: float32 weights, optimizer state and loss); the reference
in float32, as nanoGPT's `train.py` runs on a CPU (its autocast context is a no-op there). The
`bf16/fp32` line says whether this CPU gains from bfloat16: only CPUs with AVX512-BF16 or AMX do
(so it takes no `--precision`: it times both).
Two shapes: 4 layers x 256 (4 heads, d_ff 1024) and the shipped LM's shape,
read from checkpoints/lm/config.json. Ours is called as training calls it, with `loss_only=True`
(its loss without storing the logits). Both models get the same batches; after a warm-up step
each, they are timed alternately, one step each per round (the order reverses every round), so
that a slow spell of a shared machine hits all of them. A repeat's ratio is ours/ref of the median tokens/s of
its rounds; the ratio printed per shape (`ratio X`, the shipped shape last) is the median of
`--repeats` repeats. The same ratio in process CPU time follows it: on a machine shared with other
jobs the CPU time a step takes varies much less than its wall-clock time (with --threads 1 it is
the step's work alone; with more threads it adds up every thread's time, waiting included).
Each shape's line also gives the median page faults per step of each model (`minor_faults`):
fresh memory costs time on first touch, and the timings include it.

On a machine shared with other jobs, prefix the command with OMP_WAIT_POLICY=PASSIVE (or keep
--threads 1): otherwise an OpenMP thread that spins waiting for a descheduled partner can make
every parallel op wait out a time slice, and the run slows down tens of times.
"""

import argparse
import copy
import math
import resource
import statistics
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from benchmarks.common import benchmark_parser, parse, write_json
from model import DecoderOnlyConfig, DecoderOnlyLM, autocast, bf16_native, read_config
from training.trainer import make_optimizer
from training.training_args import TrainConfig

SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints" / "lm"
SMALL = DecoderOnlyConfig(vocab_size=8192, block_size=256, n_layer=4, n_head=4, d_model=256, d_ff=1024, dropout=0.0)


class CausalSelfAttention(nn.Module):
    def __init__(self, c: DecoderOnlyConfig):
        super().__init__()
        self.n_head, self.n_embd = c.n_head, c.d_model
        self.c_attn = nn.Linear(c.d_model, 3 * c.d_model)
        self.c_proj = nn.Linear(c.d_model, c.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, c: DecoderOnlyConfig):
        super().__init__()
        self.c_fc = nn.Linear(c.d_model, c.d_ff)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(c.d_ff, c.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, c: DecoderOnlyConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.d_model)
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c.d_model)
        self.mlp = MLP(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    def __init__(self, c: DecoderOnlyConfig):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c.vocab_size, c.d_model),
            wpe=nn.Embedding(c.block_size, c.d_model),
            h=nn.ModuleList(Block(c) for _ in range(c.n_layer)),
            ln_f=nn.LayerNorm(c.d_model),
        ))
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c.n_layer))

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay: float, learning_rate: float, betas) -> torch.optim.AdamW:
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        use_fused = next(self.parameters()).device.type == "cuda"
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=use_fused)


def minor_faults() -> int:
    """Page faults of this process so far: memory the OS hands over fresh, zeroed, a page at a time.
    Tensors over glibc's mmap threshold (32 MB at most) come fresh at every step, so a step's faults
    count how much of its memory it allocates anew, a cost the ops' timings include."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def step(model: nn.Module, optimizer: torch.optim.Optimizer, precision: str, idx: torch.Tensor,
         targets: torch.Tensor) -> None:
    with autocast("cpu", precision):
        if isinstance(model, DecoderOnlyLM):
            loss = model(idx, targets=targets, loss_only=True).loss  # as training calls it (training.recipe)
        else:
            loss = model(idx, targets)[1]
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def run_shape(config: DecoderOnlyConfig, batch: int, rounds: int, repeats: int) -> dict:
    torch.manual_seed(0)
    train = TrainConfig(batch_size=batch)
    ours, ref = DecoderOnlyLM(config).train(), NanoGPT(config).train()
    ours_bf16 = copy.deepcopy(ours)
    optimizer = make_optimizer(ours, train)
    models = {"ours": (ours, optimizer, "fp32"), "ours_bf16": (ours_bf16, make_optimizer(ours_bf16, train), "bf16"),
              "ref": (ref, ref.configure_optimizers(train.weight_decay, train.lr, optimizer.defaults["betas"]), "fp32")}
    data = torch.randint(0, config.vocab_size, (repeats * rounds + 1, batch, config.block_size + 1))
    tokens_per_step = batch * config.block_size

    order = list(models)
    seconds = {name: [] for name in models}
    cpu_seconds = {name: [] for name in models}
    faults = {name: [] for name in models}
    for r in range(repeats * rounds + 1):  # round 0 is the warm-up
        idx, targets = data[r, :, :-1].contiguous(), data[r, :, 1:].contiguous()
        for name in order if r % 2 else order[::-1]:
            t0, c0, f0 = time.perf_counter(), time.process_time(), minor_faults()
            step(*models[name], idx, targets)
            if r > 0:
                seconds[name].append(time.perf_counter() - t0)
                cpu_seconds[name].append(time.process_time() - c0)
                faults[name].append(minor_faults() - f0)

    def ratios(times: dict, fast: str = "ours", slow: str = "ref") -> list[float]:
        return [statistics.median(times[slow][i * rounds:(i + 1) * rounds]) /
                statistics.median(times[fast][i * rounds:(i + 1) * rounds]) for i in range(repeats)]

    return {
        "config": {**vars(config), "batch": batch},
        "tokens_per_s": {name: tokens_per_step / statistics.median(s) for name, s in seconds.items()},
        "seconds_per_step": seconds,
        "cpu_seconds_per_step": cpu_seconds,
        "params": {name: sum(p.numel() for p in m.parameters()) for name, (m, *_) in models.items()},
        "page_faults_per_step": {name: statistics.median(f) for name, f in faults.items()},
        "ratio_per_repeat": ratios(seconds),
        "ratio_ours_over_ref": statistics.median(ratios(seconds)),
        "cpu_time_ratio_ours_over_ref": statistics.median(ratios(cpu_seconds)),
        "ratio_ours_bf16_over_ref": statistics.median(ratios(seconds, "ours_bf16")),
        "ratio_bf16_over_fp32": statistics.median(ratios(seconds, "ours_bf16", "ours")),
    }


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("train_throughput", __doc__)
    parser.add_argument("--rounds", type=int, default=6, help="timed steps per model per repeat (default 6)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per shape; their median ratio is printed")
    parser.add_argument("--batch", type=int, default=16)
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv, precision="fp32 and bf16")  # side by side

    fields = read_config(SHIPPED)
    fields.pop("model_type", None)
    shapes = {"4x256": SMALL, "shipped": replace(DecoderOnlyConfig(**fields), dropout=0.0)}
    print(f"ours (float32 and bfloat16 autocast) vs nanoGPT's layout (float32): batch {args.batch}, CPU "
          f"(bfloat16 native: {bf16_native('cpu')}), {torch.get_num_threads()} threads, "
          f"{args.repeats} repeats of {args.rounds} alternating rounds per shape")
    results = {}
    for name, config in shapes.items():
        res = results[name] = run_shape(config, args.batch, args.rounds, args.repeats)
        c, tps = config, res["tokens_per_s"]
        print(f"{name}: {c.n_layer} layers, {c.n_head} heads, d_model {c.d_model}, d_ff {c.d_ff}, vocab "
              f"{c.vocab_size}, context {c.block_size}; ours {tps['ours']:.0f} tokens/s, ours bf16 "
              f"{tps['ours_bf16']:.0f}, ref {tps['ref']:.0f} "
              f"(params {res['params']['ours']:,} / {res['params']['ref']:,}); page faults per step "
              f"{res['page_faults_per_step']['ours']:,.0f} / {res['page_faults_per_step']['ref']:,.0f}; repeats "
              + ", ".join(f"{r:.3f}" for r in res["ratio_per_repeat"]))
    for name, res in results.items():
        print(f"ratio {res['ratio_ours_over_ref']:.3f}  ({name}, ours/ref tokens per second, median of repeats; "
              f"in CPU time {res['cpu_time_ratio_ours_over_ref']:.3f}); ours bf16/ref "
              f"{res['ratio_ours_bf16_over_ref']:.3f}; bf16/fp32 {res['ratio_bf16_over_fp32']:.3f}")
    result = {"rounds": args.rounds, "repeats": args.repeats, **results}
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()
