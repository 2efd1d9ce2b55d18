"""The behavioural check (`benchmarks/behaviour.py`) and the app's before-trust note it feeds: the
templates expand to the counts the README reports, every case says what it expects, the scoring
gives the failure rates counted by hand, the classifier is read as the app reads it, and the note
shows the measured figures on short text only."""

import json
from pathlib import Path

import pytest

from benchmarks import behaviour
from benchmarks.behaviour import NEGATIVE, POSITIVE, TOLERANCE, Capability, Case, capabilities, score
from benchmarks.common import read_classifier
from demo.serving import DemoService
from demo.tabs import sentiment as tab
from demo.tiny import shared_tiny_checkpoints
from demo.views import sentiment
from demo.views.sentiment import SentimentResult, classify

WORDS, FEW = 20, 5  # adjectives per side, and per side in the two-opinion templates
BASES = (2 * 3 + 2 * 2) * WORDS * 2  # (titles × aspects + actors × titles) × adjectives × sides
ONE_LINE = (3 + 3 + 3) * WORDS * 2  # "The {aspect} was {adj}.", "This {film} is so {adj}.", "{Adj} {film}."
COUNTS = {
    "single_words": 3 * WORDS * 2,  # "{adj}", "{Adj}.", "It was {adj}."
    "everyday_words": 3 * 16 * 2,  # the same spellings of 16 words a side
    "short_negation": 2 * 16 * 2,  # "not {adj}", "Not {adj} at all."
    "short_phrases": (3 + 3) * WORDS * 2 + 4 * 3 * 2,  # aspects, films; 4 verbs × 3 films
    "negated_praise": 3 * WORDS + 3 * WORDS + WORDS + 4 * 3,
    "negated_complaint": 3 * WORDS + 3 * WORDS + WORDS + 4 * 3,
    "change_of_mind": (4 * 4 * 2 + FEW * FEW) * 2,  # verbs × verbs × {it, this film}; adjectives × adjectives
    "contrast": (3 * FEW * FEW + FEW * FEW) * 2,
    "typo": BASES, "typo_in_sentiment_word": BASES, "capitals_in_sentiment_word": BASES, "all_capitals": BASES,
    "title_case": BASES, "all_lower_case": BASES,
    "link_or_mention": BASES, "names": BASES, **dict.fromkeys(
        ("one_line_link_or_mention", "punctuation", "emoji", "repeated_letters"), ONE_LINE),
    "added_complaint": BASES, "added_praise": BASES,
}


@pytest.fixture(scope="module")
def check() -> dict[str, Capability]:
    return {c.name: c for c in capabilities()}


def test_the_templates_expand_to_the_counts_reported(check: dict[str, Capability]):
    assert {name: len(c.cases) for name, c in check.items()} == COUNTS
    for c in check.values():
        assert len({case.text for case in c.cases}) == len(c.cases), f"{c.name} repeats a case"


def test_every_case_says_what_it_expects(check: dict[str, Capability]):
    for c in check.values():
        assert c.kind in ("MFT", "INV", "DIR") and c.about and c.fails
        for case in c.cases:
            if c.kind == "MFT":
                assert case.expected in (POSITIVE, NEGATIVE) and case.base is None
            else:
                assert case.expected is None and case.base and case.text != case.base  # the edit changed it
    assert all(case.expected == NEGATIVE and " not " in case.text for case in check["negated_praise"].cases)
    assert all(case.expected == POSITIVE and " not " in case.text for case in check["negated_complaint"].cases)
    assert Case("It was terrific.", POSITIVE, form="It was {adj}.") in check["everyday_words"].cases
    assert {Case("not bad", POSITIVE), Case("Not bad at all.", POSITIVE), Case("Not great at all.", NEGATIVE)} <= set(
        check["short_negation"].cases)
    for name in ("single_words", "everyday_words", "short_negation", "short_phrases", "change_of_mind",
                 "contrast"):  # both labels, as many of each
        assert sum(case.expected for case in check[name].cases) * 2 == len(check[name].cases)
    assert Case("I used to love it, now I hate it.", NEGATIVE) in check["change_of_mind"].cases
    assert [c.direction for c in check.values() if c.kind == "DIR"] == [-1, +1]


def changed_words(case: Case) -> list[tuple[str, str]]:
    before, after = case.base.split(), case.text.split()
    return [(a, b) for a, b in zip(before, after, strict=True) if a != b]


