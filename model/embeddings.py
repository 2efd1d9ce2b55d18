"""From token ids to vectors: each id looks up a learned embedding, scaled by √d_model, and a fixed
sinusoidal positional encoding says where in the sequence it stands (Vaswani et al., 2017,
sections 3.4 and 3.5). The same embedding matrix, transposed, turns the last hidden states back
into scores over the vocabulary (weight tying)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import TransformerConfig
from .hooks import HookPoint


class Embeddings(nn.Module):
    """Token embeddings scaled by √d_model, so they are not drowned by the positional encoding.

    The same matrix, transposed, is the output projection (`logits`): weight tying (section 3.4).
    Its result passes the named point `hook_logits` (`model/hooks.py`).
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.lut = nn.Embedding(config.vocab_size, config.d_model)
        self.scale = math.sqrt(config.d_model) if config.embed_scale else 1.0  # without: N(0, 0.02) per dimension
        self.hook_logits = HookPoint()

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.lut(idx) * self.scale  # (B, T, C)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.hook_logits(F.linear(x, self.lut.weight))  # (B, T, vocab)


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (T, 1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe  # (T, C)


class PositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table, `config.max_positions` rows; `offset` is the position of the
    first token (KV cache). This is where a stack's input is put together, so its named points are
    the stack input's: `hook_embed`, the token vectors it receives, `hook_pos`, the rows it adds, and
    `hook_input`, their sum (after dropout)."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.dropout = nn.Dropout(config.dropout)
        # not a parameter and not saved: it is a pure function of (max_positions, d_model); without
        # positions (`config.positions` False) every row is zero, so nothing tells the places apart
        table = sinusoidal_table(config.max_positions, config.d_model)
        self.register_buffer("pe", table if config.positions else torch.zeros_like(table), persistent=False)
        self.hook_embed, self.hook_pos, self.hook_input = HookPoint(), HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        T = x.size(1)
        if offset + T > self.pe.size(0):
            raise ValueError(f"sequence of {offset + T} positions exceeds max_len {self.pe.size(0)}")
        x = self.hook_embed(x) + self.hook_pos(self.pe[offset : offset + T])  # (B, T, C)
        return self.hook_input(self.dropout(x))
