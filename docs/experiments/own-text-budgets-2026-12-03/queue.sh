#!/bin/bash
# Side by side with nanoGPT on tinyshakespeare at equal wall-clock budgets, then the IMDB laptop pair.
set -u
cd /work/main
C=runs/cmp
JE=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
nano() {  # nano NAME ITERS
  ( cd /work/nanogpt && echo "# $(date -u +%FT%TZ) start; uptime: $(uptime)" && /usr/bin/time -f "wall %e s, max RSS %M KB" nice python train.py config/train_shakespeare_char.py --device=cpu --compile=False --eval_iters=20 \
      --log_interval=50 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 \
      --max_iters=$2 --lr_decay_iters=$2 --dropout=0.0 --eval_interval=250 --out_dir=out-$1 && echo "# $(date -u +%FT%TZ) end; uptime: $(uptime)" ) > $C/$1.log 2>&1
}
ours() {  # ours NAME ARGS...
  name=$1; shift
  { echo "# $(date -u +%FT%TZ) start; uptime: $(uptime)"
    echo "# command: python -m training.run $*"
    LD_PRELOAD=$JE /usr/bin/time -f "wall %e s, max RSS %M KB" nice python -m training.run "$@"
    echo "# $(date -u +%FT%TZ) end; uptime: $(uptime)"; } > $C/$name.log 2>&1
}
ev() { python -m training.evaluate --checkpoint $C/$1 --data $C/val.txt > $C/$1.eval.log 2>&1; }
lscpu > $C/lscpu.txt
exec 9>/tmp/cpu.lock; flock 9
nano nano-2000 2000
W=$(grep -o 'wall [0-9.]*' $C/nano-2000.log | awk '{print $2}')
ours ts-3 --task lm --preset laptop --data $C/train.txt --out $C/ts-3 --max-minutes 3; ev ts-3
I3=$(python -c "print(int(2000*180/$W*0.97)//250*250)")
nano nano-3m $I3
ours ts-9 --task lm --preset laptop --data $C/train.txt --out $C/ts-9; ev ts-9
I9=$(python -c "print(int(2000*540/$W*0.97)//250*250)")
nano nano-9m $I9
ours imdb-lm --task lm --preset laptop --data-dir ../shared/data/imdb --out $C/imdb-lm
ours imdb-sent --task sentiment --preset laptop --init-from $C/imdb-lm --data-dir ../shared/data/imdb --out $C/imdb-sent
echo done > $C/queue.done
