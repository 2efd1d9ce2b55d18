"""Tests for the byte-level BPE tokenizer: specials, exact round trips, batching, files, offsets."""

from pathlib import Path

import pytest
import torch

from tokenization import SPECIAL_TOKENS, BatchEncoding, BPETokenizer, Piece, fit_context, prompt_ids, truncate

VOCAB_SIZE = 400

CORPUS = [
    "This movie was great, the acting was wonderful and the story kept me watching.",
    "The film was terrible: the plot made no sense and the acting was even worse.",
    "I loved the music, the characters and the ending of this wonderful film.",
    "One of the worst movies I have ever seen. Do not waste your time watching it.",
    "A beautiful story about family, friendship and growing up in a small town.",
    "The director clearly knew what he was doing; every scene looks amazing.",
    "Honestly, I expected more from such a famous cast. What a disappointment!",
    "My kids watched it twice in one weekend and they still want to see it again.",
    "Naïve café owners, a déjà vu plot and a résumé of clichés: still charming.",
    "日本語の映画はとても面白かったです。また見たいと思います。",
    "שלום, זה היה סרט מצוין מאוד",
    "Rated 10/10 👍🏽👍🏽 would watch again!!! 🎬🍿",
    "Tabs\tand\nnewlines  and   runs of    spaces are text too.",
]


@pytest.fixture(scope="module")
def tok() -> BPETokenizer:
    return BPETokenizer.train(CORPUS * 3, vocab_size=VOCAB_SIZE)


TRICKY = [
    "👍🏽",
    "naïve café",
    "日本語の映画",
    "שלום",
    "a\nb\t c  ",
    "  leading and trailing  ",
    "\x00",
    "",
    "literal <s> and </s> and <pad> are just text",
    "unseen bytes: \x7f \u200b \U0001f9ec ẞ",
]


def test_special_tokens_have_ids_0_to_3(tok: BPETokenizer) -> None:
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.sep_id) == (0, 1, 2, 3)
    assert list(SPECIAL_TOKENS) == ["pad", "bos", "eos", "sep"]
    for i, token in enumerate(SPECIAL_TOKENS.values()):
        assert tok.decode_token(i) == token


def test_vocab_size_is_the_requested_one(tok: BPETokenizer) -> None:
    assert tok.vocab_size == len(tok) == VOCAB_SIZE


@pytest.mark.parametrize("text", TRICKY)
def test_exact_round_trip(tok: BPETokenizer, text: str) -> None:
    ids = tok.encode(text)
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text
    assert tok.decode(torch.tensor(tok.encode(text, add_bos=True, add_eos=True))) == text


def test_special_strings_in_text_never_become_special_ids(tok: BPETokenizer) -> None:
    ids = tok.encode("<s>hello</s><pad><sep>")
    assert not set(ids) & {tok.pad_id, tok.bos_id, tok.eos_id, tok.sep_id}


def test_bos_eos_and_decoding_specials(tok: BPETokenizer) -> None:
    ids = tok.encode("the film", add_bos=True, add_eos=True)
    assert ids == [tok.bos_id, *tok.encode("the film"), tok.eos_id]
    assert tok.decode(ids) == "the film"
    assert tok.decode(ids, skip_special_tokens=False) == "<s>the film</s>"


def test_padding(tok: BPETokenizer) -> None:
    texts = ["the film", "", "the acting was wonderful and the story kept me watching"]
    plain = [tok.encode(t, add_bos=True) for t in texts]
    batch = tok.encode_batch(texts, add_bos=True)
    assert isinstance(batch, BatchEncoding)
    width = max(map(len, plain))
    assert batch.input_ids.dtype == batch.attention_mask.dtype == torch.long
    assert batch.input_ids.shape == batch.attention_mask.shape == (3, width)
    assert batch.lengths == [len(ids) for ids in plain]
    assert batch.truncated == [False, False, False]
    rows, masks = batch.input_ids.tolist(), batch.attention_mask.tolist()
    for row, mask, ids in zip(rows, masks, plain, strict=True):
        pad = width - len(ids)
        assert row == ids + [tok.pad_id] * pad
        assert mask == [1] * len(ids) + [0] * pad

    lists = tok.encode_batch(texts, add_bos=True, return_tensors=False)
    assert lists.input_ids == batch.input_ids.tolist()
    assert lists.attention_mask == batch.attention_mask.tolist()
    ragged = tok.encode_batch(texts, add_bos=True, padding=False, return_tensors=False)
    assert ragged.input_ids == plain
    assert ragged.attention_mask == [[1] * len(ids) for ids in plain]
    with pytest.raises(ValueError):
        tok.encode_batch(texts, padding=False)


