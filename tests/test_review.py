"""A review as the models read it (`tokenization.review`): one reading for training, evaluation, the
benchmarks and the app, checked against the tokenizer's own pieces, and the only clean-up anywhere."""

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from tokenization import (
    BPETokenizer,
    clean_texts,
    label_candidates,
    prompt_ids,
    read_review,
    source_ids,
)
from training.evaluate import _texts

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ["A wonderful film, I loved the acting and the music.", "A boring plot, bad acting: I hated it.",
          "The end was great.<br /><br />The start was slow."] * 20
RAW = "  Slow start.<br /><br />But the ending: wonderful, I loved it.<BR>Really!  "
CLEAN = "Slow start.\n\nBut the ending: wonderful, I loved it.\nReally!"


@pytest.fixture(scope="module")
def tok() -> BPETokenizer:
    return BPETokenizer.train(CORPUS, vocab_size=300)


def config(max_src_len: int = 512, src_keep_tail: int = 0, labels=("negative", "positive")) -> SimpleNamespace:
    """A `tokenization.review.SourceConfig` (`classifier.Reading` is the one the classifier passes)."""
    return SimpleNamespace(max_src_len=max_src_len, src_keep_tail=src_keep_tail,
                           labels=None if labels is None else list(labels))


def test_clean_texts_cleans_every_text():
    assert clean_texts([RAW, "plain"]) == [CLEAN, "plain"]
    assert clean_texts(clean_texts([RAW])) == [CLEAN]  # reading twice changes nothing


def test_evaluate_reads_a_txt_file_and_a_table_alike(tmp_path):
    """A .txt file's paragraphs are cleaned as a table's column is (they used not to be)."""
    (tmp_path / "r.txt").write_text(f"{RAW}\n\n<br />\n\nplain\n", encoding="utf-8")
    (tmp_path / "r.csv").write_text(f'text\n"{RAW}"\nplain\n', encoding="utf-8")
    assert _texts(tmp_path / "r.txt") == _texts(tmp_path / "r.csv") == [CLEAN, "plain"]


def test_prompt_ids_is_the_start_token_then_the_cleaned_text(tok):
    assert prompt_ids(RAW, tok) == [tok.bos_id, *tok.encode(CLEAN)]
    assert prompt_ids(" <br /> ", tok) == [tok.bos_id]


@pytest.mark.parametrize("max_src_len, tail", [(512, 0), (9, 0), (9, 3)])
def test_read_review_is_source_ids_with_pieces_and_words(tok, max_src_len, tail):
    c = config(max_src_len, tail)
    every = tok.encode(CLEAN)
    assert len(every) > 8  # the short limits cut this review
    expected = every if len(every) < max_src_len else every[: max_src_len - 1 - tail] + every[len(every) - tail:]
    review = read_review(RAW, tok, c)
    assert review.text == CLEAN and review.n_tokens == len(every)
    assert review.ids == [*expected, tok.eos_id] == source_ids([RAW], tok, c)[0] == source_ids([CLEAN], tok, c)[0]
    assert [p.id for p in review.pieces] == expected
    assert all(CLEAN[p.start:p.end] for p in review.pieces)  # the spans index the cleaned text
    words = review.word_ids
    assert len(words) == len(review.ids) and words[-1] == words[-2] + 1  # the end token: a word of its own
    assert words == sorted(words) and words[0] == 0


def test_read_review_takes_a_tighter_limit(tok):
    review = read_review(RAW, tok, config(512, 2), max_len=6)
    every = tok.encode(CLEAN)
    assert review.ids == [*every[:3], *every[-2:], tok.eos_id]


def test_label_candidates(tok):
    assert label_candidates(tok, config()) == [tok.encode("negative"), tok.encode("positive")]
    for labels in (None, ["positive"]):
        with pytest.raises(ValueError, match="at least two label words"):
            label_candidates(tok, config(labels=labels))


def test_the_clean_up_is_called_by_the_review_owner_and_the_chat_alone():
    """`clean_text` runs in one reading (`tokenization/review.py`) and on the chat's input path, which
    shows the visitor's cleaned text; everything else reads text through the owner."""
    calls = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
             if "tests" not in p.parts and "docs" not in p.parts and re.search(r"\bclean_text\(", p.read_text())}
    assert calls == {"tokenization/review.py", "tokenization/text.py", "demo/views/chat.py", "demo/tabs/chat.py"}
