"""What visitors type, normalised on the way into the classifier (`tokenization.normalise`), and a
long review read whole, window by window (`tokenization.windows`, `classifier.Reader`)."""

import math
from pathlib import Path

import pytest
import torch

from classifier import Reader
from tokenization import read_review, review_text, source_ids, source_windows, windows
from tokenization.normalise import end_one_line, fix_case, normalise, sentence_case, unstretch
from tokenization.review import CONTEXT

SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "sentiment"


@pytest.fixture(scope="module")
def reader() -> Reader:
    return Reader.from_pretrained(SHIPPED)


@pytest.fixture(scope="module")
def tokenizer(reader):
    return reader.tokenizer


def letters(word: str) -> int:
    """A stand-in tokenizer's count: one token per letter, capitals two (the real one knows lower case best)."""
    return sum(2 if c.isupper() else 1 for c in word)


def acronyms(word: str) -> int:
    """A count that knows DVD whole in capitals only, as the shipped tokenizer does."""
    return 1 if word == "DVD" else 3 if word == "dvd" else letters(word)


@pytest.mark.parametrize("typed, read", [
    ("@filmfan88 The acting was superb.", " the acting was superb."),
    ("The acting was superb. https://www.example.com/reviews/8812", " the acting was superb."),
    ("Loved it www.moviechat.net/t/20931 really", " loved it really."),
    ("so good bit.ly/3xQz9", " so good."),
    ("thanks @cinema_nerd for this", " thanks for this."),
    ("<i>Jaws</i> is *so* good &amp; scary", " jaws is so good & scary."),
    ("The ending was _perfect_.", " the ending was perfect."),
    ("Loved it 😍👍🏽", " loved it."),
    ("mail me at a@b.com.", " mail me at a@b.com."),  # an address is not a handle
])
def test_links_handles_markup_and_emoji_are_not_read(typed, read):
    assert normalise(typed, letters) == read


def test_a_review_with_nothing_to_normalise_comes_back_unchanged():
    review = "I watched it twice.\nThe DVD has  two spaces, a 10/10 and (**) stars; it's great!"
    assert normalise(review, acronyms) == review


@pytest.mark.parametrize("typed, read", [
    ("I WATCHED IT LAST NIGHT AND THE ACTING WAS SUPERB.", "I watched it last night and the acting was superb."),
    ("GREAT MOVIE!!! LOVED IT. i mean it", "Great movie!!! Loved it. I mean it"),
    ("I Watched It Last Night And The Acting Was Bland.", "I watched it last night and the acting was bland."),
    ("The acting was SUPERB, and I DON'T care.", "The acting was superb, and I don't care."),
    ("Bought the DVD, it is SUPERB.", "Bought the DVD, it is superb."),  # known whole in capitals: kept
    ("Great Film", "Great Film"),  # two words: not a headline
])
def test_case_is_read_as_reviews_write_it(typed, read):
    assert fix_case(typed, acronyms) == read


def test_sentence_case_capitalises_sentence_starts_and_the_pronoun_i():
    assert sentence_case("WELL. i'M SURE i LIKED IT!\nYES") == "Well. I'm sure I liked it!\nYes"


def test_stretched_letters_take_the_spelling_of_fewer_tokens_twice_on_a_tie():
    tokens = {"so": 1, "soo": 2, "great": 1, "greaat": 3, "good": 1, "god": 1}.get
    assert unstretch("sooo greaaat, goooood", tokens) == "so great, good"
    assert unstretch("The acting was SOOO good", tokens) == "The acting was SOOO good"  # capitals: fix_case's


@pytest.mark.parametrize("typed, read", [
    ("loved it!!!", " loved it."), ("Loved it...", " loved it."), ("Loved it", " loved it."), ("great", " great."),
    ("i loved it", " I loved it."), ("I'd watch it again!", " I'd watch it again."),  # "I" as reviews write it
    ("DVD was great", " DVD was great."),  # fewer tokens in capitals: kept
    ("Why would anyone watch this?", "Why would anyone watch this?"),  # a question stays one
    ("Great. Loved it!!!", "Great. Loved it!!!"), ("Great!\nLoved it", "Great!\nLoved it"),  # longer: as typed
])
def test_a_one_line_sentence_is_read_as_a_sentence_inside_a_review(typed, read):
    assert end_one_line(typed, acronyms) == read


@pytest.mark.parametrize("typed", ["terrific", "Terrific.", "AMAZING!!!", "dull..."])
def test_one_word_is_read_as_the_one_token_it_is_inside_a_review(typed, tokenizer):
    """The shipped tokenizer reads a word that starts a text in rarer pieces ("Terrific" is `T`, `er`,
    `rific`) than after a space (" terrific"): the reading gives a word alone its mid-review token."""
    read = review_text(typed, tokenizer)
    word = typed.strip(".!").lower()
    assert read == f" {word}."
    assert tokenizer.encode(read) == [*tokenizer.encode(" " + word), *tokenizer.encode(".")]
    assert len(tokenizer.encode(" " + word)) == 1 < len(tokenizer.encode(word.capitalize()))


