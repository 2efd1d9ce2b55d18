"""What lowering shouted words at read time would do (a look, not shipped): every word of two or more
capital letters ("SUPERB", "DVD") lowered before the readers see it, on the selection rows (only the
rows it changes are scored) and on the behavioural check's capitals capabilities.

    PYTHONPATH=. python docs/experiments/sentiment-short-2026-11-27/capitals.py > docs/experiments/sentiment-short-2026-11-27/capitals.log
"""

import re

import numpy as np
import torch

from benchmarks.behaviour import bases
from benchmarks.common import read_classifier
from benchmarks.sentiment_baseline import imdb_split
from model import combine_readers
from training.heldout import short_texts

torch.set_num_threads(1)
torch.set_grad_enabled(False)
CAPS = re.compile(r"\b[A-Z]{2,}\b")


def calm(text: str) -> str:
    return CAPS.sub(lambda m: m.group().lower(), text)  # A-Z only: lengths and offsets unchanged


forward, _ = read_classifier("checkpoints/sentiment")
backward, _ = read_classifier("checkpoints/sentiment-backward")


def labels(texts: list[str]) -> dict[str, np.ndarray]:
    f, b = forward(texts), backward(texts)
    return {"forward": f.argmax(-1).numpy(), "backward": b.argmax(-1).numpy(),
            "pair": combine_readers([f, b]).argmax(-1).numpy()}


_, _, texts, truth = imdb_split("../shared/data/imdb", 2500, 1337, "selection")
short = short_texts(texts, truth)
checks = {"full reviews": (texts, np.array(truth)), "short text": ([r.text for r in short], np.array([r.label for r in short]))}
for name, (rows, y) in checks.items():
    changed = [i for i, t in enumerate(rows) if calm(t) != t]
    before, after = labels([rows[i] for i in changed]), labels([calm(rows[i]) for i in changed])
    print(f"{name}: {len(changed)} of {len(rows)} rows have a word in capitals; right on them, as read / lowered:")
    for reader in before:
        print(f"  {reader:9} {(before[reader] == y[changed]).sum():4d} / {(after[reader] == y[changed]).sum():4d}")

cases = [t.format(**f) for t, f in bases()]
word = [t.format(**{**f, "adj": f["adj"].upper()}) for t, f in bases()]
whole = [c.upper() for c in cases]
base = labels(cases)["pair"]
for name, edited in (("sentiment word in capitals", word), ("whole text in capitals", whole)):
    as_read, lowered = labels(edited)["pair"], labels([calm(t) for t in edited])["pair"]
    print(f"{name}: the pair's label flips in {(as_read != base).mean():.1%} of {len(cases)} cases as read, "
          f"{(lowered != base).mean():.1%} lowered")
