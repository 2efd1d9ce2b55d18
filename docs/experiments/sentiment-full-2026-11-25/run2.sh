#!/usr/bin/env bash
# On the lent GPU: one full-scale sentiment run alone. $1 = name, the rest = extra flags.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site || exit 3
D=.gpu/data/imdb; NAME=$1; shift; R=runs/$NAME
( date +%T; python3 -m training.run --task sentiment --preset base --data-dir $D --precision auto --seed 1337 \
    --init-from checkpoints/lm --set causal_encoder=1 --max-tokens 16384 --lr 1e-3 --layer-decay 0.385 --schedule stlr \
    --warmup-steps 190 --unfreeze-every 100 --max-steps 1900 --eval-every 50 --eval-batches 32 --crop-prob 0.3 \
    --label-smoothing 0.1 --average-last 2 --save-dtype float16 --max-minutes 8.3 --out $R "$@"; echo "run rc $? at $(date +%T)" ) > $OUT/full.log 2>&1
cp $R/metrics.json $R/config.json $OUT/
python3 -m training.evaluate --checkpoint $R --data-dir $D --split selection --short-text > $OUT/short.json 2>>$OUT/full.log
split -b 15000000 $R/model.safetensors $OUT/model.part-