def test_truncation_counts_specials_and_keeps_them(tok: BPETokenizer) -> None:
    long = "the acting was wonderful and the story kept me watching " * 5
    texts = ["the film", long, "a", long + "again"]
    max_length = 12
    batch = tok.encode_batch(texts, max_length=max_length, add_bos=True, add_eos=True)
    assert batch.truncated == [False, True, False, True]
    assert batch.input_ids.shape == (4, max_length)
    rows = batch.input_ids.tolist()
    for row, text, cut, n in zip(rows, texts, batch.truncated, batch.lengths, strict=True):
        full = tok.encode(text, add_bos=True, add_eos=True)
        assert n == (max_length if cut else len(full))
        assert row[0] == tok.bos_id and row[n - 1] == tok.eos_id
        assert row[: n - 1] == full[: n - 1]  # content is cut at its end, not its start
    # Exactly at the limit is not a truncation.
    exact = tok.encode_batch(["the film"], max_length=len(tok.encode("the film")))
    assert exact.truncated == [False]
    with pytest.raises(ValueError):
        tok.encode_batch(texts, max_length=1, add_bos=True, add_eos=True)


def test_truncate_keeps_head_or_head_and_tail() -> None:
    seq = list(range(10))
    assert truncate(seq, 4) == [0, 1, 2, 3]
    assert truncate(seq, 4, keep_tail=3) == [0, 7, 8, 9]
    assert truncate(seq, 4, keep_tail=9) == [6, 7, 8, 9]  # a tail longer than the budget is cut to it
    assert truncate(seq, 10, keep_tail=3) == seq and truncate(seq[:2], 4, keep_tail=3) == [0, 1]
    with pytest.raises(ValueError, match="keep_tail"):
        truncate(seq, 4, keep_tail=-1)


def test_head_and_tail_truncation_keeps_the_ending(tok: BPETokenizer) -> None:
    text = "the opening scene was slow " * 5 + "but the ending is brilliant"
    full = tok.encode(text)
    batch = tok.encode_batch([text, "a short one"], max_length=12, add_bos=True, add_eos=True, keep_tail=4,
                             padding=False, return_tensors=False)
    row = batch.input_ids[0]
    assert batch.truncated == [True, False] and len(row) == 12
    assert row == [tok.bos_id, *full[:6], *full[-4:], tok.eos_id]
    assert batch.input_ids[1] == tok.encode("a short one", add_bos=True, add_eos=True)


def test_save_and_load_give_identical_ids(tok: BPETokenizer, tmp_path: Path) -> None:
    written = tok.save(tmp_path / "tok")  # a directory that does not exist yet
    assert written == tmp_path / "tok" / "tokenizer.json"
    assert sorted(p.name for p in written.parent.iterdir()) == ["tokenizer.json"]  # no temp left
    file = tok.save(tmp_path / "custom.json")
    for loaded in (BPETokenizer.from_file(written.parent), BPETokenizer.from_file(file)):
        assert loaded.vocab_size == tok.vocab_size
        for text in [*TRICKY, *CORPUS]:
            assert loaded.encode(text) == tok.encode(text)


def test_saved_file_gets_the_permissions_of_a_plain_open(tok: BPETokenizer, tmp_path: Path) -> None:
    """Written by `storage.atomic_write_text`, like every checkpoint file (no owner-only temp file)."""
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert tok.save(tmp_path).stat().st_mode & 0o777 == plain.stat().st_mode & 0o777


