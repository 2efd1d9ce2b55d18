"""Word segmentation of a token sequence: which word each token belongs to (occlusion of long
reviews deletes whole words)."""

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
