"""The cheap short rows (training.linear_evidence): which snippets a linear model keeps, that no held-out
review is read, and that training reads the cache as it reads attribution evidence."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from training import linear_evidence
from training.data import validation_split
from training.errors import UsageError
from training.evidence import load_evidence
from training.linear_evidence import Scorer, phrases, review_snippets

pytest.importorskip("sklearn")

ROWS, VAL_SIZE, SEED = 120, 10, 3
TOKENIZER = "checkpoints/tokenizer.json"


class Lexicon:
    """A stand-in for the fitted pipeline: P(positive) of a text is the mean of its known words' scores
    (0.5 for unknown ones), with the phrases given as whole texts scored as they are."""

    def __init__(self, words: dict[str, float], whole: dict[str, float] | None = None):
        self.words, self.whole = words, whole or {}

    def predict_proba(self, texts):
        out = []
        for t in texts:
            key = t.casefold().strip(".!? ")
            if key in self.whole:
                p = self.whole[key]
            else:
                known = [self.words[w] for w in key.replace(",", " ").split() if w in self.words]
                p = float(np.mean(known)) if known else 0.5
            out.append([1 - p, p])
        return np.array(out)


def test_phrases_are_two_or_three_words_and_shorter_than_the_sentence():
    assert phrases(["a", "b"]) == []  # the sentence itself is kept as a sentence, not as a phrase
    assert phrases(["a", "b", "c"]) == [(0, 1), (1, 2)]
    assert phrases(["a", "b", "c", "d"]) == [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3)]


def test_a_review_gives_its_agreeing_sentences_their_strong_words_and_the_phrases_that_outweigh_their_words():
    lexicon = Lexicon({"terrific": 0.97, "cast": 0.55, "plot": 0.5, "bad": 0.05, "dull": 0.04, "not": 0.3},
                      {"the cast was terrific": 0.95, "not bad": 0.9, "was not bad": 0.85})
    text = "The cast was terrific. The plot was dull. It was not bad."
    found = review_snippets(text, 1, Scorer(lexicon))
    assert ("The cast was terrific.", "sentence") in [(t, k) for t, k, _ in found]
    assert not any("dull" in t for t, _, _ in found)  # a sentence against the label is never kept
    assert ("terrific", "word") in [(t, k) for t, k, _ in found]
    assert ("cast", "word") not in [(t, k) for t, k, _ in found]  # 0.55: carries too little
    # "It was not bad." as a whole scores mean(not, bad) = 0.175 for positive: not kept, so neither is "not bad"
    assert not any("bad" in t for t, _, _ in found)
    kept = review_snippets("Not bad, not bad.", 1, Scorer(Lexicon({"not": 0.3, "bad": 0.05}, {"not bad, not bad": 0.95,
                                                                                            "not bad": 0.9})))
    assert ("not bad", "phrase") in [(t.casefold(), k) for t, k, _ in kept]  # outweighs both its words
    assert all(p >= linear_evidence.WORD_P for _, k, p in kept if k != "sentence")


def test_a_phrase_that_is_one_strong_word_with_filler_is_not_kept():
    scorer = Scorer(Lexicon({"terrific": 0.97, "really": 0.75, "acting": 0.5},
                            {"the acting was really terrific": 0.95}))
    found = review_snippets("The acting was really terrific.", 1, scorer)
    assert ("The acting was really terrific.", "sentence") in [(t, k) for t, k, _ in found]
    assert [k for _, k, _ in found].count("phrase") == 0  # "really terrific" 0.86: above PHRASE_P, below "terrific"
    assert ("terrific", "word") in [(t, k) for t, k, _ in found]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """120 training reviews, 10 of them held out (seed 3), each of its label's words: enough rows that the
    linear model gives a word alone the confidence a kept word needs (at 40 it gives "terrific" 0.78)."""
    folder = tmp_path_factory.mktemp("imdb")
    good = "A terrific film. The acting was superb and moving. I loved it."
    bad = "A dreadful film. The acting was awful and dull. I hated it."
    labels = [i % 2 for i in range(ROWS)]
    texts = [f"Review {i}. " + (good if y else bad) for i, y in enumerate(labels)]
    _, held_out = validation_split(ROWS, VAL_SIZE, SEED)
    for i in held_out:
        texts[i] = f"HELDOUT {i}. A forgettable film."
    pd.DataFrame({"text": texts, "label": labels}).to_parquet(folder / "train.parquet")
    return folder


def test_the_cache_reads_no_held_out_review_and_trains_as_evidence_does(data_dir, tmp_path):
    out = tmp_path / "linear.jsonl"
    linear_evidence.main(["--data-dir", str(data_dir), "--val-size", str(VAL_SIZE), "--seed", str(SEED),
                          "--tokenizer", TOKENIZER, "--out", str(out)])
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    header, reviews = lines[0], lines[1:]
    train_rows, held_out = validation_split(ROWS, VAL_SIZE, SEED)
    assert (header["format"], header["method"], header["val_size"], header["seed"]) == (1, "tfidf_lr", 10, 3)
    assert sorted(r["review"] for r in reviews) == sorted(train_rows.tolist())
    assert not any("HELDOUT" in s["text"] or "forgettable" in s["text"].casefold()
                   for r in reviews for s in r["snippets"])
    texts, labels, counts = load_evidence([str(out)], VAL_SIZE, SEED)
    assert counts["word"] > 0 and counts["sentence"] > 0
    by_text = dict(zip(texts, labels, strict=True))
    assert by_text.get("Superb.") == 1 and by_text.get("Awful.") == 0  # written as the app reads a word
    assert not out.with_suffix(".partial").exists()
    with pytest.raises(UsageError):  # a run that holds out other rows cannot read it
        load_evidence([str(out)], VAL_SIZE + 1, SEED)
