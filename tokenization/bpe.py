"""Byte-level BPE tokenizer: text <-> integer ids, built on Hugging Face `tokenizers`.

The idea (GPT-2's tokenizer): read text as UTF-8 *bytes*, start from a vocabulary of all 256 byte
values, then repeatedly merge the most frequent adjacent pair into a new token until the vocabulary
is full. Because every byte is in the starting alphabet, any string is encodable (emoji, accents,
CJK, RTL, control characters) with no `<unk>` token, and because no normalizer rewrites the text,
decoding the ids gives back exactly the input string. The Rust library does the heavy lifting
(training, batched encoding); this module fixes the configuration and adds the few conveniences
the rest of the project needs (special ids, batching into tensors, truncation, display pieces).

Special tokens, ids 0-3 in this order:

- `pad`  `<pad>`: fills the short sequences of a batch up to the longest; the attention mask is 0
  there, so attention and the loss ignore it.
- `bos`  `<s>`:   marks the start of every sequence, and is the decoder start token when
  generating.
- `eos`  `</s>`:  marks the end of a sequence; generation stops when the model emits it.
- `sep`  `<sep>`: separates segments that share one stream, e.g. source and target.

Text is always encoded as plain text: a review that literally contains "<s>" gets the byte tokens
for "<", "s", ">", never the `bos` id. Special ids enter a sequence only through the `add_bos` /
`add_eos` flags or explicit id arithmetic, so user text can never forge control tokens.
"""

import itertools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from storage import TOKENIZER_NAME, atomic_write_text, resolve_checkpoint

T = TypeVar("T")

SPECIAL_TOKENS: dict[str, str] = {"pad": "<pad>", "bos": "<s>", "eos": "</s>", "sep": "<sep>"}

@dataclass
class BatchEncoding:
    """A batch of encoded texts, right-padded to the longest one.

    `input_ids` and `attention_mask` are `(B, T)` LongTensors, or lists of lists when tensors were
    not requested. `attention_mask` is 1 on real tokens (including bos/eos) and 0 on padding.
    `truncated[i]` tells the caller that text i lost tokens to `max_length`; `lengths[i]` is the
    number of real tokens in row i.
    """

    input_ids: torch.Tensor | list[list[int]]
    attention_mask: torch.Tensor | list[list[int]]
    truncated: list[bool]
    lengths: list[int]


@dataclass
class Piece:
    """One token as a web page shows it: its id, its readable text and where it sits in the input.

    `start`/`end` are *character* offsets into the encoded string, so `text[start:end]` is the
    span. A token holding only part of a multibyte character (byte-level BPE may split an emoji)
    spans every character it touches, and its `text` shows U+FFFD for the incomplete bytes.
    """

    id: int
    text: str
    start: int
    end: int


def truncate(seq: Sequence[T], budget: int, keep_tail: int = 0) -> list[T]:
    """At most `budget` items of `seq`: its head, or with `keep_tail` its head and its last `keep_tail`.

    Head + tail is the truncation that classifies long reviews best (Sun et al., 2019, "How to
    Fine-Tune BERT for Text Classification"): a review often states its verdict in its last lines.
    Works on token ids and on display `Piece`s alike, so the app cuts a text as training did.
    """
    if keep_tail < 0:
        raise ValueError(f"keep_tail must be >= 0, got {keep_tail}")
    if len(seq) <= budget:
        return list(seq)
    tail = min(keep_tail, budget)
    return [*seq[: budget - tail], *seq[len(seq) - tail :]]


def _resolve(path: str | os.PathLike[str]) -> Path:
    """`x.json` is the file itself; any other path is a directory holding `tokenizer.json`."""
    path = Path(path)
    return path if path.suffix == ".json" and not path.is_dir() else path / TOKENIZER_NAME


