#!/usr/bin/env bash
# One call on a lent H100 (issue 28): ULMFiT's backward half, and the control for it.
#   A: a backward LM (the shipped LM's command with --set reverse=1), then a classifier fine-tuned from it
#      (the shipped classifier's recipe on a 1,200-step schedule: what fits the call);
#   B: at the same time, a forward classifier from the shipped LM, same schedule, another seed
#      (--seed 2 --split-seed 1337: the same training and selection rows), the control for "two models";
#   then both classifiers' P(positive) on every selection row (benchmarks.ensemble --rows), and
#   the GPU's utilisation over the whole call (for the next speed-up).
# SMOKE=1 shrinks every stage to seconds (the CPU rehearsal of this exact script).
set -u
export PYTHONUNBUFFERED=1 TINY_TRANSFORMERS_CACHE=/tmp/tokcache
OUT=${OUT:-runs/gpu-out}; mkdir -p "$OUT"
T0=$(date +%s); BUDGET=${BUDGET:-570}
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
minutes() { python3 -c "print(max(0.5, ($1) / 60))"; }
if [ -d .gpu/whl ] && ! python3 -c "import datasets" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu/whl/*.whl \
    && export PYTHONPATH=/tmp/site || exit 3
fi
D=${DATA:-.gpu/data/imdb}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"; lscpu | grep "Model name"; } > "$OUT/machine.txt" 2>&1
NV=""; if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 2 > "$OUT/gpu_util.csv" 2>&1 & NV=$!
fi

if [ "${SMOKE:-0}" = 1 ]; then
  LM_SIZE="--preset tiny --max-examples 400 --val-size 100 --max-steps 6 --eval-every 3"
  FT_SIZE="--max-examples 400 --val-size 100 --set max_src_len=128 --set src_keep_tail=32 --max-tokens 1024 --max-steps 6 --eval-every 3 --eval-batches 2 --warmup-steps 1 --unfreeze-every 2"
else
  LM_SIZE="--set n_layer=6 --set d_model=320 --set n_head=5 --set d_ff=1280 --batch-size 64 --lr 1.5e-3 --warmup-steps 300 --max-steps 6000 --eval-every 1000"
  FT_SIZE="--max-tokens 16384 --max-steps 1200 --eval-every 100 --eval-batches 32 --warmup-steps 120 --unfreeze-every 100"
fi
FT="--task sentiment --preset base --data-dir $D --precision auto --set causal_encoder=1 --lr 1e-3 --layer-decay 0.385 \
  --schedule stlr --crop-prob 0.3 --label-smoothing 0.1 --average-last 2 --save-dtype float16 $FT_SIZE"
FWD_LM=${FWD_LM:-checkpoints/lm}

( python3 -m training.run $FT --init-from "$FWD_LM" --seed 2 --split-seed 1337 --out runs/ft-fwd-s2 \
    --max-minutes "$(minutes "$(left) - 75")"; echo "B rc $? at $(( $(date +%s) - T0 )) s" ) > "$OUT/B.log" 2>&1 &
B=$!
( python3 -m training.run --task lm --data-dir $D --precision auto --save-dtype float16 --set reverse=1 $LM_SIZE \
    ${LM_TOKENIZER:+--tokenizer $LM_TOKENIZER} --out runs/lm-bwd --max-minutes "$(minutes 220)"; echo "A-lm rc $? at $(( $(date +%s) - T0 )) s"
  python3 -m training.run $FT --init-from runs/lm-bwd --seed 1337 --out runs/ft-bwd \
    --max-minutes "$(minutes "$(left) - 75")"; echo "A-ft rc $? at $(( $(date +%s) - T0 )) s" ) > "$OUT/A.log" 2>&1
wait $B
python3 -m benchmarks.ensemble --checkpoint runs/ft-bwd runs/ft-fwd-s2 --data-dir $D --device "${DEVICE:-cuda}" \
  ${SMOKE_EVAL:-} --rows --json "$OUT/ensemble_selection.json" > "$OUT/ensemble.log" 2>&1
echo "ensemble rc $? at $(( $(date +%s) - T0 )) s" >> "$OUT/ensemble.log"
[ -n "$NV" ] && kill $NV 2>/dev/null; touch "$OUT/gpu_util.csv"
mkdir -p "$OUT/small"
for r in lm-bwd ft-bwd ft-fwd-s2; do
  for f in metrics.json config.json training_curve.png; do [ -f runs/$r/$f ] && cp runs/$r/$f "$OUT/small/$r-$f"; done
done
tar -czf "$OUT/small.tgz" -C "$OUT" small A.log B.log machine.txt gpu_util.csv ensemble.log && rm -r "$OUT/small"
[ -f runs/ft-bwd/model.safetensors ] && split -b 15000000 runs/ft-bwd/model.safetensors "$OUT/ft-bwd.part-"
[ -f runs/lm-bwd/model.safetensors ] && split -b 15000000 runs/lm-bwd/model.safetensors "$OUT/lm-bwd.part-"
ls -la "$OUT"; tail -3 "$OUT/A.log" "$OUT/B.log" "$OUT/ensemble.log"
