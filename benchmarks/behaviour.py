"""A behavioural check of the sentiment classifier, in the spirit of CheckList (Ribeiro et al., ACL
2020): accuracy on held-out reviews hides what visitors see when they type a few words into the
Sentiment tab ("great" read as negative, "not bad" as a complaint, a typo flipping the label).

    python -m benchmarks.behaviour --checkpoint checkpoints/sentiment --also checkpoints/sentiment-backward \\
        --data-dir ../shared/data/imdb

scores the checkpoint (with `--also`, the mean of its readers' P(positive), as the app's verdict)
and TF-IDF + logistic regression (`benchmarks.sentiment_baseline`, fitted on the same 22,500
training reviews) on the same cases, and writes benchmarks/results/behaviour.json, whose failure
rates the app's "before you trust this label" note on short text quotes.

Every capability is a few templates filled from word lists written for this check (movie reviews,
not CheckList's published templates or lexicons: a check kept aside uses those and must stay a fair
test; neither is training data). Three kinds of test:

- MFT (minimum functionality): each case has an expected label; failure = the other label.
  Negated praise ("This film is not brilliant.") is expected negative. Negated complaints ("The
  acting was not bad at all.") are expected positive: a two-label classifier has no neutral, and
  the label "not bad" must not get is negative. A change of mind ("I used to love it, now I hate
  it.") and a contrast ("The script was dull, but the film is superb.") expect the later opinion.
- INV (invariance): a base review and an edit that must not change its label (a typo in a word
  that carries no sentiment or in the one that does, the sentiment word or the whole text in
  capitals, as visitors shout, every word capitalised or none, an added link or @mention, another
  title or actor); failure = the two labels differ, whether or not the base's label was right.
- DIR (directional): a clear complaint appended must not raise P(positive), clear praise must not
  lower it; failure = it moves the wrong way by more than `TOLERANCE`.

A label is "positive" where P(positive) > 0.5. The classifier reads each text as the app does
(`classifier.Classifier`: the text as `tokenization.review_text` reads it, normalised as reviews are
written, the label words scored, probabilities at the readers' and the pair's temperatures), in
float32: the failures are the checkpoint's, not a precision's (bf16 gave the same label on all 2,500
held-out reviews, `benchmarks/precision_agreement.py`).
"""

import argparse
import random
import re
import string
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import product
from string import Formatter

from benchmarks.common import add_also, add_checkpoint, benchmark_parser, parse, read_classifier, write_json
from benchmarks.sentiment_baseline import imdb_split
from tokenization import clean_texts
from training.heldout import add_held_out_arguments
from training.linear_evidence import fit_linear

POSITIVE, NEGATIVE = 1, 0  # IMDB's labels
TOLERANCE = 0.05  # a DIR move smaller than this is not counted: saturated probabilities wobble
EXAMPLES = 3  # failures kept per capability and model, to read what went wrong

# The word lists: adjectives a review uses for the whole film or a part of it, and verbs of liking.
PRAISE = ("superb", "wonderful", "brilliant", "gripping", "moving", "masterful", "delightful", "hilarious",
          "riveting", "charming", "stunning", "heartfelt", "great", "excellent", "beautiful", "outstanding",
          "touching", "enjoyable", "terrific", "magnificent")
COMPLAINT = ("dull", "tedious", "awful", "dreadful", "boring", "clumsy", "forgettable", "pointless", "terrible",
             "lifeless", "bland", "painful", "horrible", "laughable", "mediocre", "unwatchable", "bad",
             "predictable", "messy", "disappointing")
# the words a visitor types first into the Sentiment tab, as one-word verdicts (issue 64); a list apart
# from PRAISE and COMPLAINT so that the templates above keep their counts
EVERYDAY = {POSITIVE: ("good", "great", "amazing", "awesome", "fantastic", "fun", "perfect", "lovely", "excellent",
                       "incredible", "funny", "beautiful", "wonderful", "brilliant", "enjoyable", "terrific"),
            NEGATIVE: ("bad", "poor", "awful", "terrible", "boring", "dull", "stupid", "horrible", "weak",
                       "pathetic", "lame", "disappointing", "annoying", "pointless", "ridiculous", "mediocre")}
