# sourced by trials.sh, seeds.sh and spread.sh: `run NAME FLAGS...` trains the README's own-text command with
# FLAGS into $OUT/NAME alone under the CPU lock, then scores it on $OUT/val.txt
export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
TEXT=../shared/data/tinyshakespeare/input.txt
run() {  # NAME ARGS...
  local name=$1; shift
  echo "# $(date -u +%FT%TZ) $name: $*"
  flock /tmp/cpu.lock nice python -m training.run --task lm --preset laptop --data "$TEXT" --out "$OUT/$name" "$@" \
    > "$OUT/$name.log" 2>&1
  python -m training.evaluate --checkpoint "$OUT/$name" --data "$OUT/val.txt" 2>&1 | tail -1
}
