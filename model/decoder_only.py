"""A GPT-style decoder-only language model: token embeddings + sinusoidal positions, a stack of
masked self-attention blocks, and an output projection tied to the input embeddings."""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .generation import GenerationMixin, KVCache
from .layers import AttentionMap, Decoder, Embeddings, PositionalEncoding
from .masks import padding_mask
from .pretrained import PreTrainedModel


@dataclass
class DecoderOnlyConfig:
    vocab_size: int = 8192
    block_size: int = 256  # context length: the most positions the model attends over
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 256
    d_ff: int = 1024
    dropout: float = 0.1
    norm_first: bool = True  # pre-norm (GPT-2); False gives the paper's post-norm
    pad_token_id: int = 0
    bos_token_id: int = 1
    eos_token_id: int = 2


@dataclass
class ModelOutput:
    logits: torch.Tensor  # (B, T, vocab)
    loss: torch.Tensor | None = None
    attentions: list[AttentionMap] | None = None


def init_weights(module: nn.Module) -> None:
    """GPT-2 style: N(0, 0.02) for linear and embedding weights, zero biases."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class DecoderOnlyLM(PreTrainedModel, GenerationMixin):
    model_type = "decoder_only_lm"
    config_class = DecoderOnlyConfig

    def __init__(self, config: DecoderOnlyConfig):
        super().__init__()
        self.config = c = config
        self.embed = Embeddings(c.vocab_size, c.d_model)
        self.pos = PositionalEncoding(c.d_model, c.block_size, c.dropout)
        self.decoder = Decoder(c.n_layer, c.d_model, c.n_head, c.d_ff, c.dropout, c.norm_first,
                               cross_attention=False)
        self.apply(init_weights)

    def forward(
        self,
        input_ids: torch.Tensor,
        targets: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        output_attentions: bool = False,
    ) -> ModelOutput:
        """input_ids: (B, T). targets: (B, T) next-token ids aligned with input_ids, -100 = ignore.
        attention_mask: (B, T_past + T) 1 for real tokens, 0 for padding."""
        offset = cache.length if cache is not None else 0
        x = self.pos(self.embed(input_ids), offset)  # (B, T, C)
        mask = padding_mask(attention_mask) if attention_mask is not None else None
        x, maps = self.decoder(x, tgt_mask=mask, cache=cache.layers if cache is not None else None,
                               need_weights=output_attentions)
        if cache is not None:
            cache.length += input_ids.size(1)
        logits = self.embed.logits(x)  # (B, T, vocab)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)
        return ModelOutput(logits, loss, maps if output_attentions else None)

    def new_cache(self) -> KVCache:
        return KVCache.empty(self.config.n_layer)

    def next_token_logits(self, tokens: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        """(1, T) tokens so far -> (1, vocab). Past the context, keep the last block_size tokens
        (and rebuild the cache, whose positions would otherwise run off the end)."""
        if tokens.size(1) > self.config.block_size:
            tokens = tokens[:, -self.config.block_size:]
            if cache is not None:
                cache.reset()
        if cache is not None:
            tokens = tokens[:, cache.length:]
        return self(tokens, cache=cache).logits[:, -1]
