#!/usr/bin/env bash
# One call on a lent GPU (issue 28, tenth session): five full-schedule readers (the shipped
# classifier's recipe, 1,900 steps from an LM) in two waves, then every reader's and every
# combination's figures on the selection rows, with each row's P(positive), so that the new readers
# are paired with the shipped ones on the CPU afterwards (their weights do not travel with these).
#
#   wave 1, at once: lm-bwd       the backward LM again (the shipped LM's command + --set reverse=1;
#                                 the earlier one was lost with the old machine's runs/)
#                    fwd-fused    the forward reader's exact recipe + --set attention_dropout=0: the
#                                 GPU twin of the CPU run runs/sentiment-fwd-fused (is the dropout
#                                 on the attention weights worth keeping, at full scale?)
#                    fwd-copies   + --sentence-copies 1 (each review's first and last sentence as
#                                 rows too), at full scale from the LM for the first time
#   wave 2, once lm-bwd is done: bwd         the backward reader's recipe, from the new LM
#                    bwd-copies   + --sentence-copies 1
#                    fwd-s2       the forward recipe with --seed 2 (same held-out rows): the
#                                 yardstick, how far two seeds of one recipe differ at the end
#   then: benchmarks.ensemble over the five, --rows; the weights of the best new forward + backward
#   pair (mean of its full-review and short-text accuracy) come back in 15 MB parts.
#
# Carry: .gpu (data re-compressed, the `datasets` wheels the device lacks, a copy of checkpoints/lm
# in .gpu/lm); checkpoints/ leaves the tree for the call (93 MiB). SMOKE=1 DEVICE=cpu rehearses it.
set -u
export PYTHONUNBUFFERED=1 TINY_TRANSFORMERS_CACHE=/tmp/tokcache
OUT=${OUT:-runs/gpu-out}; mkdir -p "$OUT"
T0=$(date +%s); BUDGET=${BUDGET:-560}
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
minutes() { python3 -c "print(round(max(0.3, ($1) / 60), 2))"; }
stamp() { echo "$1 at $(( $(date +%s) - T0 )) s" >> "$OUT/timeline.txt"; }
if [ -d .gpu/whl ] && ! python3 -c "import datasets" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu/whl/*.whl \
    && export PYTHONPATH=/tmp/site || exit 3
fi
D=${DATA:-.gpu/data/imdb}; LM=${LM:-.gpu/lm}; TOK=$LM/tokenizer.json; DEVICE=${DEVICE:-cuda}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"; lscpu | grep "Model name"; } > "$OUT/machine.txt" 2>&1
NV=""; if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 2 > "$OUT/gpu_util.csv" 2>&1 & NV=$!
fi
if [ "${SMOKE:-0}" = 1 ]; then
  FTSIZE="--max-tokens 2048 --max-steps 4 --eval-every 2 --eval-batches 1 --warmup-steps 1 --unfreeze-every 1 --max-examples 400 --val-size 20"
  LMSIZE="--batch-size 4 --max-steps 6 --eval-every 3 --warmup-steps 1"; EVAL="--val-size 20"; THREADS=1
else
  FTSIZE="--max-tokens 16384 --max-steps 1900 --eval-every 50 --eval-batches 32 --warmup-steps 190 --unfreeze-every 100"
  LMSIZE="--batch-size 64 --max-steps 6000 --eval-every 1000 --warmup-steps 300"; EVAL=""; THREADS=2
fi
FT="--task sentiment --preset base --data-dir $D --tokenizer $TOK --device $DEVICE --precision auto --threads $THREADS \
  --set causal_encoder=1 --lr 1e-3 --layer-decay 0.385 --schedule stlr --crop-prob 0.3 --label-smoothing 0.1 \
  --average-last 2 --save-dtype float16 $FTSIZE"
declare -A EXTRA=([fwd-fused]="--init-from $LM --seed 1337 --set attention_dropout=0"
                  [fwd-copies]="--init-from $LM --seed 1337 --sentence-copies 1"
                  [fwd-s2]="--init-from $LM --seed 2 --split-seed 1337"
                  [bwd]="--init-from runs/lm-bwd --seed 1337"
                  [bwd-copies]="--init-from runs/lm-bwd --seed 1337 --sentence-copies 1")
finetune() {  # name, minutes
  ( python3 -m training.run $FT ${EXTRA[$1]} --out "runs/$1" --max-minutes "$2"; stamp "$1 rc $?" ) > "$OUT/$1.log" 2>&1
}

stamp start
( python3 -m training.run --task lm --data-dir "$D" --tokenizer "$TOK" --device "$DEVICE" --precision auto \
    --threads "$THREADS" --save-dtype float16 --set reverse=1 --set n_layer=6 --set d_model=320 --set n_head=5 \
    --set d_ff=1280 --lr 1.5e-3 $LMSIZE --out runs/lm-bwd --max-minutes "$(minutes "$(left) - 230")"
  stamp "lm-bwd rc $?" ) > "$OUT/lm-bwd.log" 2>&1 &
LMPID=$!
W1=(); for v in fwd-fused fwd-copies; do finetune "$v" "$(minutes "$(left) - 100")" & W1+=($!); done
wait "$LMPID"
W2=(); for v in bwd bwd-copies fwd-s2; do finetune "$v" "$(minutes "$(left) - 70")" & W2+=($!); done
wait "${W1[@]}" "${W2[@]}"
NAMES=(); for r in fwd-fused fwd-copies fwd-s2 bwd bwd-copies; do [ -f "runs/$r/model.safetensors" ] && NAMES+=("runs/$r"); done
python3 -m benchmarks.ensemble --checkpoint "${NAMES[0]}" --also "${NAMES[@]:1}" --data-dir "$D" --device "$DEVICE" \
  --split selection $EVAL --rows --json "$OUT/ensemble_selection.json" > "$OUT/ensemble.log" 2>&1
stamp "ensemble rc $?"
[ -n "$NV" ] && kill $NV 2>/dev/null; touch "$OUT/gpu_util.csv"
BEST=$(python3 - "$OUT/ensemble_selection.json" <<'EOF'
import json, sys
table = json.load(open(sys.argv[1]))["table"]
pairs = [r for r in table if len(r["models"]) == 2 and sum("fwd" in m for m in r["models"]) == 1]
best = max(pairs, key=lambda r: r["full_reviews"]["accuracy"] + r["short_text"]["accuracy"])
print(" ".join(m.split("/")[-1] for m in best["models"]))
EOF
)
stamp "best pair: $BEST"
mkdir -p "$OUT/small"
for r in lm-bwd fwd-fused fwd-copies fwd-s2 bwd bwd-copies; do
  for f in metrics.json config.json training_curve.png; do [ -f "runs/$r/$f" ] && cp "runs/$r/$f" "$OUT/small/$r-$f"; done
  mv "$OUT/$r.log" "$OUT/small/" 2>/dev/null
done
mv "$OUT/ensemble_selection.json" "$OUT/machine.txt" "$OUT/gpu_util.csv" "$OUT/ensemble.log" "$OUT/timeline.txt" "$OUT/small/"
tar -czf "$OUT/small.tgz" -C "$OUT" small && rm -r "$OUT/small"
for r in $BEST; do [ -f "runs/$r/model.safetensors" ] && split -b 15000000 "runs/$r/model.safetensors" "$OUT/$r.part-"; done
ls -la "$OUT"
