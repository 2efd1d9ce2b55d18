"""The Tokenizer tab's computation: the BPE pieces of any text, with their ids."""

from dataclasses import dataclass

from demo.serving import DemoError, DemoService, visitor_text
from tokenization import Piece, token_label

MAX_TOKENIZER_PIECES = 2_000  # pieces rendered in the tokenizer tab (all are counted)
EMPTY_TEXT = "Type some text first."


@dataclass
class TokenizeResult:
    pieces: list[tuple[str, int]]  # (piece text, id), at most MAX_TOKENIZER_PIECES
    letters: list[tuple[int, int, str]]  # (first, end) piece indices whose bytes together spell the letter(s) text
    count: int  # all tokens, even those not listed
    characters: int
    notices: list[str]


def tokenize(service: DemoService, text: object) -> TokenizeResult:
    """The BPE pieces of any text with their ids, by the served tokenizer (the piece texts
    concatenate to the text, except that a character split across tokens shows as its bytes, see
    `token_label`)."""
    tokenizer = service.tokenizer
    if tokenizer is None:
        raise DemoError(f"No tokenizer found in `{service.root.name}/`.")
    text, notices = visitor_text(text)
    if not text:
        raise DemoError(EMPTY_TEXT)
    pieces = tokenizer.pieces(text)
    if len(pieces) > MAX_TOKENIZER_PIECES:
        notices.append(f"{len(pieces):,} tokens: showing the first {MAX_TOKENIZER_PIECES:,}.")
    shown = pieces[:MAX_TOKENIZER_PIECES]
    labels = [(token_label(tokenizer, p.id), p.id) for p in shown]
    return TokenizeResult(labels, split_letters(shown, text), len(pieces), len(text), notices)


def split_letters(pieces: list[Piece], text: str) -> list[tuple[int, int, str]]:
    """Runs of pieces that each hold only some bytes of a character (ï = c3 af, split in two
    tokens): (first, end) piece indices and the text they spell together. A partial piece spans
    every character it touches, so the pieces of one character share its span."""
    runs: list[list] = []
    for i, p in enumerate(pieces):
        if "\ufffd" not in p.text:  # whole characters
            continue
        if runs and runs[-1][1] == i and p.start < runs[-1][3]:  # overlaps the run before: same character
            runs[-1][1], runs[-1][3] = i + 1, max(runs[-1][3], p.end)
        else:
            runs.append([i, i + 1, p.start, p.end])
    return [(first, end, text[start:stop]) for first, end, start, stop in runs]
