"""Issue 64, second session: does a one-line text read with its first word as it is read after a
space fix one-word input, before any training? Measured on the behaviour check and the selection
rows, for the shipped pair (or any pair given), under each reading.

    python docs/experiments/sentiment-short-input-2026-12-04/session2/reading_trial.py OUT_DIR [FWD BWD]

Readings (each applied where `tokenization.normalise.end_one_line` applies: a one-line text of one
sentence, not a question):
- `as_now`: "terrific" -> "Terrific." (the shipped reading);
- `lead_space`: " Terrific.": a space before the text;
- `lead_lower`: " terrific.": a space before, and the first word in lower case where that is no more
  tokens after a space ("I" kept).
"""

import re
import sys

import torch

import tokenization.normalise as normalise
from benchmarks import behaviour, ensemble
from tokenization import BPETokenizer
from tokenization.text import sentence_spans

torch.set_grad_enabled(False)
tokenizer = BPETokenizer.from_file("checkpoints/tokenizer.json")
count = lambda word: len(tokenizer.encode(" " + word))
as_now = normalise.end_one_line
FIRST = re.compile(r"[A-Za-z']+")


def one_line(text: str) -> bool:
    return bool(text.strip()) and "\n" not in text and len(sentence_spans(text, 1)) <= 1 and not text.endswith("?")


def lead_space(text: str) -> str:
    return " " + as_now(text) if one_line(text) else text


def lead_lower(text: str) -> str:
    if not one_line(text):
        return text
    read = as_now(text)
    m = FIRST.match(read)
    if m and m.group() != "I" and count(m.group().lower()) <= count(m.group()):
        read = m.group().lower() + read[m.end():]
    return " " + read


READINGS = {"as_now": as_now, "lead_space": lead_space, "lead_lower": lead_lower}

if __name__ == "__main__":
    out, pair = sys.argv[1], sys.argv[2:] or ["checkpoints/sentiment", "checkpoints/sentiment-backward"]
    for name, reading in READINGS.items():
        normalise.end_one_line = reading
        common = ["--checkpoint", pair[0], "--also", pair[1], "--data-dir", "../shared/data/imdb", "--threads", "2"]
        behaviour.main([*common, "--json", f"{out}/behaviour_{name}.json"])
        ensemble.main([*common, "--split", "selection", "--json", f"{out}/ensemble_selection_{name}.json"])
