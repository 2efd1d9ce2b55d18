import time, sys, torch
from model import DecoderOnlyLM, DecoderOnlyConfig, autocast
from training.trainer import make_optimizer
from training.training_args import TrainConfig
torch.set_num_threads(int(sys.argv[1]))
shapes=[tuple(map(int,a.split(","))) for a in sys.argv[2:]]
for L,H,d,ff,T,B in shapes:
    m=DecoderOnlyLM(DecoderOnlyConfig(vocab_size=8192,n_layer=L,n_head=H,d_model=d,d_ff=ff,block_size=T,dropout=0.0))
    opt=make_optimizer(m,TrainConfig())
    x=torch.randint(0,8192,(B,T)); y=torch.randint(0,8192,(B,T))
    ts=[];c=[]
    for i in range(8):
        t=time.perf_counter(); c0=time.process_time()
        with autocast("cpu","bf16"):
            loss=m(x,targets=y,loss_only=True).loss
        opt.zero_grad(); loss.backward(); opt.step()
        ts.append(time.perf_counter()-t); c.append(time.process_time()-c0)
    s=sorted(ts[2:])[2]; cs=sorted(c[2:])[2]
    print(f"threads {sys.argv[1]} L{L} d{d} T{T} B{B} {m.num_parameters()/1e6:.2f}M: wall {s*1000:.0f} ms/step ({B*T/s:,.0f} tok/s), cpu {cs*1000:.0f} ms",flush=True)
