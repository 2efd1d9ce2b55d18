"""Short training rows labelled by a linear bag-of-words model: the cheap route to one-word input
(issue 64).

Why: the readers were trained on whole reviews, hundreds of tokens each, and never saw a row of one
word. They know "terrific" inside "It was terrific." and leave "terrific" alone just under one half.
Short rows cut from the training reviews themselves teach the short form, if their labels are right:
a review's label is a verdict on the whole text, and most of its sentences (plot summary) or words
("the") carry none of it. `training.evidence` picks the carriers by the classifier's own attribution,
hours of CPU a pass. Here a linear model does the picking: TF-IDF of words and word pairs with
logistic regression, fitted on the same training rows (`fit_linear`, the baseline the readers are
compared with), reads each sentence, word and short phrase alone, and a snippet is kept, with its
review's label, only where the linear model agrees with that label confidently. Two cheap signals
that agree (the review's label, and a model of the whole training split's word statistics) leave
less noise than either; adding word and n-gram rows to a student's training set lifted it on SST-2
in Tang et al. 2019 (Distilling Task-Specific Knowledge from BERT into Simple Neural Networks).

What a review gives (`review_snippets`):
- its sentences of at most `MAX_WORDS` words that the linear model gives the review's label with
  probability `SENTENCE_P` or more;
- within those, its words alone at `WORD_P` or more ("terrific") that also lean the label's way
  (`Leanings`), and its 2-3-word phrases at `PHRASE_P` or more that outweigh each of their words and
  hold a word leaning the label's way, or a negation before a word leaning the other way ("not
  bad"): a phrase is kept for what its words say together, not for one strong word it happens to
  contain. At most `PER_SENTENCE` of each per sentence, strongest first.

Why the leaning as well: the linear model reads a word alone as a text whose only feature is that word
at full weight (TF-IDF rows have unit length), so any word with a sizeable weight comes out near 0 or
1 alone. Measured on the 22,500 training rows: "it" 0.976 positive, "and" 0.966, "was" 0.030, "plot"
0.009, as sure as "terrific" (0.957); a first cache kept "It." as a positive row 2,984 times and "Was."
as a negative one 2,060 times. A word's leaning is the share of the training sentences that hold it
(short ones, with no negation in them) coming from reviews of each label: "it" 0.51, "and" 0.55,
"terrific" 0.82, "bad" 0.17. Function words (scikit-learn's English stop words) are never kept alone.
"good" leans 0.55 in IMDB (its praise is often faint: "good but..."), so it is not kept alone either;
"Very good." and whole sentences carry it.

Negation (`negations`): the linear model cannot read it ("not bad" alone: 0.013 positive, "not great"
0.977: a bag of words scores "bad" and "great"), so its phrases never pass. A short sentence's negated
word instead gives a phrase, from the negation to the word ("not bad", "wasn't that funny", with "at
all" when it follows), kept only where the review's label is the opposite of the word's leaning: the
review's label and the flip of the word agree. It is looked for in every short sentence of the review,
kept or not: a sentence with a negation is rarely one the linear model is sure of.
Each snippet is written as the app reads it (`tokenization.review_text`: "terrific" reads as
" terrific.", a space before it), so that training rows are the text the readers will see.

The cache has `training.evidence`'s layout (FORMAT 1: a header line, then one line per review with
its snippets), so `python -m training.run --task sentiment --evidence CACHE --evidence-prob P` trains
on it as on attribution evidence, and `training.evidence.load_evidence` keeps a word or phrase only
with the label most of its occurrences carry (`AGREEMENT`). Only training rows are read, never a
held-out review (`training.evidence.held_out_free_rows`); the linear model is fitted on those rows
alone. About a minute of CPU for all 22,500:

    python -m training.linear_evidence --data-dir ../shared/data/imdb --out runs/short/linear.jsonl
"""

import argparse
import json
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cli import Parser
from tokenization import BPETokenizer, clean_texts, review_text, sentences

from .data import label_column, load_splits, text_column
from .errors import one_line_errors
from .evidence import FORMAT, cache_line, held_out_free_rows
from .heldout import add_held_out_arguments

if TYPE_CHECKING:
    from sklearn.pipeline import Pipeline

METHOD = "tfidf_lr"
MAX_WORDS = 25  # a longer sentence is not short input
SENTENCE_P = 0.9  # the linear model's probability of the review's label, on the sentence alone
WORD_P = 0.8  # ... on the word alone
PHRASE_P = 0.8  # ... on the phrase alone
PER_SENTENCE = 2  # words, and phrases, kept per sentence at most
LEAN = 0.65  # ... and a word alone leans this far toward the label (`Leanings`)
MIN_SENTENCES = 20  # a word's leaning is counted over at least this many sentences, else it has none
WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]")  # a word of letters ("doesn't", "heart-felt")
NEGATION = re.compile(r"\b(?:not|no|never|nothing|nor|none|hardly|without)\b|n't", re.IGNORECASE)
NEGATORS = frozenset({"not", "never", "hardly"})  # ... and every word ending in n't ("isn't", "wasn't")
DEGREE = frozenset({"that", "so", "too", "very", "really", "quite", "all", "as", "even", "particularly", "overly"})


