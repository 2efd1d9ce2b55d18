"""Every Transformer part written from scratch in PyTorch, and the two models built from them.

Owns: the layers (`attention`, `layers`, built from a `TransformerConfig`), the models and their
checkpoints (`decoder_only`, `encoder_decoder`, `pretrained`), decoding (`generation`), numerics
(`precision`, `row_linear`, `cross_entropy`), and the ways to look inside a trained model:
attribution methods (the `ATTRIBUTIONS` registry), their faithfulness metrics, head ablation and
the logit lens. It reads no data and serves nothing: `training` and `demo` use it.
"""

from .ablation import Head, HeadEffects, ablate, all_heads, classifier_head_effects, lm_head_effects
from .attention import AttentionCache, MultiHeadAttention, scaled_dot_product_attention
from .attribution import ATTRIBUTIONS, DESCRIPTIONS, METHODS, Attribution, attribute, attribute_methods
from .config import TransformerConfig
from .decoder_only import DecoderOnlyConfig, DecoderOnlyLM
from .device import resolve_device
from .encoder_decoder import EncoderDecoder, EncoderDecoderConfig
from .faithfulness import ERASER_FRACTIONS, erase, faithfulness, rank_correlation, top_count
from .generation import GenerationConfig, KVCache, TokenStep, filter_logits, sampling_distribution
from .layers import (
    AttentionMap,
    Decoder,
    DecoderLayer,
    Embeddings,
    Encoder,
    EncoderLayer,
    FeedForward,
    PositionalEncoding,
    SublayerConnection,
    sinusoidal_table,
)
from .logit_lens import LogitLens, layer_log_probs, logit_lens
from .masks import causal_padding_mask, padding_mask, subsequent_mask
from .outputs import IGNORE_INDEX, ModelOutput, head_and_loss
from .precision import PRECISIONS, autocast, bf16_native, resolve_precision
from .pretrained import PreTrainedModel, load_pretrained, read_config
from .token_attribution import TokenAttribution, attribute_token, token_faithfulness

__all__ = [
    "Head", "HeadEffects", "ablate", "all_heads", "classifier_head_effects", "lm_head_effects",
    "ATTRIBUTIONS", "DESCRIPTIONS", "METHODS", "Attribution", "attribute", "attribute_methods",
    "ERASER_FRACTIONS", "erase", "faithfulness", "rank_correlation", "top_count", "TokenAttribution", "attribute_token",
    "token_faithfulness",
    "LogitLens", "layer_log_probs", "logit_lens",
    "AttentionCache", "AttentionMap", "Decoder", "DecoderLayer", "DecoderOnlyConfig", "DecoderOnlyLM",
    "Embeddings", "Encoder", "EncoderDecoder", "EncoderDecoderConfig", "EncoderLayer", "FeedForward",
    "GenerationConfig", "IGNORE_INDEX", "KVCache", "ModelOutput", "MultiHeadAttention", "PositionalEncoding",
    "PRECISIONS", "PreTrainedModel", "SublayerConnection", "TokenStep", "TransformerConfig",
    "autocast", "bf16_native", "head_and_loss", "resolve_precision",
    "causal_padding_mask", "filter_logits", "sampling_distribution", "load_pretrained", "padding_mask",
    "read_config", "resolve_device",
    "scaled_dot_product_attention", "sinusoidal_table", "subsequent_mask",
]
