"""A review as the models read it: the one owner of that reading.

Training, evaluation, the benchmarks and the app all turn text into model input through here, so
none of them can read a review differently from the others:

- `clean_texts`: raw texts (a data file's column, a .txt file's paragraphs) as every model reads
  them, cleaned by `clean_text` (IMDB's `<br />` to newlines, the ends stripped): what the tokenizer
  and the LM train on, what evaluation scores and what the short-text check splits into sentences;
- `prompt_ids`: one text as the language model reads it, the start token then its tokens, and
  `fit_context`: such a prompt cut to a context, keeping its head (a text read for what it holds: the
  head and meaning views) or its end (a text continued: the chat, the tour's LM track);
- `review_text`: a text as the classifier reads it: cleaned, then what visitors type (links,
  handles, SHOUTING, "sooo") normalised (`tokenization.normalise`);
- `read_review`: one review as the classifier reads it, a `Review`: that text, the tokens the
  encoder reads with their character spans (`cut_source`: the head, or the head and the last
  `src_keep_tail` tokens), their ids and the end token, the word of each token (`word_ids`), and
  for a review longer than the encoder's window, the windows that read the rest (`windows`);
- `source_ids`: many reviews as the classifier trains on them, cut, batched (training's `PairSet`);
- `source_windows`: many reviews as the classifier reads them whole: each review's windows' ids;
- `label_candidates`: the label words' ids, the candidates the classifier scores.

The classifier supplies the cut and the labels: `max_src_len` from its architecture (config.json,
`model`), `src_keep_tail` and `labels` from its own settings (classifier.json, `classifier`), side by
side in a `classifier.Reading`. Both live above or beside this package, so they are only read here,
never imported.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from tokenization.bpe import BPETokenizer, Piece, truncate
from tokenization.normalise import normalise
from tokenization.text import clean_text
from tokenization.words import word_ids

T = TypeVar("T")


class SourceConfig(Protocol):
    """What the reading needs (`classifier.Reading` gives it, each field from its owner)."""

    max_src_len: int  # the most tokens the encoder reads, its end token included (config.json)
    src_keep_tail: int  # a longer source keeps this many of its last tokens (classifier.json)
    labels: list[str] | None  # a classifier's label words (classifier.json)


def clean_texts(texts: Iterable[str]) -> list[str]:
    """Raw texts as every model reads them: each cleaned (`clean_text`)."""
    return [clean_text(text) for text in texts]


def prompt_ids(text: str, tokenizer: BPETokenizer) -> list[int]:
    """A text as the language model reads it (as its training documents begin): the start token,
    then the cleaned text's tokens; only the start token when the text is empty once cleaned."""
    return [tokenizer.bos_id, *tokenizer.encode(clean_text(text))]


PROMPT_KEEPS = ("head", "end")


def fit_context(ids: Sequence[int], limit: int, keep: str) -> list[int]:
    """At most `limit` ids of a prompt (`prompt_ids`), its start token always first: of the text's tokens,
    the first (`keep="head"`) or the last (`keep="end"`: the part a continuation follows)."""
    if keep not in PROMPT_KEEPS:
        raise ValueError(f"keep must be one of {PROMPT_KEEPS}, got {keep!r}")
    if len(ids) <= limit:
        return list(ids)
    room = limit - 1  # the start token aside
    return [ids[0], *(ids[1 : 1 + room] if keep == "head" else ids[len(ids) - room :])]


def cut_source(tokens: Sequence[T], config: SourceConfig, max_len: int | None = None) -> list[T]:
    """The tokens of a source the encoder reads, its end token aside: all of them, or past
    `max_src_len - 1` the head and the last `src_keep_tail` (`truncate`). Works on ids and on
    display `Piece`s alike; `max_len` is a tighter limit than `max_src_len` (a heatmap's)."""
    return truncate(tokens, min(max_len or config.max_src_len, config.max_src_len) - 1, config.src_keep_tail)


CONTEXT = 128  # tokens of text on each side of a middle window's part, where the encoder's window has room


