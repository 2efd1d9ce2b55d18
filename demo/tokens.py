"""The Tokenizer tab's computation: the BPE pieces of any text, with their ids."""

from dataclasses import dataclass

from demo.inputs import DemoError, clean_text
from tokenization import BPETokenizer, token_label

MAX_TOKENIZER_PIECES = 2_000  # pieces rendered in the tokenizer tab (all are counted)
EMPTY_TEXT = "Type some text first."


@dataclass
class TokenizeResult:
    pieces: list[tuple[str, int]]  # (piece text, id), at most MAX_TOKENIZER_PIECES
    count: int  # all tokens, even those not listed
    characters: int
    notices: list[str]


def tokenize(tokenizer: BPETokenizer, text: object) -> TokenizeResult:
    """The BPE pieces of any text with their ids (the piece texts concatenate to the text, except
    that a character split across tokens shows as its bytes, see `token_label`)."""
    text, notices = clean_text(text)
    if not text:
        raise DemoError(EMPTY_TEXT)
    pieces = tokenizer.pieces(text)
    if len(pieces) > MAX_TOKENIZER_PIECES:
        notices.append(f"{len(pieces):,} tokens: showing the first {MAX_TOKENIZER_PIECES:,}.")
    shown = [(token_label(tokenizer, p.id), p.id) for p in pieces[:MAX_TOKENIZER_PIECES]]
    return TokenizeResult(shown, len(pieces), len(text), notices)
