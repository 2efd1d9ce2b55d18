"""A review as the models read it: the one owner of that reading.

Training, evaluation, the benchmarks and the app all turn text into model input through here, so
none of them can read a review differently from the others:

- `read_texts`: raw texts (a data file's column, a .txt file's paragraphs) as every model reads
  them, cleaned by `clean_text` (IMDB's `<br />` to newlines, the ends stripped): what the tokenizer
  and the LM train on, what evaluation scores and what the short-text check splits into sentences;
- `prompt_ids`: one text as the language model reads it, the start token then its tokens;
- `read_review`: one review as the classifier reads it, a `Review`: the cleaned text, the tokens the
  encoder reads with their character spans (`cut_source`: the head, or the head and the last
  `src_keep_tail` tokens), their ids and the end token, and the word of each token (`word_ids`);
- `source_ids`: many reviews as the classifier reads them, batched (training's `PairSet`);
- `label_candidates`: the label words' ids, the candidates the classifier scores.

The classifier supplies the cut and the labels: `max_src_len` from its architecture (config.json,
`model`), `src_keep_tail` and `labels` from its own settings (classifier.json, `classifier`), side by
side in a `classifier.Reading`. Both live above or beside this package, so they are only read here,
never imported.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from tokenization.bpe import BPETokenizer, Piece, truncate
from tokenization.text import clean_text
from tokenization.words import word_ids

T = TypeVar("T")


class SourceConfig(Protocol):
    """What the reading needs (`classifier.Reading` gives it, each field from its owner)."""

    max_src_len: int  # the most tokens the encoder reads, its end token included (config.json)
    src_keep_tail: int  # a longer source keeps this many of its last tokens (classifier.json)
    labels: list[str] | None  # a classifier's label words (classifier.json)


def read_texts(texts: Iterable[str]) -> list[str]:
    """Raw texts as every model reads them: each cleaned (`clean_text`)."""
    return [clean_text(text) for text in texts]


def prompt_ids(text: str, tokenizer: BPETokenizer) -> list[int]:
    """A text as the language model reads it (as its training documents begin): the start token,
    then the cleaned text's tokens; only the start token when the text is empty once cleaned."""
    return [tokenizer.bos_id, *tokenizer.encode(clean_text(text))]


def cut_source(tokens: Sequence[T], config: SourceConfig, max_len: int | None = None) -> list[T]:
    """The tokens of a source the encoder reads, its end token aside: all of them, or past
    `max_src_len - 1` the head and the last `src_keep_tail` (`truncate`). Works on ids and on
    display `Piece`s alike; `max_len` is a tighter limit than `max_src_len` (a heatmap's)."""
    return truncate(tokens, min(max_len or config.max_src_len, config.max_src_len) - 1, config.src_keep_tail)


def source_ids(texts: list[str], tokenizer: BPETokenizer, config: SourceConfig) -> list[list[int]]:
    """Many reviews as the encoder reads them: `cut_source(encode(clean_text(text))) + [eos]` each,
    batched in Rust (the clean-up leaves a text `read_texts` gave unchanged)."""
    rows = tokenizer.encode_batch(read_texts(texts), padding=False, return_tensors=False).input_ids
    return [[*cut_source(row, config), tokenizer.eos_id] for row in rows]


@dataclass
class Review:
    """One review as the classifier reads it."""

    text: str  # cleaned: the pieces' spans index into it
    pieces: list[Piece]  # the tokens the encoder reads, cut as `cut_source` cuts them
    ids: list[int]  # the pieces' ids, then the end token: the encoder's input
    n_tokens: int  # the tokens of the whole text, before the cut

    @property
    def word_ids(self) -> list[int]:
        """The word of each id (`tokenization.word_ids`), the end token a word of its own: the units
        occlusion deletes in a long review."""
        return word_ids([p.text for p in self.pieces] + [""])


def read_review(text: str, tokenizer: BPETokenizer, config: SourceConfig, max_len: int | None = None) -> Review:
    """A raw review as the classifier reads it: cleaned, tokenized with character spans, cut
    (`cut_source`, `max_len` as there), then the end token: the ids `source_ids` gives the same text."""
    text = clean_text(text)
    every = tokenizer.pieces(text)
    pieces = cut_source(every, config, max_len)
    return Review(text, pieces, [*(p.id for p in pieces), tokenizer.eos_id], len(every))


def label_candidates(tokenizer: BPETokenizer, config: SourceConfig) -> list[list[int]]:
    """Each label word's token ids, in `labels` order: the candidates a classifier scores. A config
    with fewer than two labels is a `ValueError`: there is nothing to choose between."""
    if not config.labels or len(config.labels) < 2:
        raise ValueError(f"this checkpoint is not a classifier: its `labels` (classifier.json) are {config.labels!r}, "
                         "it needs at least two label words")
    return [tokenizer.encode(label) for label in config.labels]
