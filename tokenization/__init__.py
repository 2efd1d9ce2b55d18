"""Text <-> token ids: a byte-level BPE tokenizer (see `bpe.py`), the shared text clean-up and
sentence splitting, word segmentation, readable token labels, and a review as the models read it
(`review.py`, the one owner of that reading)."""

from tokenization.bpe import SPECIAL_TOKENS, BatchEncoding, BPETokenizer, Piece, truncate
from tokenization.display import token_label, visible
from tokenization.review import (
    Review,
    clean_texts,
    cut_source,
    fit_context,
    label_candidates,
    prompt_ids,
    read_review,
    review_text,
    source_ids,
    source_windows,
    windows,
)
from tokenization.text import clean_text, sentence_spans, sentences
from tokenization.words import in_word, word_ids

__all__ = [
    "SPECIAL_TOKENS", "BPETokenizer", "BatchEncoding", "Piece", "Review", "clean_text", "clean_texts", "cut_source",
    "fit_context", "in_word", "label_candidates", "prompt_ids", "read_review", "review_text", "sentence_spans",
    "sentences", "source_ids", "source_windows", "token_label", "truncate", "visible", "windows", "word_ids",
]