ONE_WORD = ("{adj}", "{Adj}.", "It was {adj}.")  # a word alone, written as a sentence, and in the plainest frame
LIKING = ("love", "enjoy", "like", "admire")
DISLIKING = ("hate", "dislike", "loathe", "despise")
FEW = 5  # adjectives per side in the two-opinion templates, whose cases grow as the square
ASPECTS = ("acting", "script", "ending")
FILMS = ("film", "thriller", "comedy")
TITLES = ("The Glass Orchard", "Midnight on Route 9")  # invented, so no review in training mentions them
ACTORS = ("Maya Okafor", "Daniel Reyes")
RENAMED = {"The Glass Orchard": "Harbor of Ashes", "Midnight on Route 9": "A Quiet Year in Lisbon",  # each name's
           "Maya Okafor": "Ingrid Halvorsen", "Daniel Reyes": "Kenji Watanabe"}  # stand-in: one edit per base
LINKS = ("https://www.example.com/reviews/8812", "www.moviechat.net/t/20931", "http://bit.ly/3xQz9")
MENTIONS = ("@filmfan88", "@cinema_nerd", "@reelreviews")
EMOJI = {POSITIVE: ("😍", "👍", "🍿"), NEGATIVE: ("😡", "👎", "🍿")}  # the base's own side, or neutral popcorn
ADDED_COMPLAINTS = ("I want those two hours of my life back.", "Avoid it.", "I would not recommend it to anyone.",
                    "I walked out before the end.")
ADDED_PRAISE = ("I would happily watch it again.", "Go and see it.", "I recommend it to everyone.",
                "It stayed with me for days.")


def past(verbs: Iterable[str]) -> tuple[str, ...]:
    return tuple(v + ("d" if v.endswith("e") else "ed") for v in verbs)


def opinion(label: int, few: bool = False) -> dict[str, tuple[str, ...]]:
    """The slots of one side: `adj`, `Adj` (capitalised), `verb`, `verbed`."""
    adjectives, verbs = (PRAISE, LIKING) if label == POSITIVE else (COMPLAINT, DISLIKING)
    adjectives = adjectives[:FEW] if few else adjectives
    return {"adj": adjectives, "Adj": tuple(a.capitalize() for a in adjectives), "verb": verbs, "verbed": past(verbs)}


SHARED = {"aspect": ASPECTS, "film": FILMS, "title": TITLES, "actor": ACTORS, "target": ("it", "this film")}


def fillings(template: str, slots: dict[str, Sequence[str]]) -> list[dict[str, str]]:
    """Every way to fill the template's slots from the lists: their product, in list order."""
    names = list(dict.fromkeys(field for _, field, _, _ in Formatter().parse(template) if field))
    return [dict(zip(names, values, strict=True)) for values in product(*(slots[n] for n in names))]


@dataclass(frozen=True)
class Case:
    text: str
    expected: int | None = None  # MFT: the label it must get
    base: str | None = None  # INV and DIR: the text before the edit
    form: str | None = None  # the template it was written from, where a capability is reported by form


@dataclass(frozen=True)
class Capability:
    name: str
    kind: str  # "MFT", "INV" or "DIR"
    about: str  # what the cases are, in plain words (the app's note: "on {about}, {fails} ...")
    fails: str  # what a failure is, in plain words
    cases: tuple[Case, ...]
    direction: int = 0  # DIR: +1 P(positive) must not fall, -1 it must not rise


def expected_cases(templates: Sequence[str], expected: int, slots: dict[str, Sequence[str]],
                   by_form: bool = False) -> list[Case]:
    """Each template filled every way, expected `expected`; `by_form`: each case keeps its template."""
    return [Case(t.format(**f), expected, form=t if by_form else None)
            for t in templates for f in fillings(t, {**SHARED, **slots})]


def one_side(templates: Sequence[str], by_form: bool = False) -> list[Case]:
    """Each template filled with praise, then with complaints; expected that side's label."""
    return [case for label in (POSITIVE, NEGATIVE)
            for case in expected_cases(templates, label, opinion(label), by_form)]


