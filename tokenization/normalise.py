"""What visitors type, read as reviews are written: the classifier learned from IMDB reviews, where
nobody pastes a link, tags a handle, SHOUTS A WHOLE LINE or writes "sooo gooood", and on such text it
guesses. Classifiers trained on tweets meet the same problem and normalise on the way in (BERTweet,
Nguyen et al. 2020, turns links and user handles into placeholders); ours never saw a placeholder, so
the parts that say nothing about a film are removed instead, and the parts that do are written the
way the training reviews write them:

- links (`https://…`, `www.…`, `bit.ly/…`) and @handles are removed: they name no opinion;
- HTML tags (`<i>`, `<a href=…>`; `clean_text` already turned `<br />` into line breaks), HTML
  entities (`&amp;`) and emphasis marks (`*word*`, `_word_`) are read as the plain text they mark;
- emoji are removed: the training reviews have none, so the model reads them as noise bytes;
- case: a text written mostly in capitals, or with Every Word Capitalised, is read in sentence
  case; a single WORD in capitals is read in lower case, unless the capitals are how the tokenizer
  knows it (an acronym like DVD or TV is fewer tokens in capitals than in lower case);
- a letter typed three times or more ("sooo", "greaaat") is read once or twice, whichever spelling
  the tokenizer knows in fewer tokens (so: "so", "great", "good");
- a one-line text of one sentence is read as a sentence inside a review: one full stop last
  ("loved it!!!", "Loved it...", "Loved it" all read " loved it."), a question kept: in a text that
  short the model weighs its last mark more than a reader would (chosen on the selection rows' first
  and last sentences: within one text of reading them as typed); and a space before it, its first
  word in lower case where the tokenizer knows it so in no more tokens ("I" kept). Byte-level BPE
  gives a word at the very start of a text other tokens than the same word after a space, and the
  readers learned their opinions mid-review: "Terrific." is `T`, `er`, `rific`, `.`, pieces they
  leave near one half, " terrific." the one token they read in thousands of reviews. Measured on the
  shipped pair (docs/sentiment.md): one word wrong 15.0% -> 0.0% of the behaviour check's cases, the
  selection rows' short texts 75.80% -> 75.45% (within their interval), full reviews unchanged.

`normalise` is applied by `tokenization.review`, the one reader of a review, for training and
serving alike; the language model's reading (`clean_texts`, `prompt_ids`) is left as typed.
"""

import html
import re
from collections.abc import Callable

from tokenization.text import sentence_spans

# what is removed takes the spaces before it along, so the words around it keep one space between them
_LINK = re.compile(r"[ \t]*(?:(?:https?://|www\.)\S+|\b[\w-]+\.(?:com|net|org|ly|io|co|tv|me)/\S*)", re.IGNORECASE)
_HANDLE = re.compile(r"[ \t]*(?<![\w@])@\w+")
_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_EMPHASIS = re.compile(r"(?<!\w)(\*{1,2}|_{1,2})(?=\w)([^*_\n]+?)(?<=\w)\1(?!\w)")
_EMOJI = re.compile("[ \t]*[\U0001F000-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\uFE0F\u200D]+")
_WORD = re.compile(r"[A-Za-z]+")
_SHOUTED_WORD = re.compile(r"\b[A-Z][A-Z']*[A-Z]\b")  # TV, SUPERB, DON'T
_STRETCHED = re.compile(r"\b\w*([a-z])\1{2,}\w*\b")
_SENTENCE_START = re.compile(r"(^|[.!?]\s+|\n\s*)([a-z])")
_LAST_MARKS = re.compile(r"[.!]+$")
_LONE_I = re.compile(r"\bi\b(?=\s|'|$|[.,!?;:])")
_FIRST_WORD = re.compile(r"[A-Za-z']+")

MOSTLY = 0.5  # more than this share of a text's words in capitals: the text is shouted
TITLED = 0.75  # at least this share of three or more words Capitalised: the text is a headline

Count = Callable[[str], int]  # a word -> how many tokens it is, read mid-sentence (after a space)


def sentence_case(text: str) -> str:
    """Lower case, but each sentence's first letter and the pronoun "I" capitalised."""
    text = _SENTENCE_START.sub(lambda m: m.group(1) + m.group(2).upper(), text.lower())
    return _LONE_I.sub("I", text)


def fix_case(text: str, tokens: Count) -> str:
    """Shouted or headline text in sentence case; a shouted WORD in lower case where the tokenizer
    knows it at least as well that way. Words of one letter ("I", "a") say nothing about case."""
    words = [w for w in _WORD.findall(text) if len(w) > 1]
    if not words:
        return text
    shouted = sum(w.isupper() for w in words)
    titled = sum(w[0].isupper() and w[1:].islower() for w in words)
    if shouted / len(words) > MOSTLY or (len(words) >= 3 and titled / len(words) >= TITLED):
        return sentence_case(text)
    lower = lambda m: m.group().lower() if tokens(m.group().lower()) <= tokens(m.group()) else m.group()
    return _SHOUTED_WORD.sub(lower, text)


def unstretch(text: str, tokens: Count) -> str:
    """Each word with a letter typed three times or more, with every such run read once or twice:
    the spelling of fewer tokens, twice on a tie ("goood" -> "good", not "god")."""
    def fix(m: re.Match) -> str:
        once, twice = (re.sub(r"([a-z])\1{2,}", r"\1" * n, m.group()) for n in (1, 2))
        return once if tokens(once) < tokens(twice) else twice
    return _STRETCHED.sub(fix, text)


def end_one_line(text: str, tokens: Count) -> str:
    """A text of one line and one sentence as a sentence inside a review: its final run of full stops
    and exclamation marks (or none) made one full stop, a space before it, and its first word spelled
    as it is read after a space: Capitalised, or in lower case where that is no more tokens, "I" and
    its contractions as they are. A question, and any longer text, as it is."""
    if not text.strip() or "\n" in text or len(sentence_spans(text, 1)) > 1 or text.endswith("?"):
        return text
    text = text[0].upper() + _LAST_MARKS.sub("", text[1:]) + "."
    first = _FIRST_WORD.match(text)
    if first and not _LONE_I.match(first.group().lower()):
        word, lower = first.group(), first.group().lower()
        text = (lower if tokens(lower) <= tokens(word) else word) + text[first.end():]
    return " " + text


def normalise(text: str, tokens: Count) -> str:
    """A cleaned text (`clean_text`) as the classifier reads it; `tokens(word)` counts a word's
    tokens. A text with none of the above comes back unchanged."""
    text = _HANDLE.sub("", _LINK.sub("", text))
    text = _EMPHASIS.sub(r"\2", html.unescape(_TAG.sub("", text)))
    text = _EMOJI.sub("", text).strip()
    return end_one_line(unstretch(fix_case(text, tokens), tokens), tokens)
