"""The blocks both models stack, in the order a token meets their parts: residual + LayerNorm around
each sublayer, the feed-forward network, then the encoder and decoder layers (blocks) and their
stacks (Vaswani et al., 2017, section 3; the embeddings are `model/embeddings.py`, attention
`model/attention.py`).

Layers are built from the model's config (`FeedForward(config)`, `EncoderLayer(config)`, ...), as
nanoGPT's `Block(config)` and Hugging Face's `GPT2Block(config)` are: a new option is a config field
read where it is used, not one more positional argument threaded through every constructor.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from .attention import AttentionCache, MultiHeadAttention
from .config import TransformerConfig
from .hooks import HookPoint, attach


def build_norm(config: TransformerConfig) -> nn.Module:
    """The one place a normalisation layer is chosen (an RMSNorm variant would be added here);
    `config.layer_norm` False: none, the identity (`training.why`)."""
    return nn.LayerNorm(config.d_model) if config.layer_norm else nn.Identity()


class SublayerConnection(nn.Module):
    """Residual connection around a sublayer, with LayerNorm after (paper) or before (pre-norm).

    Post-norm, `LayerNorm(x + Sublayer(x))`, is the paper's; pre-norm, `x + Sublayer(LayerNorm(x))`,
    keeps an unnormalised residual path and trains more stably in deep or fast-LR settings.
    The `x +` is the residual connection: the gradient reaches every earlier layer through it
    unchanged, whatever the sublayers do (`config.residual` False drops it: `training.why`).
    Named points: `hook_in`, what the sublayer reads, and `hook_resid`, the stream after it.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.norm = build_norm(config)
        self.dropout = nn.Dropout(config.dropout)
        self.norm_first, self.residual = config.norm_first, config.residual
        self.hook_in, self.hook_resid = HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        kept = x if self.residual else 0  # the residual connection: x carried past the sublayer
        if self.norm_first:
            return self.hook_resid(kept + self.dropout(sublayer(self.hook_in(self.norm(x)))))
        return self.hook_resid(self.norm(kept + self.dropout(sublayer(self.hook_in(x)))))


class FeedForward(nn.Module):
    """FFN(x) = W₂ GELU(W₁ x + b₁) + b₂, applied to each position alone: widen to d_ff, bend, narrow
    back. GELU (GPT's) where the paper has ReLU: smooth, so small negative inputs still pass a little.
    Named points: `hook_hidden` (after GELU) and `hook_out`."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.w_1 = nn.Linear(config.d_model, config.d_ff)
        self.activation = nn.GELU()
        self.w_2 = nn.Linear(config.d_ff, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.hook_hidden, self.hook_out = HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.hook_hidden(self.activation(self.w_1(x)))  # (B, T, C) -> (B, T, d_ff)
        return self.hook_out(self.w_2(self.dropout(hidden)))  # -> (B, T, C)


class EncoderLayer(nn.Module):
    """Self-attention over the whole source, then the feed-forward network (none without
    `config.feed_forward`: attention alone, `training.why`)."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(config)
        self.feed_forward = FeedForward(config) if config.feed_forward else None
        self.sublayer = nn.ModuleList(SublayerConnection(config) for _ in range(1 + config.feed_forward))

    def forward(self, x, mask=None, is_causal=False):
        x = self.sublayer[0](x, lambda h: self.self_attn(h, mask=mask, is_causal=is_causal))
        return self.sublayer[1](x, self.feed_forward) if self.feed_forward is not None else x


@dataclass
class LayerCache:
    """What one decoder layer keeps between generation steps."""

    self_attn: AttentionCache = field(default_factory=AttentionCache)
    cross_attn: AttentionCache = field(default_factory=AttentionCache)