def windows(tokens: Sequence[T], config: SourceConfig) -> list[list[T]]:
    """Every token of a source read, window by window, the end token aside: first the cut training
    reads (`cut_source`), then, where that cut leaves out a middle, that middle in equal parts of at
    most the encoder's window, each read with up to `CONTEXT` tokens of the text around it.

    A review longer than the encoder's window has its middle unread by head + tail; Sun et al.
    (2019) found head + tail best on IMDB and reading in chunks within a few tenths of it, so the
    cut stays the first window and the middle is read besides. A middle window is no longer than its
    part and its context: a review a few tokens over the window costs little more than one within
    it. Works on ids and `Piece`s alike."""
    size, cut = config.max_src_len - 1, cut_source(tokens, config)
    start, end = size - min(config.src_keep_tail, size), len(tokens) - min(config.src_keep_tail, size)
    if len(tokens) <= size or end <= start:
        return [cut]
    parts = math.ceil((end - start) / size)
    bounds = [start + round(i * (end - start) / parts) for i in range(parts + 1)]
    spans = list(zip(bounds, bounds[1:], strict=False))  # each part of the middle: (first, past its last)
    around = [min(CONTEXT, (size - (b - a)) // 2) for a, b in spans]
    return [cut, *(list(tokens[max(a - c, 0): b + c]) for (a, b), c in zip(spans, around, strict=True))]


def review_text(text: str, tokenizer: BPETokenizer) -> str:
    """A raw text as the classifier reads it: cleaned (`clean_text`), then normalised
    (`tokenization.normalise`: links, handles, emoji and markup out, case and stretched letters as
    reviews write them, judged by how many tokens each spelling takes)."""
    return normalise(clean_text(text), lambda word: len(tokenizer.encode(" " + word)))


def _rows(texts: list[str], tokenizer: BPETokenizer) -> list[list[int]]:
    read = [review_text(text, tokenizer) for text in texts]
    return tokenizer.encode_batch(read, padding=False, return_tensors=False).input_ids


def source_ids(texts: list[str], tokenizer: BPETokenizer, config: SourceConfig) -> list[list[int]]:
    """Many reviews as the encoder trains on them: `cut_source(encode(review_text(text))) + [eos]`
    each, batched in Rust."""
    return [[*cut_source(row, config), tokenizer.eos_id] for row in _rows(texts, tokenizer)]


def source_windows(texts: list[str], tokenizer: BPETokenizer, config: SourceConfig) -> list[list[list[int]]]:
    """Many reviews as the encoder reads them whole: each review's `windows`, each ended by eos (one
    window, `source_ids`' row, for a review the encoder reads at once)."""
    return [[[*w, tokenizer.eos_id] for w in windows(row, config)] for row in _rows(texts, tokenizer)]


@dataclass
class Review:
    """One review as the classifier reads it."""

    text: str  # as read (`review_text`): the pieces' spans index into it
    pieces: list[Piece]  # the tokens the encoder reads, cut as `cut_source` cuts them
    ids: list[int]  # the pieces' ids, then the end token: the encoder's input
    n_tokens: int  # the tokens of the whole text, before the cut
    windows: list[list[Piece]]  # every token read (`windows`): `pieces` first, then the middle's

    @property
    def window_ids(self) -> list[list[int]]:
        """Each window's ids, then the end token: what the whole-review verdict reads."""
        return [[*(p.id for p in w), self.ids[-1]] for w in self.windows]

    @property
    def word_ids(self) -> list[int]:
        """The word of each id (`tokenization.word_ids`), the end token a word of its own: the units
        occlusion deletes in a long review."""
        return word_ids([p.text for p in self.pieces] + [""])


def read_review(text: str, tokenizer: BPETokenizer, config: SourceConfig, max_len: int | None = None) -> Review:
    """A raw review as the classifier reads it (`review_text`), tokenized with character spans, cut
    (`cut_source`, `max_len` as there), then the end token: the ids `source_ids` gives the same
    text; its `windows` are `source_windows`' (the model's own window: `max_len` only cuts a view)."""
    text = review_text(text, tokenizer)
    every = tokenizer.pieces(text)
    pieces = cut_source(every, config, max_len)
    return Review(text, pieces, [*(p.id for p in pieces), tokenizer.eos_id], len(every), windows(every, config))


def label_candidates(tokenizer: BPETokenizer, config: SourceConfig) -> list[list[int]]:
    """Each label word's token ids, in `labels` order: the candidates a classifier scores. A config
    with fewer than two labels is a `ValueError`: there is nothing to choose between."""
    if not config.labels or len(config.labels) < 2:
        raise ValueError(f"this checkpoint is not a classifier: its `labels` (classifier.json) are {config.labels!r}, "
                         "it needs at least two label words")
    return [tokenizer.encode(label) for label in config.labels]
