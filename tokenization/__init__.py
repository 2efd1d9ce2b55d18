"""Text <-> token ids: a byte-level BPE tokenizer (see `bpe.py`) and the shared text clean-up."""

from tokenization.bpe import SPECIAL_TOKENS, BatchEncoding, BPETokenizer, Piece, truncate
from tokenization.text import clean_text

__all__ = ["SPECIAL_TOKENS", "BPETokenizer", "BatchEncoding", "Piece", "clean_text", "truncate"]
