"""Text <-> token ids: a byte-level BPE tokenizer (see `bpe.py`)."""

from tokenization.bpe import SPECIAL_TOKENS, BatchEncoding, BPETokenizer, Piece

__all__ = ["SPECIAL_TOKENS", "BPETokenizer", "BatchEncoding", "Piece"]
