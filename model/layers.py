"""The blocks both models stack, in the order a token meets their parts: residual + LayerNorm around
each sublayer, the feed-forward network, then the encoder and decoder layers (blocks) and their
stacks (Vaswani et al., 2017, section 3; the embeddings are `model/embeddings.py`, attention
`model/attention.py`).

Layers are built from the model's config (`FeedForward(config)`, `EncoderLayer(config)`, ...), as
nanoGPT's `Block(config)` and Hugging Face's `GPT2Block(config)` are: a new option is a config field
read where it is used, not one more positional argument threaded through every constructor.
"""

from dataclasses import dataclass, field

import torch
import torch.nn as nn

from .attention import AttentionCache, MultiHeadAttention
from .config import TransformerConfig


def build_norm(config: TransformerConfig) -> nn.Module:
    """The one place a normalisation layer is chosen (an RMSNorm variant would be added here)."""
    return nn.LayerNorm(config.d_model)


class SublayerConnection(nn.Module):
    """Residual connection around a sublayer, with LayerNorm after (paper) or before (pre-norm).

    Post-norm, `LayerNorm(x + Sublayer(x))`, is the paper's; pre-norm, `x + Sublayer(LayerNorm(x))`,
    keeps an unnormalised residual path and trains more stably in deep or fast-LR settings.
    The sublayer returns `(output, attention weights or None)` so the weights can be kept.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.norm = build_norm(config)
        self.dropout = nn.Dropout(config.dropout)
        self.norm_first = config.norm_first

    def forward(self, x: torch.Tensor, sublayer) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.norm_first:
            out, weights = sublayer(self.norm(x))
            return x + self.dropout(out), weights
        out, weights = sublayer(x)
        return self.norm(x + self.dropout(out)), weights


class FeedForward(nn.Module):
    """FFN(x) = W₂ GELU(W₁ x + b₁) + b₂, applied to each position alone: widen to d_ff, bend, narrow
    back. GELU (GPT's) where the paper has ReLU: smooth, so small negative inputs still pass a little."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.w_1 = nn.Linear(config.d_model, config.d_ff)
        self.activation = nn.GELU()
        self.w_2 = nn.Linear(config.d_ff, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(self.dropout(self.activation(self.w_1(x))))  # (B, T, C) -> (B, T, d_ff) -> (B, T, C)


class EncoderLayer(nn.Module):
    """Self-attention over the whole source, then the feed-forward network."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(config)
        self.feed_forward = FeedForward(config)
        self.sublayer = nn.ModuleList(SublayerConnection(config) for _ in range(2))

    def forward(self, x, mask=None, need_weights=False, is_causal=False):
        x, weights = self.sublayer[0](
            x, lambda h: self.self_attn(h, mask=mask, is_causal=is_causal, need_weights=need_weights))
        x, _ = self.sublayer[1](x, lambda h: (self.feed_forward(h), None))
        return x, weights


@dataclass
class LayerCache:
    """What one decoder layer keeps between generation steps."""

    self_attn: AttentionCache = field(default_factory=AttentionCache)
    cross_attn: AttentionCache = field(default_factory=AttentionCache)


class DecoderLayer(nn.Module):
    """Masked self-attention -> cross-attention over the encoder memory -> feed-forward.

    With `cross_attention=False` it is a GPT block (masked self-attention -> feed-forward).
    """

    def __init__(self, config: TransformerConfig, cross_attention: bool = True):
        super().__init__()
        c = config
        self.self_attn = MultiHeadAttention(c)
        self.src_attn = MultiHeadAttention(c) if cross_attention else None
        self.feed_forward = FeedForward(c)
        self.sublayer = nn.ModuleList(SublayerConnection(c) for _ in range(3 if cross_attention else 2))

    def forward(self, x, tgt_mask=None, memory=None, src_mask=None, cache: LayerCache | None = None,
                need_weights=False):
        """x: (B, T, C). `tgt_mask` may be None: causality is always applied (`is_causal`)."""
        self_cache = cache.self_attn if cache is not None else None
        x, self_w = self.sublayer[0](
            x, lambda h: self.self_attn(h, mask=tgt_mask, is_causal=True, cache=self_cache,
                                        need_weights=need_weights))
        cross_w = None
        if self.src_attn is not None:
            cross_cache = cache.cross_attn if cache is not None else None
            x, cross_w = self.sublayer[1](
                x, lambda h: self.src_attn(h, memory, mask=src_mask, cache=cross_cache,
                                           need_weights=need_weights))
        x, _ = self.sublayer[-1](x, lambda h: (self.feed_forward(h), None))
        return x, self_w, cross_w


@dataclass
class AttentionMap:
    """One layer's attention weights, labelled for display."""

    kind: str  # "encoder_self", "decoder_self" or "cross"
    layer: int
    weights: torch.Tensor  # (B, H, T_q, T_k)


class Encoder(nn.Module):
    """`config.n_encoder_layer` encoder layers; with pre-norm a final norm normalises the last residual stream.

    With `config.causal_encoder` each position attends only to itself and the positions before it,
    as in the decoder-only LM the encoder may start from: its weights then see the text exactly as
    they learned it (see `EncoderDecoderConfig.causal_encoder`)."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layer))
        self.norm = build_norm(config) if config.norm_first else nn.Identity()
        self.is_causal = config.causal_encoder

    def forward(self, x, mask=None, need_weights=False):
        maps = []
        for i, layer in enumerate(self.layers):
            x, w = layer(x, mask, need_weights, self.is_causal)
            if need_weights:
                maps.append(AttentionMap("encoder_self", i, w))
        return self.norm(x), maps


class Decoder(nn.Module):
    """`config.n_decoder_layer` decoder layers, then a final norm for pre-norm. The layers
    cross-attend to an encoder when the config is an encoder-decoder's; a decoder-only config
    gives a GPT stack."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(config, config.is_encoder_decoder)
                                    for _ in range(config.n_decoder_layer))
        self.norm = build_norm(config) if config.norm_first else nn.Identity()

    def forward(self, x, tgt_mask=None, memory=None, src_mask=None,
                cache: list[LayerCache] | None = None, need_weights=False):
        maps = []
        for i, layer in enumerate(self.layers):
            x, self_w, cross_w = layer(x, tgt_mask, memory, src_mask,
                                       cache[i] if cache is not None else None, need_weights)
            if need_weights:
                maps.append(AttentionMap("decoder_self", i, self_w))
                if cross_w is not None:
                    maps.append(AttentionMap("cross", i, cross_w))
        return self.norm(x), maps
