"""Attention masks.

Convention used everywhere in `model/`: a mask is a boolean tensor that is **True where attention
is allowed** and broadcasts to the score shape `(B, H, T_q, T_k)`. Boolean masks compose with `&`,
which is all that combining a padding mask with a causal mask needs.
"""

import torch


def padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """`(B, T)` 1/0 (real/pad) -> `(B, 1, 1, T)`: every query may look at every real key."""
    return attention_mask.bool()[:, None, None, :]


def subsequent_mask(size: int, device: torch.device | None = None) -> torch.Tensor:
    """`(1, 1, T, T)` lower-triangular: position t sees positions <= t (the paper's name)."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]


def causal_padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Causal mask combined with key padding: `(B, 1, T, T)`."""
    return padding_mask(attention_mask) & subsequent_mask(attention_mask.size(1), attention_mask.device)
