import sys, time, torch
sys.path.insert(0, sys.argv[1])
from model import DecoderOnlyLM, GenerationConfig
torch.set_num_threads(1)
lm = DecoderOnlyLM.from_pretrained(sys.argv[1] + "/checkpoints/lm").eval()
prompt = torch.tensor([[1]])
cfg = GenerationConfig(max_new_tokens=200, temperature=0)
def run():
    t = time.perf_counter()
    with torch.inference_mode():
        out = lm.generate(prompt, cfg)
    return time.perf_counter() - t
run()
ts = sorted(run() for _ in range(9))
print(sys.argv[1], f"median {ts[4]*1000/200:.3f} ms/token", [f"{t:.3f}" for t in ts])
