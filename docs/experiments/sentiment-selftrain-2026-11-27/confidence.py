"""How right the shipped pair is by how sure it is, on the selection rows' full reviews: where
`--pseudo-confidence`'s default comes from. Reads the per-row P(positive) of a `benchmarks.ensemble
--rows` run that scored both shipped readers (its rows are the data's: such a file is not committed):

    python -m benchmarks.ensemble --checkpoint checkpoints/sentiment --also checkpoints/sentiment-backward \
        --data-dir ../shared/data/imdb --split selection --rows --json runs/pair_rows.json
    PYTHONPATH=. python docs/experiments/sentiment-selftrain-2026-11-27/confidence.py runs/pair_rows.json
"""

import json
import sys

import numpy as np
import torch

from model import combine_readers, read_config

rows = json.load(open(sys.argv[1]))
readers = ["checkpoints/sentiment", "checkpoints/sentiment-backward"]
temperature = read_config(readers[-1])["pair_temperature"]
labels = np.array(rows["labels"]["full_reviews"])
log_probs = []
for reader in readers:
    p = torch.tensor(rows["p_positive"][reader]["full_reviews"], dtype=torch.float64).clamp(1e-7, 1 - 1e-7)
    log_probs.append(torch.stack([(1 - p).log(), p.log()], -1))
verdict = combine_readers(log_probs, temperature).exp().numpy()
sure, label = verdict.max(1), verdict.argmax(1)
table = {f"{c:.2f}": {"share_of_reviews": round(float((sure >= c).mean()), 4),
                      "accuracy": round(float((label[sure >= c] == labels[sure >= c]).mean()), 4)}
         for c in (0.5, 0.8, 0.9, 0.95, 0.98)}
print(json.dumps({"rows_from": rows["command"], "pair_temperature": temperature, "by_confidence": table}, indent=1))
