#!/bin/bash
# issue 62: the README's own-text command with another vocabulary or model shape, each alone on the
# machine under the CPU lock, 9 minutes as the preset gives. usage: trials.sh OUT_ROOT
set -u
export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
TEXT=../shared/data/tinyshakespeare/input.txt
run() {  # NAME ARGS...
  local name=$1; shift
  echo "# $(date -u +%FT%TZ) $name: $*"
  flock /tmp/cpu.lock nice python -m training.run --task lm --preset laptop --data "$TEXT" --out "$1/$name" "${@:2}" \
    > "$1/$name.log" 2>&1
  python -m training.evaluate --checkpoint "$1/$name" --data "$1/val.txt" 2>&1 | tail -2
}
OUT=$1; mkdir -p "$OUT"
python - "$TEXT" "$OUT/val.txt" <<'PY'   # nanoGPT's val.txt: the last 10% of the characters
import sys
text = open(sys.argv[1], encoding="utf-8").read()
open(sys.argv[2], "w", encoding="utf-8").write(text[int(len(text) * 0.9):])
PY
run vocab4096 "$OUT" --vocab-size 4096
run d128 "$OUT" --set d_model=128 --set d_ff=512
