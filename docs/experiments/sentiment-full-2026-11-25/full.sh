#!/usr/bin/env bash
# On the lent GPU: the full-scale ULMFiT sentiment run (issue 28) with a preflight of every stage beside it.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site || exit 3
D=.gpu/data/imdb
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c "import torch,sys; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name(0), torch.cuda.is_bf16_supported())"; lscpu | grep "Model name"; } >> $OUT/preflight.log 2>&1
# the full-scale run: the CPU run's command (runs/sentiment-full), on cuda
( date +%T; python3 -m training.run --task sentiment --preset base --data-dir $D --precision auto --seed 1337 \
    --init-from checkpoints/lm --set causal_encoder=1 --max-tokens 16384 --lr 1e-3 --layer-decay 0.385 --schedule stlr \
    --warmup-steps 190 --unfreeze-every 100 --max-steps 1900 --eval-every 50 --eval-batches 32 --crop-prob 0.3 \
    --label-smoothing 0.1 --average-last 2 --save-dtype float16 --max-minutes 7 --out runs/sentiment-full-gpu \
    ; echo "run rc $? at $(date +%T)" ) > $OUT/full.log 2>&1 &
FULL=$!
sleep 20
# preflight: every stage once on cuda, tiny
{ set -x
  python3 -m training.run --task lm --preset tiny --data-dir $D --max-steps 40 --eval-every 20 --out runs/pf-lm
  python3 -m training.sample --checkpoint runs/pf-lm --max-new-tokens 20 "This movie was"
  python3 -m training.run --task sentiment --preset tiny --data-dir $D --max-steps 40 --eval-every 20 --out runs/pf-sent
  python3 -m training.evaluate --checkpoint runs/pf-sent --data-dir $D --split selection
  python3 -m training.run --task span --preset tiny --data-dir $D --max-steps 20 --eval-every 10 --out runs/pf-span
  python3 -m training.run --task sentiment --preset tiny --data-dir $D --max-steps 20 --eval-every 10 --init-from checkpoints/lm --out runs/pf-ft
  set +x; } >> $OUT/preflight.log 2>&1
echo "preflight rc $?" >> $OUT/preflight.log
wait $FULL; echo "full rc $?" >> $OUT/full.log
R=runs/sentiment-full-gpu
cp $R/metrics.json $R/config.json $OUT/ 2>/dev/null
python3 -m training.evaluate --checkpoint $R --data-dir $D --split selection --short-text > $OUT/short.json 2>>$OUT/full.log
split -b 15000000 $R/model.safetensors $OUT/model.part-
ls -la $OUT