def test_the_classifier_reads_the_normalised_text_and_the_language_model_does_not(tokenizer):
    typed = "@filmfan88 THE ACTING WAS SUPERB!!! https://bit.ly/3xQz9"
    read = review_text(typed, tokenizer)
    assert read == " the acting was superb."
    assert read_review(typed, tokenizer, CUT).text == read
    assert source_ids([typed], tokenizer, CUT) == source_ids([read], tokenizer, CUT)


class Cut:
    max_src_len = 11  # ten tokens and the end token
    src_keep_tail = 4
    labels = ["negative", "positive"]


CUT = Cut()


@pytest.mark.parametrize("n", [1, 10, 11, 16, 25, 40, 97])
def test_windows_read_every_token_the_first_being_the_training_cut(n):
    tokens = list(range(n))
    parts = windows(tokens, CUT)
    assert parts[0] == (tokens if n <= 10 else tokens[:6] + tokens[-4:])  # head 6 + tail 4, as training cut
    assert all(len(w) <= 10 for w in parts)
    assert all(w == tokens[w[0]: w[0] + len(w)] for w in parts[1:])  # the middle's windows are contiguous
    assert set().union(*parts) == set(tokens)
    middle = max(n - 10, 0)  # the tokens head + tail leave out
    assert len(parts) == 1 + (math.ceil(middle / 10) if middle else 0)


def test_a_review_just_over_the_window_reads_its_middle_with_context_not_a_whole_second_window():
    tokens = list(range(1030))  # 1,023 + 7: head + tail leave out 7 tokens
    reading = Cut()
    reading.max_src_len, reading.src_keep_tail = 1024, 384
    cut, middle = windows(tokens, reading)
    assert len(cut) == 1023 and middle == tokens[639 - CONTEXT: 646 + CONTEXT]


def test_source_windows_end_each_window_and_match_source_ids_on_the_first(tokenizer):
    texts = ["A short one.", "word " * 40]
    every = source_windows(texts, tokenizer, CUT)
    assert [w[0] for w in every] == source_ids(texts, tokenizer, CUT)
    assert len(every[0]) == 1 and len(every[1]) > 1
    assert all(w[-1] == tokenizer.eos_id and len(w) <= CUT.max_src_len for text in every for w in text)


def test_a_long_review_s_verdict_is_the_mean_of_its_windows_scores(reader):
    long = " ".join(f"Scene {i} was fine." for i in range(300))  # 2,115 tokens: three windows
    review = read_review(long, reader.tokenizer, reader.reading)
    assert len(review.windows) == 3 and review.window_ids[0] == review.ids
    with torch.inference_mode():  # each window alone, through the model itself
        by_window = torch.cat([reader.model.candidate_scores(reader.model.encode(torch.tensor([ids]))[0],
                                                             reader.candidates)[0] for ids in review.window_ids])
    expected = (by_window.mean(0) / reader.temperature).log_softmax(-1)
    torch.testing.assert_close(reader.read_windows(review.window_ids), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(reader.score_texts([long, "fine"])[0], by_window.mean(0), rtol=1e-5, atol=1e-5)


def test_whole_false_reads_the_training_cut_alone(reader):
    long = " ".join(f"Scene {i} was fine." for i in range(300))
    review = read_review(long, reader.tokenizer, reader.reading)
    with torch.inference_mode():
        cut = reader.model.candidate_scores(reader.model.encode(torch.tensor([review.ids]))[0], reader.candidates)[0]
    torch.testing.assert_close(reader.score_texts([long], whole=False), cut, rtol=1e-5, atol=1e-5)


def test_joined_documents_are_one_label_each_and_long_enough():
    from benchmarks.long_reviews import joined

    texts = [f"{'good' if i % 2 else 'bad'} film number {i}" for i in range(40)]
    labels = [i % 2 for i in range(40)]
    docs, doc_labels = joined(texts, labels, lambda t: len(t.split()), 12, seed=0)
    assert docs and len(docs) == len(doc_labels) == 2 * (20 // 3)  # 3 texts of 4 words reach 12
    for doc, label in zip(docs, doc_labels, strict=True):
        parts = doc.split("\n\n")
        assert len(parts) == 3 and all(p.startswith("good" if label else "bad") for p in parts)
    assert joined(texts, labels, lambda t: len(t.split()), 12, seed=0) == (docs, doc_labels)  # seeded
