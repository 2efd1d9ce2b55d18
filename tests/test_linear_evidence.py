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
from training.linear_evidence import Leanings, Scorer, negations, phrases, review_snippets

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


# how far each word leans toward positive in the training sentences (`Leanings.count`); "the", "was", "it",
# "not" are function words, never kept alone
LEANINGS = Leanings({"terrific": 0.82, "cast": 0.52, "plot": 0.4, "bad": 0.17, "dull": 0.15, "really": 0.6,
                     "acting": 0.45, "it": 0.51}, frozenset({"the", "was", "it", "not", "and"}))


def test_phrases_are_two_or_three_words_and_shorter_than_the_sentence():
    assert phrases(["a", "b"]) == []  # the sentence itself is kept as a sentence, not as a phrase
    assert phrases(["a", "b", "c"]) == [(0, 1), (1, 2)]
    assert phrases(["a", "b", "c", "d"]) == [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3)]


def test_a_review_gives_its_agreeing_sentences_their_strong_words_and_the_phrases_that_outweigh_their_words():
    lexicon = Lexicon({"terrific": 0.97, "cast": 0.55, "plot": 0.5, "bad": 0.05, "dull": 0.04, "not": 0.3},
                      {"the cast was terrific": 0.95, "not bad": 0.9, "was not bad": 0.85})
    text = "The cast was terrific. The plot was dull. It was not bad."
    found = review_snippets(text, 1, Scorer(lexicon, LEANINGS))
    assert ("The cast was terrific.", "sentence") in [(t, k) for t, k, _ in found]
    assert not any("dull" in t for t, _, _ in found)  # a sentence against the label is never kept
    assert ("terrific", "word") in [(t, k) for t, k, _ in found]
    assert ("cast", "word") not in [(t, k) for t, k, _ in found]  # 0.55: carries too little
    # "It was not bad." as a whole scores mean(not, bad) = 0.175 for positive: not kept as a sentence; its
    # negation ("bad" leans 0.17, the review is positive) is kept as a phrase
    assert [(t, k) for t, k, _ in found if "bad" in t] == [("not bad", "phrase")]
    kept = review_snippets("Not bad, not bad.", 1, Scorer(Lexicon({"not": 0.3, "bad": 0.05}, {"not bad, not bad": 0.95,
                                                                                            "not bad": 0.9}), LEANINGS))
    assert ("not bad", "phrase") in [(t.casefold(), k) for t, k, _ in kept]  # outweighs both its words, negates "bad"
    assert all(p >= linear_evidence.WORD_P for _, k, p in kept if k != "sentence")


def test_a_phrase_that_is_one_strong_word_with_filler_is_not_kept():
    scorer = Scorer(Lexicon({"terrific": 0.97, "really": 0.75, "acting": 0.5},
                            {"the acting was really terrific": 0.95}), LEANINGS)
    found = review_snippets("The acting was really terrific.", 1, scorer)
    assert ("The acting was really terrific.", "sentence") in [(t, k) for t, k, _ in found]
    assert [k for _, k, _ in found].count("phrase") == 0  # "really terrific" 0.86: above PHRASE_P, below "terrific"
    assert ("terrific", "word") in [(t, k) for t, k, _ in found]


def test_a_word_the_linear_model_is_sure_of_alone_is_kept_only_where_it_leans_the_labels_way():
    # alone, any word with a sizeable weight comes out near 0 or 1 (a unit-length row of one feature):
    # "it" and "plot" as sure as "terrific"
    lexicon = Lexicon({"it": 0.97, "plot": 0.03, "terrific": 0.96, "cast": 0.9},
                      {"it has a terrific cast and plot": 0.95})
    found = review_snippets("It has a terrific cast and plot.", 1, Scorer(lexicon, LEANINGS))
    assert [t for t, k, _ in found if k == "word"] == ["terrific"]  # "it": a function word; "cast" leans 0.52


def test_leanings_count_short_sentences_without_negation_each_label_by_its_total():
    texts = ["Terrific fun. Plot holes.", "Dull plot. Not terrific at all.", "Terrific. Fun."]
    found = Leanings.count(texts * 10, [1, 0, 1] * 10)  # 20 sentences each label hold a word at least ...
    # positive sentences: {terrific, fun}, {plot, holes}, {terrific}, {fun}: 6 words; negative: {dull, plot}: 2
    assert found.positive["plot"] == pytest.approx((10 / 60) / (10 / 60 + 10 / 20))
    assert found.positive["terrific"] == 1.0  # "Not terrific at all." holds a negation: not counted
    assert "holes" not in found.positive and "dull" not in found.positive  # in 10 sentences: fewer than 20
    assert found.toward("plot", 0) == pytest.approx(0.75) and found.toward("unseen", 1) == 0.5
    assert "the" in found.stop_words and not found.carries("the", 1) and found.carries("Terrific", 1)


def test_a_negated_word_gives_a_phrase_only_where_the_reviews_label_is_its_flip():
    leanings = Leanings({"bad": 0.17, "boring": 0.13, "funny": 0.7, "great": 0.74, "film": 0.5}, frozenset({"the"}))
    assert negations("It was not bad at all.", 1, leanings) == [("not bad at all", "phrase", 0.83)]
    assert negations("It wasn't that funny.", 0, leanings) == [("wasn't that funny", "phrase", 0.7)]
    assert negations("Not bad.", 0, leanings) == []  # a negative review: the flip and its label disagree
    assert negations("Not the great film.", 0, leanings) == []  # "the" is no word of degree
    assert negations("Not a film.", 1, leanings) == []  # "film" leans neither way
    # found in any short sentence, also one the linear model is unsure of
    lexicon = Lexicon({"not": 0.3, "bad": 0.05, "acting": 0.5})
    found = review_snippets("The acting was not bad at all.", 1, Scorer(lexicon, LEANINGS))
    assert found == [("not bad at all", "phrase", pytest.approx(0.83))]


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
    assert by_text.get(" superb.") == 1 and by_text.get(" awful.") == 0  # written as the app reads a word
    assert not out.with_suffix(".partial").exists()
    with pytest.raises(UsageError):  # a run that holds out other rows cannot read it
        load_evidence([str(out)], VAL_SIZE + 1, SEED)