def fit_linear(texts: list[str], labels: list[int], C: float = 8.0) -> "Pipeline":
    """TF-IDF (uni+bigrams, min_df 2, sublinear tf) + logistic regression, fitted: the project's
    baseline classifier (benchmarks.sentiment_baseline) and this module's labeller. scikit-learn is
    imported here: the app, which imports `training`, does not install it (requirements-dev does)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    return make_pipeline(vectorizer, LogisticRegression(C=C, max_iter=2000)).fit(texts, labels)


def phrases(words: list[str]) -> list[tuple[int, int]]:
    """(first, last) word index of every 2-3-word span, shorter than the sentence itself."""
    n = len(words)
    return [(i, j) for i in range(n) for j in range(i + 1, min(i + 3, n)) if j - i + 1 < n]


@dataclass(frozen=True)
class Leanings:
    """How far each word leans toward the positive label in the training sentences (`count`), and the
    function words never kept alone."""

    positive: dict[str, float]  # word (casefolded) -> its leaning toward the positive label
    stop_words: frozenset[str]

    @classmethod
    def count(cls, texts: list[str], labels: list[int]) -> "Leanings":
        """Of the short sentences (at most `MAX_WORDS` words, no negation) that hold a word, the share from
        positive reviews, each label's sentences weighted by their total (module doc); a word in fewer than
        `MIN_SENTENCES` has none. The stop words are scikit-learn's English list (imported here, as in
        `fit_linear`)."""
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        counts = [Counter(), Counter()]
        for text, label in zip(texts, labels, strict=True):
            for s in sentences(text, min_words=1):
                if len(s.split()) <= MAX_WORDS and not NEGATION.search(s):
                    counts[label].update({w.casefold() for w in WORD.findall(s)})
        totals = [max(1, sum(c.values())) for c in counts]
        positive = {w: (counts[1][w] / totals[1]) / (counts[1][w] / totals[1] + counts[0][w] / totals[0])
                    for w in counts[0] | counts[1] if counts[0][w] + counts[1][w] >= MIN_SENTENCES}
        return cls(positive, frozenset(ENGLISH_STOP_WORDS))

    def toward(self, word: str, label: int) -> float:
        """How far `word` leans toward `label` (0.5: no leaning known)."""
        p = self.positive.get(word.casefold(), 0.5)
        return p if label == 1 else 1 - p

    def carries(self, word: str, label: int) -> bool:
        """Whether `word` alone says `label`: no function word, and leaning `LEAN` or more its way."""
        return word.casefold() not in self.stop_words and self.toward(word, label) >= LEAN


class Scorer:
    """The linear model's probability of each label for short texts, remembered: a word or phrase
    recurs across thousands of reviews and is scored once; with the words' `Leanings`."""

    def __init__(self, model: "Pipeline", leanings: Leanings):
        self.model, self.leanings, self.seen = model, leanings, {}

    def score(self, texts: list[str]) -> None:
        new = list(dict.fromkeys(t.casefold() for t in texts if t.casefold() not in self.seen))
        if new:
            self.seen.update(zip(new, self.model.predict_proba(new), strict=True))

    def p(self, text: str, label: int) -> float:
        return float(self.seen[text.casefold()][label])


def sentence_snippets(sentence: str, label: int, scorer: Scorer) -> list[tuple[str, str, float]]:
    """(text, kind, probability) of the words and phrases of one kept sentence (module doc);
    `scorer` already holds their scores."""
    words = WORD.findall(sentence)
    found = []
    word_p = [scorer.p(w, label) for w in words]
    ranked = sorted(((p, w) for p, w in zip(word_p, words, strict=True)
                     if p >= WORD_P and scorer.leanings.carries(w, label)), reverse=True)
    found += [(w, "word", p) for p, w in list(dict.fromkeys(ranked))[:PER_SENTENCE]]
    spans = []
    for i, j in phrases(words):
        p = scorer.p(" ".join(words[i : j + 1]), label)
        if p >= PHRASE_P and p >= max(word_p[i : j + 1]) and phrase_carries(words[i : j + 1], label, scorer.leanings):
            spans.append((p, i, j))
    taken: set[int] = set()
    for p, i, j in sorted(spans, key=lambda s: (-s[0], s[1], s[2])):  # strongest first, without overlap
        if len(taken) < 3 * PER_SENTENCE and taken.isdisjoint(range(i, j + 1)):
            taken.update(range(i, j + 1))
            found.append((" ".join(words[i : j + 1]), "phrase", p))
    return found


