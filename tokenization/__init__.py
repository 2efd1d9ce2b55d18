"""Text <-> token ids: a byte-level BPE tokenizer (see `bpe.py`) the shared text clean-up and
sentence splitting, word segmentation, and readable token labels."""

from tokenization.bpe import SPECIAL_TOKENS, BatchEncoding, BPETokenizer, Piece, truncate
from tokenization.display import token_label, visible
from tokenization.text import clean_text, sentence_spans, sentences
from tokenization.words import word_ids

__all__ = [
    "SPECIAL_TOKENS", "BPETokenizer", "BatchEncoding", "Piece", "clean_text", "sentence_spans", "sentences",
    "token_label", "truncate", "visible", "word_ids",
]
