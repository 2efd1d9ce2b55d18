import time, torch, torch.nn.functional as F
torch.set_num_threads(2)
x = torch.randn(16, 5, 1024, 1024)
def t(name, f, n=3):
    f(); ts=[]
    for _ in range(n):
        s=time.perf_counter(); f(); ts.append(time.perf_counter()-s)
    print(f"{name:45s} {sorted(ts)[n//2]*1000:8.1f} ms")
t("F.dropout fp32", lambda: F.dropout(x, 0.1))
xb = x.bfloat16()
t("F.dropout bf16", lambda: F.dropout(xb, 0.1))
t("bernoulli_ into bool", lambda: torch.empty(x.shape, dtype=torch.bool).bernoulli_(0.9))
t("bernoulli_ into uint8", lambda: torch.empty(x.shape, dtype=torch.uint8).bernoulli_(0.9))
t("rand_like fp32 >= p", lambda: torch.rand_like(x) >= 0.1)
t("rand bf16 >= p", lambda: torch.rand(x.shape, dtype=torch.bfloat16) >= 0.1)
t("randint uint8", lambda: torch.randint(0, 256, x.shape, dtype=torch.uint8))
t("native_dropout", lambda: torch.native_dropout(x, 0.1, True))
t("x*mask/0.9 (mul only)", lambda: x * (x > 0) / 0.9)
