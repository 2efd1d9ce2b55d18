#!/bin/bash
# issue 64, round 5 (second session): as round 4, negations 64 copies: the reading that gives a one-line text's first word its
# after-a-space token, the evidence re-read that way; run 3's recipe at half the rate and half the steps.
# usage: run5.sh INIT OUT
cd /work/wip-64c
export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
echo "# $(date -u +%FT%TZ) start; $(uptime)"
/usr/bin/time -f "wall %e s, max RSS %M KB" nice python -m training.run --task sentiment --preset base --data-dir ../shared/data/imdb --precision auto --set causal_encoder=1 --init-from "$1" --evidence runs/short/linear.jsonl --evidence-copies 8 --negation-copies 64 --crop-prob 0.2 --lr 5e-4 --schedule stlr --warmup-steps 30 --unfreeze-every 0 --layer-decay 0.385 --max-tokens 4096 --max-steps 300 --eval-every 100 --eval-batches 8 --label-smoothing 0.1 --average-last 2 --save-dtype float16 --seed 1337 --max-minutes 30 --out "$2"
echo "# $(date -u +%FT%TZ) end"
