"""The one text clean-up shared by training and the app, so the models see the same text in both."""

import re

_HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


def clean_text(text: str) -> str:
    """IMDB reviews carry HTML line breaks (`<br /><br />`): each becomes a newline, and the ends
    are stripped (a trailing space would make the LM start the next word without its space)."""
    return _HTML_BREAK.sub("\n", text).strip()
