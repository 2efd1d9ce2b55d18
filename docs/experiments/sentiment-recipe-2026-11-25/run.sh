#!/usr/bin/env bash
# The remaining variants, run from the stable worktree /work/exp (its runs/ is /work/main/runs).
set -u
cd /work/exp
while pgrep -f "training.run.*variants/flags" >/dev/null; do sleep 20; done
common="--task sentiment --preset base --data-dir ../shared/data/imdb --precision auto --seed 1337 --init-from checkpoints/lm
 --set max_src_len=256 --set src_keep_tail=0 --max-tokens 4096 --warmup-steps 30 --max-steps 300 --eval-every 75
 --eval-batches 32 --set causal_encoder=1 --crop-prob 0.3 --label-smoothing 0.1 --average-last 2"
short() { python -m training.evaluate --checkpoint runs/variants/$1 --data-dir ../shared/data/imdb --split selection --short-text \
    > runs/variants/$1.short.json 2>runs/variants/$1.short.log; }
run() { name=$1; shift
  if [ ! -f runs/variants/$name/metrics.json ]; then
    echo "== $name $(date +%T)"
    OMP_NUM_THREADS=2 nice -n 5 python -m training.run $common --out runs/variants/$name --overwrite "$@" \
      > runs/variants/$name.log 2>&1
  fi
  [ -s runs/variants/$name.short.json ] || short $name
}
run flags --lr 3e-4 --lm-weight 0.2 --layer-decay 0.8
run ulmfit --lr 1e-3 --lm-weight 0.2 --layer-decay 0.385 --schedule stlr --unfreeze-every 25
run ulmfit-pool --lr 1e-3 --lm-weight 0.2 --layer-decay 0.385 --schedule stlr --unfreeze-every 25 --set pool_memory=1
run ulmfit-nolm --lr 1e-3 --layer-decay 0.385 --schedule stlr --unfreeze-every 25
echo "== done $(date +%T)"
