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
    parts = (s.strip() for s in _SENTENCE_END.split(text))
    return [s for s in parts if len(s.split()) >= max(1, min_words)]
