#!/usr/bin/env bash
# The evidence variant: ulmfit-nolm + the evidence snippets of the first 2039 training reviews (a frozen copy of the cache).
set -u
cd /work/var
common="--task sentiment --preset base --data-dir ../shared/data/imdb --precision auto --seed 1337 --init-from checkpoints/lm
 --set max_src_len=256 --set src_keep_tail=0 --max-tokens 4096 --warmup-steps 30 --max-steps 300 --eval-every 75
 --eval-batches 32 --set causal_encoder=1 --crop-prob 0.3 --label-smoothing 0.1 --average-last 2"
name=ulmfit-nolm-evidence
OMP_NUM_THREADS=1 nice -n 5 python -m training.run $common --out runs/variants/$name --overwrite --lr 1e-3 --layer-decay 0.385 --schedule stlr --unfreeze-every 25 --evidence runs/evidence/train-first-2039.jsonl --evidence-prob 0.2 > runs/variants/$name.log 2>&1
OMP_NUM_THREADS=1 nice -n 5 python -m training.evaluate --checkpoint runs/variants/$name --data-dir ../shared/data/imdb --split selection --short-text > runs/variants/$name.short.json 2>runs/variants/$name.short.log
echo "== done $(date +%T)" >> runs/variants/$name.log
