#!/usr/bin/env bash
# One call on a lent H100 (issue 28): one reader (READER=bwd, the default, or fwd) on the shipped
# classifier's full schedule (1,900 steps, the recipe of checkpoints/sentiment), in up to four
# variants at once on the one GPU (each ~80 s alone since the cuDNN fix), RUNS of:
#   full     the recipe as it is: for bwd the control (the shipped backward reader is this recipe,
#            run on the CPU: runs/sentiment-bwd-full), for fwd the shipped reader again: leave it out;
#   pseudo   + self-training: the unlabeled reviews the shipped pair is confident of
#            (runs/pseudo/pair.jsonl, built on the CPU by training.pseudo), with its verdict;
#   shout    + --shout-prob 0.3 (a share of the crops recased: capitals, Title Case; the case
#            failures of benchmarks.behaviour);
#   copies   + --sentence-copies 1 (each training review's first and last sentence as rows);
#   s2       the recipe with --seed 2 (same held-out rows): how far two seeds differ, the yardstick.
# Then every run's P(positive) on the selection rows (benchmarks.ensemble --rows): paired with the
# other direction's shipped reader's rows on the CPU afterwards (its weights do not fit the call).
#
#   READER=bwd RUNS="full pseudo shout s2" bash gpu.sh      (the default)
#   READER=fwd RUNS="pseudo shout copies" LM=.gpu/lm bash gpu.sh
#
# What to carry (the working tree with checkpoints/ moved out of it, ~7 MiB, plus, within 64 MiB):
#   .gpu (data: train + unsupervised parquet, 32 MiB with the `datasets` wheels the device lacks),
#   the LM (bwd: runs/gpu-2026-11-27/lm-bwd; fwd: a copy of checkpoints/lm in .gpu/lm; 20 MiB each),
#   runs/pseudo (the labels, ~2 MiB)
# What comes back ($OUT, at most 8 files of 16 MiB): small.tgz (logs, metrics, configs, curves, the
# ensemble JSON), and the weights of the first three RUNS in 15 MB parts (`cat` them back together).
# SMOKE=1 shrinks every stage to seconds (the CPU rehearsal of this exact script: DEVICE=cpu).
set -u
export PYTHONUNBUFFERED=1 TINY_TRANSFORMERS_CACHE=/tmp/tokcache
OUT=${OUT:-runs/gpu-out}; mkdir -p "$OUT"
T0=$(date +%s); BUDGET=${BUDGET:-480}
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
minutes() { python3 -c "print(max(0.5, ($1) / 60))"; }
if [ -d .gpu/whl ] && ! python3 -c "import datasets" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu/whl/*.whl \
    && export PYTHONPATH=/tmp/site || exit 3
fi
D=${DATA:-.gpu/data/imdb}
DEVICE=${DEVICE:-cuda}
LABELS=${LABELS:-runs/pseudo/pair.jsonl}
READER=${READER:-bwd}
RUNS=(${RUNS:-full pseudo shout s2})
LM=${LM:-runs/gpu-2026-11-27/lm-bwd}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"; lscpu | grep "Model name"; wc -l "$LABELS"; } > "$OUT/machine.txt" 2>&1
NV=""; if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 2 > "$OUT/gpu_util.csv" 2>&1 & NV=$!
fi

if [ "${SMOKE:-0}" = 1 ]; then  # no --max-examples: --pseudo-labels refuses it (the held-out rows would move)
  SIZE="--max-tokens 2048 --max-steps 4 --eval-every 2 --eval-batches 1 --warmup-steps 1 --unfreeze-every 1"
  EVAL="--val-size 20"  # a few rows (other held-out rows: a rehearsal, not a figure)
else
  SIZE="--max-tokens 16384 --max-steps 1900 --eval-every 100 --eval-batches 32 --warmup-steps 190 --unfreeze-every 100"
  EVAL=""
fi
FT="--task sentiment --preset base --data-dir $D --device $DEVICE --precision auto --set causal_encoder=1 --lr 1e-3 \
  --layer-decay 0.385 --schedule stlr --crop-prob 0.3 --label-smoothing 0.1 --average-last 2 --save-dtype float16 \
  --init-from $LM $SIZE"
STOP=$(minutes "$(left) - 150")  # leaves the ensemble stage its time
declare -A EXTRA=([full]="--seed 1337" [pseudo]="--seed 1337 --pseudo-labels $LABELS --pseudo-confidence 0.9"
                  [shout]="--seed 1337 --shout-prob 0.3" [copies]="--seed 1337 --sentence-copies 1"
                  [s2]="--seed 2 --split-seed 1337")
PIDS=(); NAMES=()
for v in "${RUNS[@]}"; do
  run="$READER-$v"; NAMES+=("runs/$run")
  ( python3 -m training.run $FT ${EXTRA[$v]} --out "runs/$run" --max-minutes "$STOP"
    echo "$run rc $? at $(( $(date +%s) - T0 )) s" ) > "$OUT/$run.log" 2>&1 &
  PIDS+=($!)
done
wait "${PIDS[@]}"
ALSO=(); [ ${#NAMES[@]} -gt 1 ] && ALSO=(--also "${NAMES[@]:1}")
python3 -m benchmarks.ensemble --checkpoint "${NAMES[0]}" "${ALSO[@]}" --data-dir "$D" \
  --device "$DEVICE" --split selection $EVAL --rows --json "$OUT/ensemble_selection.json" > "$OUT/ensemble.log" 2>&1
echo "ensemble rc $? at $(( $(date +%s) - T0 )) s" >> "$OUT/ensemble.log"
[ -n "$NV" ] && kill $NV 2>/dev/null; touch "$OUT/gpu_util.csv"
mkdir -p "$OUT/small"
for v in "${RUNS[@]}"; do
  r="$READER-$v"
  for f in metrics.json config.json training_curve.png; do [ -f "runs/$r/$f" ] && cp "runs/$r/$f" "$OUT/small/$r-$f"; done
  mv "$OUT/$r.log" "$OUT/small/"
done
mv "$OUT/ensemble_selection.json" "$OUT/machine.txt" "$OUT/gpu_util.csv" "$OUT/small/" 2>/dev/null; cp "$OUT/ensemble.log" "$OUT/small/"
tar -czf "$OUT/small.tgz" -C "$OUT" small && rm -r "$OUT/small"
for v in "${RUNS[@]:0:3}"; do
  r="$READER-$v"
  [ -f "runs/$r/model.safetensors" ] && split -b 15000000 "runs/$r/model.safetensors" "$OUT/$r.part-"
done
ls -la "$OUT"; tail -2 "$OUT/ensemble.log"
