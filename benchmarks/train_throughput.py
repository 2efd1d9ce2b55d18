"""Training throughput of our DecoderOnlyLM against a GPT built only from PyTorch built-ins.

    python -m benchmarks.train_throughput [--rounds 10] [--batch 16] [--threads N] [--json out.json]

Run from the repository root. One step is forward + backward + AdamW update on a (batch, 256)
batch of random tokens, CPU, float32, dropout 0. Both models get the same config and the same
batches; after a warm-up step each, the two are timed alternately, one step each per round (who
goes first swaps every round), so that a slow spell of a shared machine hits both, and the
medians are reported. The reference is written to be fast, not to be like ours: fused qkv Linear
+ `F.scaled_dot_product_attention` with `is_causal`, pre-norm, GELU MLP, tied embeddings, a fixed
sinusoidal position table (so the two have the same parameter count).

On a machine shared with other jobs, prefix the command with OMP_WAIT_POLICY=PASSIVE (or pass
--threads 1): otherwise an OpenMP thread that spins waiting for a descheduled partner can make
every parallel op wait out a time slice, and the run slows down tens of times.
"""

import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import DecoderOnlyConfig, DecoderOnlyLM, sinusoidal_table

CONFIG = DecoderOnlyConfig(vocab_size=8192, block_size=256, n_layer=4, n_head=4, d_model=256, d_ff=1024,
                           dropout=0.0)


class RefBlock(nn.Module):
    def __init__(self, d_model: int, n_head: int, d_ff: int):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).view(B, T, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, d_k)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp(self.ln_2(x))


class RefGPT(nn.Module):
    def __init__(self, c: DecoderOnlyConfig):
        super().__init__()
        self.wte = nn.Embedding(c.vocab_size, c.d_model)
        self.register_buffer("wpe", sinusoidal_table(c.block_size, c.d_model), persistent=False)
        self.blocks = nn.ModuleList(RefBlock(c.d_model, c.n_head, c.d_ff) for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.d_model)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe[: idx.size(1)]
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied output projection
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def train_step(model, optimizer, idx, targets, ours: bool) -> None:
    loss = model(idx, targets=targets).loss if ours else model(idx, targets)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="timed steps per model (default 10)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures to this JSON file")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    models = {"ours": DecoderOnlyLM(CONFIG).train(), "ref": RefGPT(CONFIG).train()}
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=3e-4) for name, m in models.items()}
    data = torch.randint(0, CONFIG.vocab_size, (args.rounds + 1, args.batch, CONFIG.block_size + 1))
    tokens_per_step = args.batch * CONFIG.block_size

    order = list(models)
    seconds = {name: [] for name in models}
    for r in range(args.rounds + 1):  # round 0 is the warm-up
        idx, targets = data[r, :, :-1], data[r, :, 1:]
        for name in order if r % 2 else order[::-1]:  # who goes first alternates too
            t0 = time.perf_counter()
            train_step(models[name], optimizers[name], idx, targets, ours=name == "ours")
            if r > 0:
                seconds[name].append(time.perf_counter() - t0)

    tps = {name: tokens_per_step / statistics.median(s) for name, s in seconds.items()}
    params = {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()}
    result = {
        "config": {**vars(CONFIG), "batch": args.batch, "threads": torch.get_num_threads(), "rounds": args.rounds},
        "tokens_per_s": tps,
        "params": params,
        "ratio_ours_over_ref": tps["ours"] / tps["ref"],
    }
    print(f"config: {CONFIG.n_layer} layers, {CONFIG.n_head} heads, d_model {CONFIG.d_model}, d_ff {CONFIG.d_ff}, "
          f"context {CONFIG.block_size}, vocab {CONFIG.vocab_size}, batch {args.batch}, "
          f"{torch.get_num_threads()} threads, {args.rounds} rounds")
    for name in models:
        spread = ", ".join(f"{tokens_per_step / s:.0f}" for s in seconds[name])
        print(f"{name:>4}: {tps[name]:8.0f} tokens/s (median; rounds: {spread})  params {params[name]:,}")
    print(f"ratio ours/ref: {result['ratio_ours_over_ref']:.3f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
