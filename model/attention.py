"""Scaled dot-product attention and multi-head attention, written out.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V          (Vaswani et al., 2017, eq. 1)

Masks are boolean and True where attention is allowed (see `model/masks.py`).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import TransformerConfig
from .row_linear import Linear


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    need_weights: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """q: (B, H, T_q, d_k), k/v: (B, H, T_k, d_k) -> out (B, H, T_q, d_k), weights or None.

    `is_causal` lets query i see keys <= i + (T_k - T_q): aligned to the *end*, so that a block of
    new queries after a KV cache sees the whole past. A query row whose keys are all masked gets
    zero weights and a zero output instead of the NaN a plain softmax of all -inf would give.

    Without `need_weights` the work goes to PyTorch's fused kernel, which never materialises the
    (T_q, T_k) matrix; the tests prove both paths equal.
    """
    t_q, t_k = q.size(-2), k.size(-2)
    is_causal = is_causal and t_q > 1  # one query aligned to the end sees every key: no mask to build
    if not need_weights and mask is None and (t_q == t_k or not is_causal):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=is_causal), None
    if is_causal:
        causal = torch.ones(t_q, t_k, dtype=torch.bool, device=q.device).tril(t_k - t_q)
        mask = causal if mask is None else mask & causal
    if not need_weights:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        return out.masked_fill(~mask.any(-1, keepdim=True), 0.0), None

    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.float().softmax(dim=-1)  # float32 statistics, also under bfloat16 autocast
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)  # all-masked rows: 0, not NaN
    out = F.dropout(weights, dropout_p).to(v.dtype) @ v  # (B, H, T_q, d_k)
    return out, weights


class AttentionCache:
    """Keys and values one attention layer has already computed; `k`/`v` are (B, H, T_past, d_k).

    Self-attention writes each step's keys/values in place into one buffer of `capacity`
    positions, keys and values stacked (doubled if a sequence outruns it): a step copies only its
    new positions, where `torch.cat` would copy, and allocate anew, the whole past at every token.
    A step whose new keys and values lie side by side, as the fused Q/K/V product returns them,
    writes both with one copy (`extend`). `k`/`v` are views of the filled part. Cross-attention
    stores the memory's keys/values once and reuses them, since the memory does not change while
    decoding.
    """

    def __init__(self, capacity: int = 0):
        self.capacity = capacity
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self._kv: torch.Tensor | None = None  # (2, B, H, capacity, d_k): keys, values

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """k/v: (B, H, T_new, d_k) -> every key/value so far, (B, H, T_past + T_new, d_k)."""
        return self.extend(torch.stack((k, v)))

    def extend(self, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """kv: (2, B, H, T_new, d_k), the new keys and values stacked -> every key/value so far."""
        start = 0 if self.k is None else self.k.size(2)
        end = start + kv.size(3)
        buf = self._kv
        if buf is None or end > buf.size(3) or buf.shape[1:3] != kv.shape[1:3] or buf.dtype != kv.dtype:
            size = max(end, self.capacity, 2 * buf.size(3) if start else 0)
            grown = kv.new_empty(*kv.shape[:3], size, kv.size(4))
            if start:
                grown.narrow(3, 0, start).copy_(buf.narrow(3, 0, start))
            self._kv = buf = grown
        buf.narrow(3, start, end - start).copy_(kv)
        self.k, self.v = buf.narrow(3, 0, end).unbind()
        return self.k, self.v

    def reset(self) -> None:
        """Forget the keys/values; the buffer stays allocated for the next sequence."""
        self.k = self.v = None


class MultiHeadAttention(nn.Module):
    """h parallel attention heads over learned projections of Q, K, V, then an output projection.

    The Q/K/V projections live in one (3·d_model, d_model) matrix, the layout of
    `nn.MultiheadAttention`: self-attention does one matmul for all three, cross-attention slices
    it into a query part (applied to the decoder) and a key/value part (applied to the memory).
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        d_model = config.d_model  # the config checked d_model % n_head == 0
        self.d_model, self.n_head, self.dropout = d_model, config.n_head, config.dropout
        self.in_proj = Linear(d_model, 3 * d_model)
        self.out_proj = Linear(d_model, d_model)
        # (B, H, T, d_k) -> same: knocks heads out before out_proj; set by `model.ablation.ablate`
        self.head_ablation = None

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        return x.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, H, T, d_k)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        is_causal: bool = False,
        cache: AttentionCache | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x: (B, T, C) queries; memory: (B, S, C) for cross-attention, None for self-attention."""
        B, T, C = x.shape
        if memory is None:  # self-attention: new keys/values are appended to the cache
            q, k, v = self.in_proj(x).split(C, dim=-1)
            k, v = self._split_heads(k), self._split_heads(v)
            if cache is not None:
                k, v = cache.append(k, v)
        else:  # cross-attention: keys/values come from the memory, computed once per cache
            w, b = self.in_proj.weight, self.in_proj.bias
            q = F.linear(x, w[:C], b[:C])
            if cache is not None and cache.k is not None:
                k, v = cache.k, cache.v
            else:
                k, v = F.linear(memory, w[C:], b[C:]).split(C, dim=-1)
                k, v = self._split_heads(k), self._split_heads(v)
                if cache is not None:
                    cache.k, cache.v = k, v
        q = self._split_heads(q)  # (B, H, T, d_k)
        out, weights = scaled_dot_product_attention(
            q, k, v, mask, is_causal, self.dropout if self.training else 0.0, need_weights
        )
        if self.head_ablation is not None:
            out = self.head_ablation(out)
        out = out.transpose(1, 2).reshape(B, T, C)  # concat heads: (B, T, C)
        return self.out_proj(out), weights
