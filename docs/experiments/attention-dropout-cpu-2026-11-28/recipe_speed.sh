#!/usr/bin/env bash
# The shipped classifier's recipe (checkpoints/sentiment's flags, every layer training: no
# --unfreeze-every) for 16 steps, from the shipped forward LM, in fp32 and bf16, with and without
# dropout on the attention weights; the same seed, so the same 16 batches (195,289 tokens) each.
# One after the other, nothing else running; `training` in each log's `done` line is the trainer's clock.
set -u
R="--task sentiment --preset base --data-dir ../shared/data/imdb --set causal_encoder=1 --lr 1e-3 --layer-decay 0.385 \
 --schedule stlr --crop-prob 0.3 --label-smoothing 0.1 --average-last 2 --save-dtype float16 --max-tokens 16384 \
 --max-steps 16 --eval-every 1000 --eval-batches 1 --warmup-steps 2 --init-from checkpoints/lm --seed 1337 --threads 2 \
 --max-minutes 8"
mkdir -p runs/speed
for repeat in 1 2; do
  for p in bf16 fp32; do
    for attention in "" "--set attention_dropout=0"; do
      name=$p${attention:+-fused}-$repeat
      /usr/bin/time -v python -m training.run $R $attention --precision $p --out runs/speed/$name > runs/speed/$name.log 2>&1
      grep -ao "done ([^)]*)[^>]*" runs/speed/$name.log | sed "s/^/$name: /"
    done
  done
done
