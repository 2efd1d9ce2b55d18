#!/bin/bash
# issue 62: how far apart two seeds of one command land (the noise the trials' differences stand
# against): the preset and its 4 x 128 variant again with --seed 2 and the same held-out tail
# (--split-seed 1337); trials.sh and own-text-shape-2026-12-04 used the default seed.
# usage: seeds.sh OUT_ROOT (after trials.sh)
set -u
export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
TEXT=../shared/data/tinyshakespeare/input.txt
OUT=$1
run() {  # NAME ARGS...
  local name=$1; shift
  echo "# $(date -u +%FT%TZ) $name: $*"
  flock /tmp/cpu.lock nice python -m training.run --task lm --preset laptop --data "$TEXT" --out "$OUT/$name" "$@" \
    > "$OUT/$name.log" 2>&1
  python -m training.evaluate --checkpoint "$OUT/$name" --data "$OUT/val.txt" 2>&1 | tail -1
}
run base-seed2 --seed 2 --split-seed 1337
run d128-seed2 --set d_model=128 --set d_ff=512 --seed 2 --split-seed 1337
