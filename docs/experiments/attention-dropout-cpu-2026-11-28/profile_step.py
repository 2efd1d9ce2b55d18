"""Where a training step of the sentiment recipe spends its time on this CPU, fp32 vs bf16 autocast."""
import sys, time, torch
from model import EncoderDecoder, EncoderDecoderConfig, autocast, read_config
from training.recipe import smoothed_loss
torch.set_num_threads(2)
cfg = EncoderDecoderConfig(**{k: v for k, v in read_config("checkpoints/sentiment").items() if k != "model_type"})
torch.manual_seed(0)
model = EncoderDecoder(cfg).train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
B, S = int(sys.argv[2]), int(sys.argv[3])
src = torch.randint(3, 8192, (B, S)); mask = torch.ones(B, S, dtype=torch.bool)
tgt = torch.tensor([[1, 500]] * B); targets = torch.tensor([[500, 2]] * B)
def step():
    out = model(src_ids=src, tgt_ids=tgt, src_mask=mask)
    loss = smoothed_loss(out.logits, targets, 0.1)
    opt.zero_grad(); loss.backward(); opt.step()
with autocast(torch.device("cpu"), sys.argv[1]):
    step()
    times = []
    for _ in range(3):
        t = time.perf_counter(); step(); times.append(time.perf_counter() - t)
    print(sys.argv[1:], "median s/step", sorted(times)[1], "tok/s", B * S / sorted(times)[1])
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU]) as p:
        step()
print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))