def two_sides(templates: Sequence[str]) -> list[Case]:
    """Templates with a first opinion (`a_` slots) and a later one (`b_` slots) of the other side:
    expected the later one's label."""
    cases = []
    for first, later in ((POSITIVE, NEGATIVE), (NEGATIVE, POSITIVE)):
        slots = {**{f"a_{k}": v for k, v in opinion(first, few=True).items()},
                 **{f"b_{k}": v for k, v in opinion(later, few=True).items()}}
        cases += expected_cases(templates, later, slots)
    return cases


BASE_TEMPLATES = ("I watched {title} last night and the {aspect} was {adj}.",
                  "With {actor} in the lead, {title} is {adj}.")


# One-line texts, as a visitor types or pastes them: the edits a tweet-trained classifier meets
ONE_LINE_TEMPLATES = ("The {aspect} was {adj}.", "This {film} is so {adj}.", "{Adj} {film}.")


def bases(templates: Sequence[str] = BASE_TEMPLATES) -> list[tuple[str, dict[str, str]]]:
    """The texts the INV and DIR edits start from: (template, filling), praise then complaints (the
    filling's `label` says which side)."""
    return [(t, {**f, "label": label}) for label in (POSITIVE, NEGATIVE) for t in templates
            for f in fillings(t, {**SHARED, **opinion(label)})]


def swap_letters(word: str, rng: random.Random) -> str:
    """A typo: two adjacent, different letters swapped, the first letter kept where the word has
    four letters or more ("great" -> "graet", "gerat"), as a reader still recognises it."""
    start = 1 if len(word) >= 4 else 0
    at = rng.choice([i for i in range(start, len(word) - 1) if word[i] != word[i + 1]])
    return word[:at] + word[at + 1] + word[at] + word[at + 2:]


def typo_elsewhere(text: str, sentiment_word: str) -> str:
    """A typo in one word of four letters or more that is not the sentiment word (chosen by a
    generator seeded with the text, so every run makes the same edit)."""
    rng = random.Random(text)
    words = [m for m in re.finditer(r"[A-Za-z]{4,}", text) if m.group() != sentiment_word]
    m = rng.choice(words)
    return text[: m.start()] + swap_letters(m.group(), rng) + text[m.end():]


def invariance(name: str, about: str, edit: Callable[[int, str, dict[str, str]], str],
               templates: Sequence[str] = BASE_TEMPLATES) -> Capability:
    """Every base with `edit(index, template, filling)` -> the edited text."""
    cases = [Case(edit(i, t, f), base=t.format(**f)) for i, (t, f) in enumerate(bases(templates))]
    return Capability(name, "INV", about, "its label flips", tuple(cases))


def directional(name: str, about: str, added: Sequence[str], direction: int) -> Capability:
    cases = []
    for i, (t, f) in enumerate(bases()):
        base = t.format(**f)
        cases.append(Case(f"{base} {added[i % len(added)]}", base=base))
    fails = f"its P(positive) {'falls' if direction > 0 else 'rises'}"
    return Capability(name, "DIR", about, fails, tuple(cases), direction)


def mft(name: str, about: str, cases: list[Case]) -> Capability:
    return Capability(name, "MFT", about, "it is wrong", tuple(cases))


NEGATIONS = ("This {film} is not {adj}.", "The {aspect} was not {adj} at all.", "I would not call it {adj}.",
             "I did not {verb} this {film}.")


def negations(label: int) -> list[Case]:
    """One side's words negated: expected the other label."""
    return expected_cases(NEGATIONS, 1 - label, opinion(label))


def link_or_mention(i: int, template: str, filling: dict[str, str]) -> str:
    text = template.format(**filling)
    return f"{text} {LINKS[i // 2 % len(LINKS)]}" if i % 2 == 0 else f"{MENTIONS[i // 2 % len(MENTIONS)]} {text}"


