"""Word segmentation of a token sequence: which word each token belongs to (occlusion of long
reviews deletes whole words; the app names a token by the word it is part of)."""

from collections.abc import Sequence


def word_ids(token_texts: Sequence[str]) -> list[int]:
    """The word index of each token, from the tokens' texts: a word starts at a token that begins
    with a space (byte-level BPE keeps the space on the following word), or at a token that starts
    or follows a non-alphanumeric character, so punctuation stands on its own."""
    ids, word, prev = [], -1, ""
    for text in token_texts:
        starts = (word < 0 or not text or text[0].isspace() or not text[0].isalnum()
                  or not prev or not prev[-1].isalnum())
        word += starts
        ids.append(word)
        prev = text
    return ids


def in_word(token_texts: Sequence[str], i: int) -> str:
    """Token `i` as a reader sees it: its whole word, the token's part in brackets when the word is
    cut into several tokens ("[ne]gative", "ne[g]ative"), a one-token word as it is. A BPE piece
    such as "ne" means nothing to a learner; the word it belongs to does."""
    words = word_ids(token_texts)
    parts = [(j, t) for j, (w, t) in enumerate(zip(words, token_texts, strict=True)) if w == words[i]]
    if len(parts) == 1:
        return token_texts[i]
    return "".join(f"[{t}]" if j == i else t for j, t in parts)
