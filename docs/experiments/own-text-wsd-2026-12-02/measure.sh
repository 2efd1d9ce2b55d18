#!/bin/bash
# usage: measure.sh NAME ARGS...   (one run under the CPU lock, with jemalloc; log in runs/NAME.log)
name=$1; shift
cd /work/wt-51
log=runs/$name.log
{
  echo "# $(date -u +%FT%TZ) start; uptime: $(uptime)"
  echo "# command: python -m training.run $*"
  LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/bin/time -v nice python -m training.run "$@"
  echo "# $(date -u +%FT%TZ) end; uptime: $(uptime)"
} > $log 2>&1