def stretched(word: str) -> str:
    """A word as typed with feeling: its first vowel after the first letter written three times
    ("great" -> "greeeat", "dull" -> "duuull")."""
    at = next((i for i in range(1, len(word)) if word[i] in "aeiou"), len(word) - 1)
    return word[:at] + word[at] * 3 + word[at + 1:]


def punctuated(i: int, text: str) -> str:
    """The final full stop of a one-line text turned into "!!!" or "...", or dropped, in turn."""
    return text[:-1] + ("!!!", "...", "")[i % 3]


def capabilities() -> list[Capability]:
    """The check, in the order it is reported."""
    return [
        mft("single_words", 'a single word, like "great" or "dull"', one_side(ONE_WORD, by_form=True)),
        mft("everyday_words", 'the words visitors type first, like "good" or "boring"',
            [Case(t.format(adj=w, Adj=w.capitalize()), label, form=t) for label, words in EVERYDAY.items()
             for w in words for t in ONE_WORD]),
        mft("short_negation", 'a negated word alone, like "not bad" or "Not great."',
            [Case(t.format(adj=w), 1 - label) for label, words in EVERYDAY.items() for w in words
             for t in ("not {adj}", "Not {adj} at all.")]),
        mft("short_phrases", 'short verdicts, like "The acting was superb."',
            one_side(("The {aspect} was {adj}.", "This {film} is {adj}.", "I {verbed} this {film}."))),
        mft("negated_praise", 'negated praise, like "not a great film"', negations(POSITIVE)),
        mft("negated_complaint", 'negated complaints, like "not bad"', negations(NEGATIVE)),
        mft("change_of_mind", 'a change of mind, like "I used to love it, now I hate it"',
            two_sides(("I used to {a_verb} {target}, now I {b_verb} it.",
                       "At first it seemed {a_adj}; by the end I found it {b_adj}."))),
        mft("contrast", 'a contrast, like "the script was dull, but the film is superb"',
            two_sides(("The {aspect} was {a_adj}, but the film is {b_adj}.",
                       "It is {a_adj} at times, but overall it is {b_adj}."))),
        invariance("typo", "a typo in a word that carries no sentiment",
                   lambda i, t, f: typo_elsewhere(t.format(**f), f["adj"])),
        invariance("typo_in_sentiment_word", 'a typo in the sentiment word, like "gerat"',
                   lambda i, t, f: t.format(**{**f, "adj": swap_letters(f["adj"], random.Random(f["adj"]))})),
        invariance("capitals_in_sentiment_word", 'the sentiment word in capitals, like "SUPERB"',
                   lambda i, t, f: t.format(**{**f, "adj": f["adj"].upper()})),
        invariance("all_capitals", "the whole text in capitals", lambda i, t, f: t.format(**f).upper()),
        invariance("title_case", "Every Word Capitalised, as in a headline",
                   lambda i, t, f: string.capwords(t.format(**f))),
        invariance("all_lower_case", "the whole text in lower case, as typed in a hurry",
                   lambda i, t, f: t.format(**f).lower()),
        invariance("link_or_mention", "an added link or @mention", link_or_mention),
        invariance("one_line_link_or_mention", "a link or @mention on a one-line text", link_or_mention,
                   ONE_LINE_TEMPLATES),
        invariance("punctuation", 'the final full stop of a one-line text made "!!!" or "..." or dropped',
                   lambda i, t, f: punctuated(i, t.format(**f)), ONE_LINE_TEMPLATES),
        invariance("emoji", "an emoji of its own side, or popcorn, after a one-line text",
                   lambda i, t, f: f"{t.format(**f)} {EMOJI[f['label']][i % 3]}", ONE_LINE_TEMPLATES),
        invariance("repeated_letters", 'letters repeated, as in "sooo" or "greeeat"',
                   lambda i, t, f: t.replace("so ", "sooo ").format(
                       **{k: stretched(v) if k in ("adj", "Adj") else v for k, v in f.items()}),
                   ONE_LINE_TEMPLATES),
        invariance("names", "another film title or actor",
                   lambda i, t, f: t.format(**{slot: RENAMED.get(word, word) for slot, word in f.items()})),
        directional("added_complaint", 'a complaint added at the end, like "Avoid it."', ADDED_COMPLAINTS, -1),
        directional("added_praise", 'praise added at the end, like "Go and see it."', ADDED_PRAISE, +1),
    ]


