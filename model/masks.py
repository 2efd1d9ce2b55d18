"""Attention masks: which keys each query may look at.

Convention used everywhere in `model/`: a mask is a boolean tensor that is **True where attention
is allowed** and broadcasts to the score shape `(B, H, T_q, T_k)`. Boolean masks compose with `&`,
which is all that combining a padding mask with a causal mask needs.
"""

import torch


def padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """`(B, T)` 1/0 (real/pad) -> `(B, 1, 1, T)`: every query may look at every real key."""
    return attention_mask.bool()[:, None, None, :]


def causal_mask(t_q: int, t_k: int, device: torch.device | None = None) -> torch.Tensor:
    """`(T_q, T_k)`: query i sees keys <= i + (T_k - T_q), the causal mask aligned to the *end*.
    With T_q = T_k it is lower-triangular; with fewer queries than keys (new tokens after a KV
    cache holding T_k - T_q earlier ones) each new query still sees the whole past."""
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(t_k - t_q)


def subsequent_mask(size: int, device: torch.device | None = None) -> torch.Tensor:
    """`(1, 1, T, T)` lower-triangular: position t sees positions <= t (the paper's name)."""
    return causal_mask(size, size, device)[None, None]


def causal_padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Causal mask combined with key padding: `(B, 1, T, T)`."""
    return padding_mask(attention_mask) & subsequent_mask(attention_mask.size(1), attention_mask.device)