def test_each_edit_is_the_one_its_capability_names(check: dict[str, Capability]):
    sentiment_words = set(behaviour.PRAISE + behaviour.COMPLAINT)
    for case in check["typo"].cases:
        [(word, typo)] = changed_words(case)
        assert word.strip(".,") not in sentiment_words and sorted(word) == sorted(typo)
    for case in check["typo_in_sentiment_word"].cases:
        [(word, typo)] = changed_words(case)
        assert word.strip(".,") in sentiment_words and sorted(word) == sorted(typo)
    for case in check["capitals_in_sentiment_word"].cases:
        [(word, shouted)] = changed_words(case)
        assert word.strip(".,") in sentiment_words and shouted == word.upper() != word
    for case in check["all_capitals"].cases:
        assert case.text == case.base.upper()
    for case in check["title_case"].cases:  # every word starts with its capital, the rest as in the base
        assert case.text.lower() == case.base.lower() and case.text != case.base
        assert all(w[0] == w[0].upper() and w[1:] == b[1:].lower() for w, b in zip(case.text.split(), case.base.split(),
                                                                                    strict=True))
    for case in check["all_lower_case"].cases:
        assert case.text == case.base.lower() != case.base
    for case in check["names"].cases:
        assert not any(name in case.text for name in behaviour.RENAMED)
    for case in check["link_or_mention"].cases:
        assert case.base in case.text and any(x in case.text for x in behaviour.LINKS + behaviour.MENTIONS)
    for name in ("added_complaint", "added_praise"):
        assert all(case.text.startswith(case.base + " ") for case in check[name].cases)
    for case in check["one_line_link_or_mention"].cases:
        assert case.base in case.text and any(x in case.text for x in behaviour.LINKS + behaviour.MENTIONS)
        assert case.base.count(" ") <= 4  # one line: a few words
    endings = [case.text[len(case.base) - 1:] for case in check["punctuation"].cases]
    assert all(case.base.endswith(".") and case.text.startswith(case.base[:-1]) for case in check["punctuation"].cases)
    assert {e: endings.count(e) for e in set(endings)} == {"!!!": 120, "...": 120, "": 120}
    for case in check["emoji"].cases:
        side = behaviour.POSITIVE if any(w in case.base.lower() for w in behaviour.PRAISE) else behaviour.NEGATIVE
        assert case.text[: len(case.base)] == case.base and case.text[len(case.base) + 1:] in behaviour.EMOJI[side]
    for case in check["repeated_letters"].cases:
        assert case.text != case.base and len(case.text) in (len(case.base) + 2, len(case.base) + 4)


def test_a_stretched_word_repeats_its_first_vowel_after_the_first_letter():
    assert [behaviour.stretched(w) for w in ("great", "Dull", "superb", "brr")] == ["greeeat", "Duuull", "suuuperb",
                                                                                  "brrrr"]


def test_scoring_a_fake_classifier_gives_the_rates_counted_by_hand():
    checks = [
        Capability("mft", "MFT", "m", "wrong", (Case("a", POSITIVE), Case("b", POSITIVE), Case("c", NEGATIVE),
                                                 Case("d", NEGATIVE))),
        Capability("inv", "INV", "i", "flips", (Case("a2", base="a"), Case("b2", base="a"), Case("e2", base="c"))),
        Capability("dir-", "DIR", "d", "rises", (Case("f1", base="f"), Case("f2", base="f"), Case("a3", base="a")), -1),
        Capability("dir+", "DIR", "d", "falls", (Case("f3", base="f"), Case("f4", base="f")), +1),
    ]
    p = {"a": 0.9, "b": 0.4, "c": 0.2, "d": 0.5,  # b: wrong; d: 0.5 is not positive, so right
         "a2": 0.6, "b2": 0.4, "e2": 0.7,  # a -> b2 and c -> e2 flip
         "f": 0.5, "f1": 0.5 + TOLERANCE - 0.01, "f2": 0.5 + TOLERANCE + 0.01, "a3": 0.1,  # only f2 rises too far
         "f3": 0.5 - TOLERANCE - 0.01, "f4": 0.46}  # only f3 falls too far
    asked = []
    results = score(checks, lambda texts: asked.append(texts) or [p[t] for t in texts])
    assert len(asked) == 1 and sorted(asked[0]) == sorted(p)  # one call, every distinct text once
    assert {name: (r["failures"], r["failure_rate"]) for name, r in results.items()} == {
        "mft": (1, 0.25), "inv": (2, 0.6667), "dir-": (1, 0.3333), "dir+": (1, 0.5)}
    assert results["mft"]["examples"] == [{"text": "b", "p_positive": 0.4, "expected": "positive"}]
    assert results["inv"]["examples"][1] == {"text": "e2", "p_positive": 0.7, "base": "c", "base_p_positive": 0.2}
    assert "by_form" not in results["mft"]  # cases without a form: one rate