def test_missing_file_error_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "tokenizer.json"
    with pytest.raises(FileNotFoundError, match="nowhere"):
        BPETokenizer.from_file(missing)
    with pytest.raises(FileNotFoundError, match=r"no checkpoint folder at .*nowhere"):  # a folder, not a repo id
        BPETokenizer.from_file(tmp_path / "nowhere")


def test_pieces_tile_ascii_text(tok: BPETokenizer) -> None:
    text = "The film was  great,\tno?\n"
    pieces = tok.pieces(text)
    assert all(isinstance(p, Piece) for p in pieces)
    assert [p.id for p in pieces] == tok.encode(text)
    assert "".join(text[p.start : p.end] for p in pieces) == text
    assert all(p.text == text[p.start : p.end] for p in pieces)


@pytest.mark.parametrize("text", ["日本語の映画", "ok 👍🏽 naïve", "שלום 🎬"])
def test_pieces_offsets_are_character_offsets(tok: BPETokenizer, text: str) -> None:
    pieces = tok.pieces(text)
    assert pieces[-1].end == len(text)  # byte offsets would run past the end of the string
    assert all(0 <= p.start < p.end <= len(text) for p in pieces)
    for p in pieces:
        if "\ufffd" not in p.text:  # whole characters: the span is exactly the token's text
            assert text[p.start : p.end] == p.text


def test_decode_token_rejects_unknown_ids(tok: BPETokenizer) -> None:
    with pytest.raises(ValueError):
        tok.decode_token(tok.vocab_size)


def test_transformers_loads_the_file_unchanged(tok: BPETokenizer, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    file = str(tok.save(tmp_path))
    hf = transformers.PreTrainedTokenizerFast(tokenizer_file=file)
    for text in [*TRICKY, *CORPUS]:
        if any(special in text for special in SPECIAL_TOKENS.values()):
            continue  # by default transformers turns a literal "<s>" in text into the bos id
        ids = hf(text)["input_ids"]
        assert ids == tok.encode(text)
        assert hf.decode(ids) == text
    # split_special_tokens=True gives our plain-text treatment of "<s>", so then every text agrees.
    hf = transformers.PreTrainedTokenizerFast(tokenizer_file=file, split_special_tokens=True)
    assert all(hf(text)["input_ids"] == tok.encode(text) for text in [*TRICKY, *CORPUS])


@pytest.mark.needs_imdb
def test_train_on_imdb_reviews() -> None:
    path = Path(__file__).resolve().parents[2] / "shared/data/imdb/train.parquet"
    pq = pytest.importorskip("pyarrow.parquet")
    batch = next(pq.ParquetFile(path).iter_batches(batch_size=300, columns=["text"]))
    reviews = batch.column("text").to_pylist()
    tok = BPETokenizer.train(reviews, vocab_size=1000)
    assert tok.vocab_size == 1000
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.sep_id) == (0, 1, 2, 3)
    encoded = tok.encode_batch(reviews[:50], max_length=64, add_bos=True, add_eos=True)
    assert encoded.input_ids.shape == (50, 64)
    assert all(tok.decode(tok.encode(review)) == review for review in reviews)


def test_a_prompt_fits_its_context_keeping_the_head_or_the_end_after_the_start_token() -> None:
    tok = BPETokenizer.train(CORPUS, vocab_size=300)
    whole = prompt_ids("the cat sat on the mat and then it slept", tok)
    assert whole[0] == tok.bos_id and len(whole) > 4
    assert fit_context(whole, 4, keep="head") == whole[:4]  # what the text opens with
    assert fit_context(whole, 4, keep="end") == [tok.bos_id, *whole[-3:]]  # the part a continuation follows
    assert fit_context(whole, len(whole), keep="end") == whole  # it fits: every token
    assert fit_context(whole, 1, keep="end") == [tok.bos_id]  # no room: the start token alone
    with pytest.raises(ValueError, match="keep"):
        fit_context(whole, 4, keep="tail")