class BPETokenizer:
    """A trained byte-level BPE `tokenizers.Tokenizer` plus the project's special-token ids."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        missing = [tok for tok in SPECIAL_TOKENS.values() if tokenizer.token_to_id(tok) is None]
        if missing:
            raise ValueError(f"tokenizer lacks the special tokens {missing}")
        # Treat "<s>" etc. inside text as ordinary characters (see the module docstring). This flag
        # is not stored in tokenizer.json, so it is set here, on every construction.
        tokenizer.encode_special_tokens = True
        self.tokenizer = tokenizer
        self._pad_id, self._bos_id, self._eos_id, self._sep_id = (
            tokenizer.token_to_id(SPECIAL_TOKENS[name]) for name in ("pad", "bos", "eos", "sep")
        )

    # ----------------------------------------------------------------------------------------
    # training and persistence

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int = 8192,
        min_frequency: int = 2,
        show_progress: bool = False,
    ) -> "BPETokenizer":
        """Learn merges from `texts` until the vocabulary (specials + 256 bytes + merges) is full.

        `min_frequency` stops merges of pairs seen fewer times, so a small corpus may end below
        `vocab_size`; a real corpus fills it.
        """
        tokenizer = Tokenizer(models.BPE())
        # No normalizer: any rewriting (NFKC, lowercasing, stripping) would break exact round trips.
        # The pre-tokenizer splits on GPT-2's regex (words, numbers, punctuation, whitespace runs)
        # so merges never cross word boundaries, and maps each byte to a printable character.
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        # trim_offsets=False: a token's span includes its leading space, so spans tile the text.
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            show_progress=show_progress,
            special_tokens=list(SPECIAL_TOKENS.values()),  # ids 0..3, in dict order
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte, seen or not
        )
        length = len(texts) if isinstance(texts, Sequence) else None  # only for the progress bar
        tokenizer.train_from_iterator(texts, trainer=trainer, length=length)
        return cls(tokenizer)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write `path` if it ends in `.json`, else `path/tokenizer.json`; return the file written.

        The file is written next to its destination and then renamed over it, so a crash never
        leaves a half-written tokenizer where a training run expects a good one.
        """
        file = _resolve(path)
        file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(file, self.tokenizer.to_str(pretty=True))
        return file

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> "BPETokenizer":
        """Load a `tokenizer.json` written by `save`: a file path, the folder holding it, or a Hub repo id."""
        file = _resolve(path)
        if not file.parent.exists() and Path(path).suffix != ".json":
            file = resolve_checkpoint(path) / TOKENIZER_NAME
        if not file.is_file():
            raise FileNotFoundError(f"no tokenizer file at {file}")
        return cls(Tokenizer.from_file(str(file)))

    # ----------------------------------------------------------------------------------------
    # vocabulary

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def pad_id(self) -> int:
        return self._pad_id

    @property
    def bos_id(self) -> int:
        return self._bos_id

    @property
    def eos_id(self) -> int:
        return self._eos_id

    @property
    def sep_id(self) -> int:
        return self._sep_id

    # ----------------------------------------------------------------------------------------
    # encoding

    def _wrap(self, ids: list[int], add_bos: bool, add_eos: bool) -> list[int]:
        return [self._bos_id] * add_bos + ids + [self._eos_id] * add_eos

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Token ids of `text`, optionally framed by bos/eos."""
        return self._wrap(self.tokenizer.encode(text).ids, add_bos, add_eos)

    def encode_batch(
        self,
        texts: list[str],
        max_length: int | None = None,
        add_bos: bool = False,
        add_eos: bool = False,
        padding: bool = True,
        return_tensors: bool = True,
        keep_tail: int = 0,
    ) -> BatchEncoding:
        """Encode many texts at once (in parallel, in Rust) and pad them into a rectangle.

        `max_length` bounds the *total* length, bos/eos included: when a text is too long its
        content is cut at the end (or, with `keep_tail`, in the middle: see `truncate`), while bos
        stays first and eos stays last, so the model still sees a well-formed sequence. Rows are
        padded on the right with `pad_id` to the longest row. Tensors need a rectangle, so
        `return_tensors=True` requires `padding=True`.
        """
        if isinstance(texts, str):
            raise TypeError("encode_batch takes a list of strings; use encode for a single one")
        if return_tensors and not padding:
            raise ValueError("return_tensors=True needs padding=True (tensors must be rectangular)")
        n_special = int(add_bos) + int(add_eos)
        if max_length is not None and max_length < max(1, n_special):
            raise ValueError(f"max_length={max_length} leaves no room for the special tokens")
        budget = None if max_length is None else max_length - n_special

        rows, truncated = [], []
        for encoding in self.tokenizer.encode_batch(texts):
            ids = encoding.ids
            truncated.append(budget is not None and len(ids) > budget)
            rows.append(self._wrap(ids if budget is None else truncate(ids, budget, keep_tail), add_bos, add_eos))
        lengths = [len(row) for row in rows]
        width = max(lengths, default=0)

        if return_tensors:
            # Scatter all ids into a pad-filled (B, T) tensor through a boolean mask (row-major,
            # so the flat ids land in order): much faster than torch.tensor on nested lists.
            mask = torch.arange(width) < torch.tensor(lengths, dtype=torch.long)[:, None]
            input_ids = torch.full((len(rows), width), self._pad_id, dtype=torch.long)
            flat = list(itertools.chain.from_iterable(rows))
            input_ids[mask] = torch.tensor(flat, dtype=torch.long)
            return BatchEncoding(input_ids, mask.long(), truncated, lengths)
        if not padding:
            return BatchEncoding(rows, [[1] * n for n in lengths], truncated, lengths)
        padded = [row + [self._pad_id] * (width - n) for row, n in zip(rows, lengths, strict=True)]
        attention_mask = [[1] * n + [0] * (width - n) for n in lengths]
        return BatchEncoding(padded, attention_mask, truncated, lengths)

    # ----------------------------------------------------------------------------------------
    # decoding and display

    def decode(self, ids: Sequence[int] | torch.Tensor, skip_special_tokens: bool = True) -> str:
        """Text of a token sequence (a list or a 1-D tensor). Inverse of `encode`, exactly."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(f"decode takes a 1-D tensor, got shape {tuple(ids.shape)}")
            ids = ids.tolist()
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def decode_token(self, id: int) -> str:
        """Text of one token. Bytes of a character split across tokens show as U+FFFD."""
        if self.tokenizer.id_to_token(id) is None:
            raise ValueError(f"token id {id} is outside the vocabulary (size {self.vocab_size})")
        return self.tokenizer.decode([id], skip_special_tokens=False)

    def pieces(self, text: str) -> list[Piece]:
        """The tokens of `text` with their readable text and character spans, for display."""
        encoding = self.tokenizer.encode(text)
        return [
            Piece(token_id, self.decode_token(token_id), start, end)
            for token_id, (start, end) in zip(encoding.ids, encoding.offsets, strict=True)
        ]