def test_one_word_fails_spelling_by_spelling(check: dict[str, Capability]):
    """The one-word capabilities are reported per spelling (issue 64's figure is per spelling): each
    form's rate counts only its own cases."""
    for name in ("single_words", "everyday_words"):
        forms = [case.form for case in check[name].cases]
        assert {f: forms.count(f) for f in forms} == dict.fromkeys(behaviour.ONE_WORD, len(forms) // 3)
    words = Capability("w", "MFT", "words", "wrong", (
        Case("great", POSITIVE, form="{adj}"), Case("Great.", POSITIVE, form="{Adj}."),
        Case("dull", NEGATIVE, form="{adj}"), Case("Dull.", NEGATIVE, form="{Adj}.")))
    p = {"great": 0.4, "Great.": 0.9, "dull": 0.7, "Dull.": 0.6}  # both bare words wrong, "Dull." wrong
    result = score([words], lambda texts: [p[t] for t in texts])["w"]
    assert (result["failures"], result["failure_rate"]) == (3, 0.75)
    assert result["by_form"] == {"{adj}": {"failures": 2, "failure_rate": 1.0},
                                 "{Adj}.": {"failures": 1, "failure_rate": 0.5}}


def test_the_classifier_is_read_as_the_app_reads_it():
    """The benchmark's batched log P(negative), log P(positive) are the app's `/classify` probabilities,
    text by text."""
    checkpoints = shared_tiny_checkpoints()
    service = DemoService(checkpoints, device="cpu", precision="fp32")
    texts = ["Not bad.", "I used to love it, now I hate it.", "The acting was superb. www.moviechat.net/t/20931"]
    read = read_classifier([str(checkpoints / "sentiment")]).readers[0].read_texts(texts)  # the benchmarks' reading
    shown = [classify(service, t).probabilities for t in texts]
    assert read.exp().flatten().tolist() == pytest.approx([p[k] for p in shown for k in ("negative", "positive")],
                                                          abs=1e-5)


@pytest.fixture
def results(tmp_path: Path) -> Path:
    rate = lambda r: {"failures": 0, "failure_rate": r, "examples": []}
    caps = {"a": {"type": "MFT", "about": 'negated complaints, like "not bad"', "fails": "it is wrong",
                  "ours": rate(0.987), "tfidf": rate(1.0)},
            "b": {"type": "INV", "about": "a typo", "fails": "its label flips", "ours": rate(0.41), "tfidf": rate(0.0)},
            "c": {"type": "MFT", "about": "single words", "fails": "it is wrong", "ours": rate(0.23), "tfidf": rate(0)},
            "d": {"type": "INV", "about": "a link", "fails": "its label flips", "ours": rate(0.02), "tfidf": rate(0.9)}}
    path = tmp_path / "behaviour.json"
    path.write_text(json.dumps({"capabilities": caps}))
    return path


def test_the_note_names_the_worst_capabilities_with_their_rates(results: Path, tmp_path: Path):
    note = tab.read_trust_note(results)
    assert note.startswith(tab.TRUST_LEAD)
    assert ('on negated complaints, like "not bad", it is wrong almost always (99%); '
            "on a typo, its label flips 4 times in 10 (41%); on single words, it is wrong 2 times in 10 (23%).") in note
    assert "a link" not in note  # not among the worst three
    assert tab.read_trust_note(tmp_path / "missing.json") == tab.TRUST_LEAD  # no figures: no rates
    assert tab.how_often(1.0) == "always (100%)" and tab.how_often(0.02) == "rarely (2%)"


def fake_classify(service, text):
    """The tab's handler needs only the view's answer (explain's adds the note the same way)."""
    return SentimentResult({"negative": 0.9, "positive": 0.1}, "negative", [(text, 1.0)], ["A notice."])


def test_the_note_appears_under_short_text_only(results: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(tab, "TRUST_NOTE", tab.read_trust_note(results))
    monkeypatch.setattr(sentiment, "classify", fake_classify)
    short = "Not bad at all."
    long = "A slow start, but the second half of this film builds into something I did not expect, " \
           "with a cast that makes every scene count."
    assert len(long.split()) >= tab.SHORT_TEXT_WORDS > len(short.split())
    notice = tab.classify(None, short)[2]
    assert notice.splitlines() == ["- ℹ️ A notice.", f"- ℹ️ {tab.TRUST_NOTE}"] and "(99%)" in notice
    assert tab.classify(None, long)[2] == "- ℹ️ A notice."
