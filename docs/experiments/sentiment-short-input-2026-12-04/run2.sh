#!/bin/bash
# issue 64, round 2: every layer trainable from the first step (layer-wise rates), peak lr 1e-3.
# usage: run2.sh INIT OUT
cd /work/wip-64
export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
echo "# $(date -u +%FT%TZ) start; $(uptime)"
/usr/bin/time -f "wall %e s, max RSS %M KB" nice python -m training.run --task sentiment --preset base --data-dir ../shared/data/imdb --precision auto --set causal_encoder=1 --init-from "$1" --evidence runs/short/linear.jsonl --evidence-prob 0.5 --crop-prob 0.2 --lr 1e-3 --schedule stlr --warmup-steps 30 --unfreeze-every 0 --layer-decay 0.385 --max-tokens 4096 --max-steps 500 --eval-every 125 --eval-batches 8 --label-smoothing 0.1 --average-last 2 --save-dtype float16 --seed 1337 --max-minutes 40 --out "$2"
echo "# $(date -u +%FT%TZ) end"
