#!/bin/bash
# issue 64, run A: the forward reader, short-input stage from the shipped weights
cd /work/wip-64
export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
echo "# $(date -u +%FT%TZ) start; $(uptime)"
/usr/bin/time -f "wall %e s, max RSS %M KB" nice python -m training.run --task sentiment --preset base --data-dir ../shared/data/imdb --precision auto --set causal_encoder=1 --init-from checkpoints/sentiment --evidence runs/short/linear.jsonl --evidence-prob 0.5 --crop-prob 0.2 --lr 3e-4 --schedule stlr --warmup-steps 30 --unfreeze-every 150 --layer-decay 0.385 --max-tokens 4096 --max-steps 900 --eval-every 150 --eval-batches 8 --label-smoothing 0.1 --average-last 2 --save-dtype float16 --seed 1337 --max-minutes 45 --out runs/short/fwd-a
echo "# $(date -u +%FT%TZ) end"