class DecoderLayer(nn.Module):
    """Masked self-attention -> cross-attention over the encoder memory -> feed-forward.

    With `cross_attn=False` it is a GPT block (masked self-attention -> feed-forward). The
    mask is what keeps a position from reading the token it is trained to predict (`config.causal`
    False removes it; `config.feed_forward` False, the feed-forward: `training.why`).
    """

    def __init__(self, config: TransformerConfig, cross_attn: bool = True):
        super().__init__()
        c = config
        self.causal = c.causal
        self.self_attn = MultiHeadAttention(c)
        self.cross_attn = MultiHeadAttention(c) if cross_attn else None
        self.feed_forward = FeedForward(c) if c.feed_forward else None
        self.sublayer = nn.ModuleList(SublayerConnection(c) for _ in range(1 + cross_attn + c.feed_forward))

    def forward(self, x, tgt_mask=None, memory=None, memory_mask=None, cache: LayerCache | None = None):
        """x: (B, T, C). `tgt_mask` may be None: causality is applied on its own (`is_causal`).
        `memory_mask` (B, 1, 1, S) bool, True where a memory position is real: the model's `src_mask`
        as attention takes it (`model.encoder_decoder.memory_mask`)."""
        self_cache, cross_cache = (cache.self_attn, cache.cross_attn) if cache is not None else (None, None)
        x = self.sublayer[0](x, lambda h: self.self_attn(h, mask=tgt_mask, is_causal=self.causal, cache=self_cache))
        if self.cross_attn is not None:
            x = self.sublayer[1](x, lambda h: self.cross_attn(h, memory, mask=memory_mask, cache=cross_cache))
        return self.sublayer[-1](x, self.feed_forward) if self.feed_forward is not None else x


@dataclass
class AttentionMap:
    """One layer's attention weights, labelled for display."""

    kind: str  # "encoder_self", "decoder_self" or "cross"
    layer: int
    weights: torch.Tensor  # (B, H, T_q, T_k)


# the attention of each `AttentionMap.kind`: its stack and its module in a layer (`{stack}.layers.{i}.{module}`)
ATTENTION_KINDS = {"encoder_self": ("encoder", "self_attn"), "decoder_self": ("decoder", "self_attn"),
                   "cross": ("decoder", "cross_attn")}


def attention_point(kind: str, layer: int, point: str) -> str:
    """The name of a point of one attention layer: ("cross", 0, "weights") ->
    "decoder.layers.0.cross_attn.hook_weights"."""
    stack, module = ATTENTION_KINDS[kind]
    return f"{stack}.layers.{layer}.{module}.hook_{point}"


def residual_point(model: nn.Module, stack: str, layer: int) -> str:
    """The name of the residual stream after layer `layer` of `stack` ("encoder", "decoder"): its last
    sublayer's `hook_resid` (the feed-forward network's, or the attention's in a model without one)."""
    last = len(model.get_submodule(stack).layers[layer].sublayer) - 1
    return f"{stack}.layers.{layer}.sublayer.{last}.hook_resid"


@contextmanager
def attention_maps(stack: "Encoder | Decoder", wanted: bool = True) -> Iterator[list[AttentionMap]]:
    """Within the block, the attention weights of the layers of `stack` (a model's `encoder` or
    `decoder`) are read at their named points; on leaving it the yielded list holds one
    `AttentionMap` per attention, in the order the stack runs them (empty if not `wanted`)."""
    maps: list[AttentionMap] = []
    if not wanted:
        yield maps
        return
    side = "encoder" if isinstance(stack, Encoder) else "decoder"
    wanted_points = {f"layers.{i}.{module}.hook_weights": AttentionMap(kind, i, None)  # paths within `stack`
                     for i, layer in enumerate(stack.layers) for kind, (kind_stack, module) in ATTENTION_KINDS.items()
                     if kind_stack == side and getattr(layer, module) is not None}
    with attach(stack, read=wanted_points) as seen:
        yield maps
    maps += [AttentionMap(m.kind, m.layer, seen[name]) for name, m in wanted_points.items() if name in seen]


class Encoder(nn.Module):
    """`config.n_encoder_layer` encoder layers; with pre-norm a final norm normalises the last residual stream.

    With `config.causal_encoder` each position attends only to itself and the positions before it,
    as in the decoder-only LM the encoder may start from: its weights then see the text exactly as
    they learned it (see `EncoderDecoderConfig.causal_encoder`)."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layer))
        self.norm = build_norm(config) if config.norm_first else nn.Identity()
        self.hook_norm = HookPoint()
        self.is_causal = config.causal_encoder

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask, self.is_causal)
        return self.hook_norm(self.norm(x))


class Decoder(nn.Module):
    """`config.n_decoder_layer` decoder layers, then a final norm for pre-norm. The layers
    cross-attend to an encoder when the config is an encoder-decoder's; a decoder-only config
    gives a GPT stack."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(config, config.is_encoder_decoder)
                                    for _ in range(config.n_decoder_layer))
        self.norm = build_norm(config) if config.norm_first else nn.Identity()
        self.hook_norm = HookPoint()

    def forward(self, x, tgt_mask=None, memory=None, memory_mask=None, cache: list[LayerCache] | None = None):
        for i, layer in enumerate(self.layers):
            x = layer(x, tgt_mask, memory, memory_mask, cache[i] if cache is not None else None)
        return self.hook_norm(self.norm(x))
