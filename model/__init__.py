"""Every Transformer part written from scratch in PyTorch, and the two models built from them.

Read in the order the notebooks teach it (CONTRIBUTING.md names the six files to read first):
`embeddings` (token ids to vectors, positions), `masks` and `attention` (the formula, then
multi-head attention), `layers` (residual + LayerNorm, feed-forward, blocks, stacks), `outputs`
(the logits and the loss), the two models (`decoder_only`, `encoder_decoder`) and `generation`;
`config` is what every layer is built from, `hooks` names every value a forward pass computes (read
or replace any of them with `model.hooks(...)`). `pretrained` saves and loads checkpoints; `precision`
and `device` pick where and in what precision the products run. `fast/` holds the speed, beside
the lesson: the lesson hands work to it at two marked places and reads top to bottom without it.

It reads no text and serves nothing: `tokenization` turns text into ids, `classifier` makes the
encoder-decoder a sentiment classifier (label words, temperatures, the forward + backward verdict),
`inspection` looks inside the trained models, `training` and `demo` use them all.
"""

from .attention import AttentionCache, MultiHeadAttention, fused_attention
from .config import TransformerConfig
from .decoder_only import DecoderOnlyConfig, DecoderOnlyLM
from .device import resolve_device
from .embeddings import Embeddings, PositionalEncoding, sinusoidal_table
from .encoder_decoder import EncoderDecoder, EncoderDecoderConfig
from .generation import GenerationConfig, KVCache, TokenStep, filter_logits, sampling_distribution
from .hooks import POINTS, HookPoint
from .layers import (
    ATTENTION_KINDS,
    AttentionMap,
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    FeedForward,
    SublayerConnection,
    attention_point,
    residual_point,
)
from .masks import causal_mask, causal_padding_mask, padding_mask, subsequent_mask
from .outputs import IGNORE_INDEX, ModelOutput, head_and_loss
from .precision import PRECISIONS, autocast, bf16_native, resolve_precision
from .pretrained import PreTrainedModel, current_fields, current_names, load_pretrained, read_config

__all__ = [
    "ATTENTION_KINDS", "attention_point", "AttentionCache", "AttentionMap", "autocast", "bf16_native", "causal_mask",
    "causal_padding_mask", "current_fields", "current_names", "Decoder", "DecoderLayer", "DecoderOnlyConfig",
    "DecoderOnlyLM", "Embeddings", "Encoder", "EncoderDecoder", "EncoderDecoderConfig", "EncoderLayer", "FeedForward",
    "filter_logits", "fused_attention", "GenerationConfig", "head_and_loss", "HookPoint", "IGNORE_INDEX", "KVCache",
    "load_pretrained", "ModelOutput", "MultiHeadAttention", "padding_mask", "POINTS", "PositionalEncoding",
    "PRECISIONS", "PreTrainedModel", "read_config", "residual_point", "resolve_device", "resolve_precision",
    "sampling_distribution", "sinusoidal_table", "SublayerConnection", "subsequent_mask", "TokenStep",
    "TransformerConfig",
]
