"""Is there a read-time knob that lifts the shipped pair on short text? Its decision threshold, the
weight of each reader in the pair, and where on first sentences it loses to TF-IDF + LR (by length).
Selection rows only. Reads the per-row P(positive) of a `benchmarks.ensemble --rows` run that scored
both shipped readers (its rows are the data's: such a file is not committed), and fits TF-IDF + LR on
the same training rows (`benchmarks.sentiment_baseline`, about a minute):

    python -m benchmarks.ensemble --checkpoint checkpoints/sentiment --also checkpoints/sentiment-backward \
        --data-dir ../shared/data/imdb --split selection --rows --json runs/pair_rows.json
    PYTHONPATH=. python docs/experiments/sentiment-selftrain-2026-11-27/read_time.py runs/pair_rows.json
"""

import json
import sys
from pathlib import Path

import numpy as np

from benchmarks.sentiment_baseline import fit_baseline, imdb_split
from training.heldout import short_texts

rows = json.loads(Path(sys.argv[1]).read_text())
forward, backward = (rows["p_positive"][c] for c in ("checkpoints/sentiment", "checkpoints/sentiment-backward"))
train_texts, train_labels, texts, labels = imdb_split(rows["data_dir"], rows["held_out"]["val_size"],
                                                      rows["held_out"]["seed"], "selection")
short = short_texts(texts, labels)
baseline = fit_baseline(train_texts, train_labels)


def logit(p: list[float]) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-7, 1 - 1e-7)
    return np.log(p) - np.log1p(-p)


print("accuracy (%) of w * forward + (1 - w) * backward log-odds > threshold; the shipped pair: w 0.5, threshold 0")
for check in ("full_reviews", "short_text"):
    y = np.asarray(rows["labels"][check])
    a, b = logit(forward[check]), logit(backward[check])
    by_threshold = "  ".join(f"{t:+.1f}: {100 * ((0.5 * a + 0.5 * b > t) == y).mean():.2f}"
                             for t in np.linspace(-0.6, 0.6, 7))
    by_weight = "  ".join(f"{w:.1f}: {100 * ((w * a + (1 - w) * b > 0) == y).mean():.2f}"
                          for w in np.linspace(0.2, 0.8, 7))
    print(f"{check}\n  threshold  {by_threshold}\n  weight     {by_weight}")

y = np.asarray(rows["labels"]["short_text"])
pair_right = ((logit(forward["short_text"]) + logit(backward["short_text"]) > 0) == y)
tfidf_right = (baseline.predict_proba([r.text for r in short])[:, 1] > 0.5) == y
first = np.array([r.position == "first" for r in short])
words = np.array([len(r.text.split()) for r in short])
print("\nfirst sentences by length in words: rows, the pair's accuracy, TF-IDF + LR's (%)")
for low, high in ((0, 8), (8, 15), (15, 25), (25, 40), (40, 10**6)):
    m = first & (words >= low) & (words < high)
    pair, tfidf = 100 * pair_right[m].mean(), 100 * tfidf_right[m].mean()
    print(f"  {low:>2}-{min(high, 999) - 1:<3} {m.sum():>4}  {pair:5.1f}  {tfidf:5.1f}")
print(f"  all    {first.sum():>4}  {100 * pair_right[first].mean():5.1f}  {100 * tfidf_right[first].mean():5.1f}")
print(f"first sentences the pair gets wrong and TF-IDF right: {(first & ~pair_right & tfidf_right).sum()}, "
      f"the other way: {(first & pair_right & ~tfidf_right).sum()}")