def failed(capability: Capability, case: Case, p: dict[str, float]) -> bool:
    """Whether one case fails, given P(positive) of every text."""
    positive = lambda text: p[text] > 0.5
    if capability.kind == "MFT":
        return positive(case.text) != (case.expected == POSITIVE)
    if capability.kind == "INV":
        return positive(case.text) != positive(case.base)
    return capability.direction * (p[case.text] - p[case.base]) < -TOLERANCE


def example(case: Case, p: dict[str, float]) -> dict:
    shown = {"text": case.text, "p_positive": round(p[case.text], 3)}
    if case.expected is not None:
        shown["expected"] = "positive" if case.expected == POSITIVE else "negative"
    if case.base is not None:
        shown |= {"base": case.base, "base_p_positive": round(p[case.base], 3)}
    return shown


def score(checks: Sequence[Capability], p_positive: Callable[[list[str]], Sequence[float]]) -> dict[str, dict]:
    """Each capability's failures under one classifier: `p_positive(texts)` gives P(positive) of
    each text, and is asked once, for every distinct text of the check (bases included)."""
    texts = list(dict.fromkeys(t for c in checks for case in c.cases for t in (case.base, case.text) if t))
    p = dict(zip(texts, map(float, p_positive(texts)), strict=True))
    rate = lambda failures, cases: {"failures": len(failures), "failure_rate": round(len(failures) / len(cases), 4)}
    results = {}
    for c in checks:
        failures = [case for case in c.cases if failed(c, case, p)]
        results[c.name] = {**rate(failures, c.cases), "examples": [example(case, p) for case in failures[:EXAMPLES]]}
        forms = list(dict.fromkeys(case.form for case in c.cases if case.form))
        if forms:  # a capability written in several forms (spellings of one word) fails form by form
            results[c.name]["by_form"] = {form: rate([f for f in failures if f.form == form],
                                                     [case for case in c.cases if case.form == form])
                                          for form in forms}
    return results


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("behaviour", __doc__)
    add_checkpoint(parser)
    add_also(parser)
    add_held_out_arguments(parser)  # the baseline trains on the reviews these leave
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)
    checks = capabilities()
    train_texts, train_labels, _, _ = imdb_split(args.data_dir, args.val_size, args.seed, "validation")
    baseline = fit_linear(train_texts, train_labels)
    positive = list(baseline.classes_).index(POSITIVE)
    ours = read_classifier([args.checkpoint, *args.also])  # the app's verdict
    positive_label = ours.labels.index("positive")
    readers = {"ours": lambda texts: ours.read_texts(texts).log_probs[:, positive_label].exp().numpy(),
               "tfidf": lambda texts: baseline.predict_proba(clean_texts(texts))[:, positive]}
    scored = {name: score(checks, reader) for name, reader in readers.items()}
    result = {"checkpoint": str(args.checkpoint), **({"also": args.also} if args.also else {}),
              "baseline": "tfidf-uni+bigram-logreg",
              "baseline_train_examples": len(train_texts), "tolerance": TOLERANCE,
              "capabilities": {c.name: {"type": c.kind, "about": c.about, "fails": c.fails, "cases": len(c.cases),
                                        **{name: scored[name][c.name] for name in readers}} for c in checks}}
    print(f"{'capability':28}{'type':>6}{'cases':>7}{'ours':>8}{'tfidf':>8}")
    for name, c in result["capabilities"].items():
        print(f"{name:28}{c['type']:>6}{c['cases']:>7}{c['ours']['failure_rate']:>8.1%}{c['tfidf']['failure_rate']:>8.1%}")
        for form, ours in c["ours"].get("by_form", {}).items():
            tfidf = c["tfidf"]["by_form"][form]
            print(f"  {form!r:26}{'':>13}{ours['failure_rate']:>8.1%}{tfidf['failure_rate']:>8.1%}")
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()
