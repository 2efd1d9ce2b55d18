#!/usr/bin/env bash
# The laptop sentiment preset (README, "Train your own in ten minutes") from each forward LM, the same
# seeds, one after the other on an otherwise idle machine: does the longer-pretrained LM make a better
# reader at small scale? The LM shipped before this session is taken out of git's history.
# Usage, from the repository root: bash docs/experiments/lm-continued-2026-11-29/laptop_ab.sh [SEED ...]
set -euo pipefail
old=runs/lm-4621d99
mkdir -p "$old"
for f in config.json model.safetensors tokenizer.json metrics.json; do
  git show "4621d99:checkpoints/lm/$f" > "$old/$f"
done
for seed in "${@:-1337}"; do
  for lm in checkpoints/lm "$old"; do
    name=laptop-sentiment-$(basename "$lm")-seed$seed
    python -m training.run --task sentiment --preset laptop --init-from "$lm" --data-dir ../shared/data/imdb \
      --seed "$seed" --split-seed 1337 --threads 2 --out "runs/$name" > "runs/logs/$name.log" 2>&1
    python -c "import json,sys; m=json.load(open(sys.argv[1])); print(sys.argv[2], m['val_accuracy'], m['train_time_s'])" \
      "runs/$name/metrics.json" "$name"
  done
done
