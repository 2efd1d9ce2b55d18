"""Visitor input made safe.

The caller of every handler is an anonymous web visitor or script: text may be missing, huge, or
hold lone surrogates (JSON can carry them, UTF-8 cannot encode them); numbers may be text, NaN,
±inf or 10**400. Everything is read through these helpers, so no such value reaches the models.
"""

import math

MAX_INPUT_CHARS = 20_000  # far beyond any context; only stops a visitor from pasting a book


def visitor_text(text: object) -> tuple[str, list[str]]:
    """Make any visitor input safe to tokenize; return the text and notices about changes. (The
    clean-up training applied, `<br />` to newlines, comes after, where `tokenization.review` reads
    the text for a model.)"""
    if text is None:
        return "", []
    if not isinstance(text, str):
        text = str(text)
    notices = []
    safe = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates -> "?"
    if safe != text:
        notices.append("Some characters were not valid Unicode and were replaced by “?”.")
    if len(safe) > MAX_INPUT_CHARS:
        notices.append(f"The text was cut to its first {MAX_INPUT_CHARS:,} characters.")
        safe = safe[:MAX_INPUT_CHARS]
    return safe, notices


def read_number(value: object, default: float, low: float = -1e12, high: float = 1e12) -> float:
    """A UI/API number as a finite float in [low, high]: None, text and NaN give the default, and
    ±inf or huge values are clamped, so `int(round(x))` can never raise OverflowError.

    The bounds are far beyond any setting's own range, whose clamping callers explain."""
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond float, 10**400
        x = (math.inf if value > 0 else -math.inf) if isinstance(value, int) else math.nan
    return default if math.isnan(x) else min(max(x, low), high)
