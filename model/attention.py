"""Attention: each token's new representation is a weighted average of the values of the tokens it
may look at, weighted by how well its query matches their keys.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + M) V          (Vaswani et al., 2017, eq. 1)

M is 0 where the mask allows a key and -inf where it does not (see `model/masks.py`), so a masked
key gets weight exactly 0. Multi-head attention runs h such attentions side by side on learned
projections of the input and concatenates them.
"""

import math
from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import TransformerConfig
from .hooks import HookPoint, watched
from .masks import causal_mask


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
              dropout_p: float = 0.0, at: Callable[[str, torch.Tensor], torch.Tensor] = lambda name, x: x,
              scale: float | None = None) -> torch.Tensor:
    """The formula, step by step. q: (B, H, T_q, d_k), k/v: (B, H, T_k, d_k), `mask` True where
    attention is allowed -> out (B, H, T_q, d_k). `at(name, value)` is where each step's value
    passes a named point, to be read or replaced (`MultiHeadAttention.at`: "scores" is `hook_scores`).
    `scale` multiplies the scores: 1/√d_k unless given (1.0: a model trained without the scaling).

    A query row whose keys are all masked gets zero weights and a zero output instead of the NaN a
    softmax of all -inf would give (a left-padded position under a causal mask has no key to see).
    """
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = at("scores", q @ k.transpose(-2, -1) * scale)  # (B, H, T_q, T_k): query·key, scaled by 1/√d_k:
    # a dot product of d_k random terms has variance d_k, so its spread grows as √d_k and would saturate the softmax
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # + M: a masked key gets weight 0
    weights = scores.float().softmax(dim=-1)  # each row sums to 1 (float32, also under bfloat16 autocast)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)  # a row with no allowed key: 0, not NaN
    weights = at("weights", weights)
    return F.dropout(weights, dropout_p).to(v.dtype) @ v  # (B, H, T_q, d_k): the weighted sum of the values


def full_mask(mask: torch.Tensor | None, is_causal: bool, t_q: int, t_k: int, device: torch.device) -> torch.Tensor:
    """The mask `attention` applies, True where a query may look: `mask` (padding, (B, 1, 1 or T_q, T_k))
    and, when `is_causal`, the causal mask aligned to the end (`causal_mask`); all True when neither."""
    if is_causal:
        causal = causal_mask(t_q, t_k, device)
        return causal if mask is None else mask & causal
    return torch.ones(1, 1, t_q, t_k, dtype=torch.bool, device=device) if mask is None else mask


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
                    is_causal: bool = False, dropout_p: float = 0.0, scale: float | None = None) -> torch.Tensor:
    """ALTERNATIVE, for speed: `attention`'s output from PyTorch's fused kernel
    (`F.scaled_dot_product_attention`), which never materialises the (T_q, T_k) weights; the tests
    prove both equal. Causal attention without a mask, the training case, goes to the kernel's own
    causal path, which skips the masked blocks instead of reading a mask."""
    t_q, t_k = q.size(-2), k.size(-2)
    is_causal = is_causal and t_q > 1  # one query aligned to the end sees every key: no mask to build
    if mask is None and (t_q == t_k or not is_causal):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=is_causal, scale=scale)
    if is_causal:
        mask = causal_mask(t_q, t_k, q.device) if mask is None else mask & causal_mask(t_q, t_k, q.device)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)
    return out.masked_fill(~mask.any(-1, keepdim=True), 0.0)  # the kernel gives NaN where a row is all masked


class AttentionCache:
    """The keys and values one attention layer has computed so far, k/v (B, H, T_past, d_k).

    Generating one token at a time, the past tokens' keys and values do not change: they are kept
    here and each step computes only its new token's (self-attention appends them). Cross-attention
    stores the memory's keys/values once, since the memory does not change while decoding.
    """

    def __init__(self):
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """k/v: (B, H, T_new, d_k) -> every key/value so far, (B, H, T_past + T_new, d_k)."""
        if self.k is not None:
            k, v = torch.cat((self.k, k), dim=2), torch.cat((self.v, v), dim=2)
        self.k, self.v = k, v
        return k, v

    def reset(self) -> None:
        """Forget the keys/values (a new sequence starts)."""
        self.k = self.v = None


class MultiHeadAttention(nn.Module):
    """h parallel attention heads over learned projections of Q, K, V, then an output projection.

    The Q/K/V projections live in one (3·d_model, d_model) matrix, the layout of
    `nn.MultiheadAttention`: self-attention does one matmul for all three, cross-attention slices
    it into a query part (applied to the decoder) and a key/value part (applied to the memory).

    Its values pass named points (`model/hooks.py`): `hook_q`, `hook_k`, `hook_v`, `hook_mask`,
    `hook_scores`, `hook_weights`, `hook_heads`, `hook_out`. The weights exist only when someone reads
    or patches one of the mask, the scores or the weights; otherwise PyTorch's fused kernel computes
    the same output.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        d_model = config.d_model  # the config checked d_model % n_head == 0
        self.d_model, self.n_head = d_model, config.n_head
        self.attention_weight_dropout = config.attention_weight_dropout  # the config's rule: its own, else `dropout`
        self.scale = None if config.scale_scores else 1.0  # None: 1/√d_k; 1.0: raw dot products (`training.why`)
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.hook_mask, self.hook_scores, self.hook_weights = HookPoint(), HookPoint(), HookPoint()
        self.hook_heads, self.hook_out = HookPoint(), HookPoint()

    def at(self, point: str, x: torch.Tensor) -> torch.Tensor:
        """The value `x` passing this layer's point `hook_{point}` (read or replaced there, `model.hooks`):
        how `attention` reaches the scores' and the weights' points."""
        return getattr(self, f"hook_{point}")(x)

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
    ) -> torch.Tensor:
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
        q, k, v = self.hook_q(self._split_heads(q)), self.hook_k(k), self.hook_v(v)  # (B, H, T, d_k)
        dropout_p = self.attention_weight_dropout if self.training else 0.0
        if watched(self.hook_mask, self.hook_scores, self.hook_weights):  # the formula, step by step
            mask = full_mask(mask, is_causal, q.size(-2), k.size(-2), q.device)
            out = attention(q, k, v, self.hook_mask(mask), dropout_p, self.at, self.scale)
        else:  # fast: the same numbers from PyTorch's kernel, the weights never materialised
            out = fused_attention(q, k, v, mask, is_causal, dropout_p, self.scale)
        out = self.hook_heads(out)  # (B, H, T, d_k)
        out = out.transpose(1, 2).reshape(B, T, C)  # concat heads: (B, T, C)
        return self.hook_out(self.out_proj(out))
