"""The one text clean-up shared by training and the app, so the models see the same text in both, and
the sentence splitting that the short-text check and the crop recipe read reviews with."""

import re

_HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
MIN_SENTENCE_WORDS = 4  # shorter "sentences" are mostly fragments ("Wow.", "10/10.")

# A sentence ends at . ! or ? (possibly repeated, possibly followed by closing quotes/brackets),
# followed by white space; a line break always ends one (clean_text turned <br /> into "\n").
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")


def clean_text(text: str) -> str:
    """IMDB reviews carry HTML line breaks (`<br /><br />`): each becomes a newline, and the ends
    are stripped (a trailing space would make the LM start the next word without its space)."""
    return _HTML_BREAK.sub("\n", text).strip()


def sentences(text: str, min_words: int = MIN_SENTENCE_WORDS) -> list[str]:
    """The sentences of a (cleaned) review with at least `min_words` words."""
    return [text[start:end] for start, end in sentence_spans(text, min_words)]


def sentence_spans(text: str, min_words: int = MIN_SENTENCE_WORDS) -> list[tuple[int, int]]:
    """`sentences` as (start, end) character offsets into `text`, so that a sentence's tokens can be
    found by their offsets (`training.evidence` sums token attributions per sentence)."""
    spans, start = [], 0
    for end in [*(m.start() for m in _SENTENCE_END.finditer(text)), len(text)]:
        part = text[start:end]
        first = start + len(part) - len(part.lstrip())
        last = start + len(part.rstrip())
        if len(text[first:last].split()) >= max(1, min_words):
            spans.append((first, last))
        start = end if end == len(text) else _SENTENCE_END.match(text, end).end()
    return spans
