"""Seconds per training step of the recipe's shape (16 x 1,024 tokens), with and without dropout on the attention weights."""
import sys, time, torch
from model import EncoderDecoder, EncoderDecoderConfig, autocast, read_config
from training.recipe import smoothed_loss
torch.set_num_threads(2)
cfg = EncoderDecoderConfig(**{k: v for k, v in read_config("checkpoints/sentiment").items() if k != "model_type"})
B, S = 16, 1024
src = torch.randint(3, 8192, (B, S)); mask = torch.ones(B, S, dtype=torch.bool)
tgt = torch.tensor([[1, 500]] * B); targets = torch.tensor([[500, 2]] * B)
for attn_drop in (True, False):
    for precision in ("fp32", "bf16"):
        torch.manual_seed(0)
        model = EncoderDecoder(cfg if attn_drop else EncoderDecoderConfig(**{**cfg.__dict__, "attention_dropout": 0.0})).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        def step():
            out = model(src_ids=src, tgt_ids=tgt, src_mask=mask)
            loss = smoothed_loss(out.logits, targets, 0.1)
            opt.zero_grad(); loss.backward(); opt.step()
        with autocast(torch.device("cpu"), precision):
            step(); ts = []
            for _ in range(3):
                t = time.perf_counter(); step(); ts.append(time.perf_counter() - t)
        med = sorted(ts)[1]
        print(f"attention dropout {attn_drop!s:5}  {precision}: {med:6.2f} s/step, {B*S/med:7.0f} tokens/s", flush=True)
