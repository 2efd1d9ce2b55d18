#!/bin/bash
# issue 62, second round: the two single changes of own-text-shape-2026-12-04 together, then one more
# change on top of them, then more dropout; each alone on the machine under the CPU lock, the preset's
# 9 minutes, then scored on nanoGPT's val.txt (the last 10% of the characters). usage: trials.sh OUT_ROOT
set -u
source "$(dirname "$0")/run.sh"
OUT=$1; mkdir -p "$OUT"
python - "$TEXT" "$OUT/val.txt" <<'PY'
import sys
text = open(sys.argv[1], encoding="utf-8").read()
open(sys.argv[2], "w", encoding="utf-8").write(text[int(len(text) * 0.9):])
PY
SHAPE=(--vocab-size 4096 --set d_model=128 --set d_ff=512)
run v4096-d128 "${SHAPE[@]}"
run v4096-d128-nodrop "${SHAPE[@]}" --repeat-dropout 0
run v4096-d128-lr3e-3 "${SHAPE[@]}" --lr 3e-3
# without dropout the held-out loss rose from step 1,400 (above): is 0.1 enough?
run base-drop0.2 --repeat-dropout 0.2
# 6 layers fit fewer than 16 passes, so the rule would train them without dropout: set it outright
# (the attention weights' own kept at 0, as the rule keeps it, so the fused kernel runs)
run 6x192-drop0.2 --set n_layer=6 --set dropout=0.2 --set attention_dropout=0