def phrase_carries(words: list[str], label: int, leanings: Leanings) -> bool:
    """Whether a phrase holds a word that says `label` alone, or a negation just before a word that says
    the other label ("not bad" for positive, "never funny" for negative)."""
    return any(leanings.carries(w, label) for w in words) or any(
        NEGATION.fullmatch(a) and leanings.carries(b, 1 - label) for a, b in zip(words, words[1:], strict=False))


def negated(word: str) -> bool:
    return word.casefold() in NEGATORS or word.casefold().endswith("n't")


def negations(sentence: str, label: int, leanings: Leanings) -> list[tuple[str, str, float]]:
    """(text, "phrase", leaning) of each negated word in `sentence` whose leaning says the other label, so
    that the negation says `label`: a negation, at most one word of degree (`DEGREE`: "that", "so", "too"),
    the word, and "at all" when it follows (module doc)."""
    words, found = WORD.findall(sentence), []
    for i, word in enumerate(words):
        if not negated(word):
            continue
        for j in (i + 1, i + 2):
            if j < len(words) and (j == i + 1 or words[i + 1].casefold() in DEGREE) \
                    and leanings.carries(words[j], 1 - label):
                end = j + 2 if [w.casefold() for w in words[j + 1 : j + 3]] == ["at", "all"] else j
                found.append((" ".join(words[i : end + 1]), "phrase", leanings.toward(words[j], 1 - label)))
                break
    return found[:PER_SENTENCE]


def review_snippets(text: str, label: int, scorer: Scorer) -> list[tuple[str, str, float]]:
    """(text, kind, probability) of one review's snippets that carry its `label` (module doc)."""
    short = [s for s in sentences(text, min_words=1) if len(s.split()) <= MAX_WORDS]
    scorer.score(short)
    kept = [s for s in short if scorer.p(s, label) >= SENTENCE_P]
    candidates = []
    for s in kept:
        words = WORD.findall(s)
        candidates += words + [" ".join(words[i : j + 1]) for i, j in phrases(words)]
    scorer.score(candidates)
    found = []
    for s in kept:
        found += [(s, "sentence", scorer.p(s, label)), *sentence_snippets(s, label, scorer)]
    for s in short:
        found += [n for n in negations(s, label, scorer.leanings) if n[0] not in {t for t, _, _ in found}]
    return found


def build_parser() -> Parser:
    p = Parser("python -m training.linear_evidence", __doc__)
    add_held_out_arguments(p)  # --data-dir, and --val-size/--seed: which rows are held out
    p.add_argument("--tokenizer", default="checkpoints/tokenizer.json",
                   help="the readers' tokenizer: snippets are written as the app reads them with it")
    p.add_argument("--out", default="runs/short/linear.jsonl", help="the cache to write (replaced)")
    return p


def build(args: argparse.Namespace) -> Path:
    """Fit the linear model on the training rows, then write every training review's snippets."""
    started = time.perf_counter()
    splits = load_splits(args.data_dir)
    rows = held_out_free_rows(splits, "train", args.val_size, args.seed)
    texts = clean_texts(text_column(splits["train"], "text", "train", rows))
    gold = label_column(splits["train"], "label", "train", ["negative", "positive"])
    labels = [gold[r] for r in rows]
    scorer = Scorer(fit_linear(texts, labels), Leanings.count(texts, labels))
    tokenizer = BPETokenizer.from_file(args.tokenizer)
    header = {"format": FORMAT, "method": METHOD, "split": "train", "data_dir": str(args.data_dir),
              "val_size": args.val_size, "seed": args.seed, "max_words": MAX_WORDS, "sentence_p": SENTENCE_P,
              "word_p": WORD_P, "phrase_p": PHRASE_P, "per_sentence": PER_SENTENCE, "lean": LEAN,
              "min_sentences": MIN_SENTENCES, "reviews": len(rows)}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial")
    counts = {"sentence": 0, "phrase": 0, "word": 0}
    with open(partial, "w", encoding="utf-8") as f:
        f.write(json.dumps(header) + "\n")
        for row, text, label in zip(rows, texts, labels, strict=True):
            snippets = review_snippets(text, label, scorer)
            for _, kind, _ in snippets:
                counts[kind] += 1
            f.write(cache_line(row, label, None, [(review_text(t, tokenizer), kind, p) for t, kind, p in snippets]))
    partial.replace(out)  # a killed build leaves no cache that looks whole
    print(f"{len(rows):,} reviews, {counts['sentence']:,} sentences, {counts['phrase']:,} phrases, "
          f"{counts['word']:,} words in {time.perf_counter() - started:.0f} s -> {out}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> Path:
    parser = build_parser()
    return one_line_errors(parser, build, parser.parse_args(argv))


if __name__ == "__main__":
    main()
