"""A GPT-style decoder-only language model: token embeddings + sinusoidal positions, a stack of
masked self-attention blocks, and an output projection tied to the input embeddings."""

from dataclasses import dataclass

import torch

from .config import MAX_LAYERS, MAX_POSITIONS, TransformerConfig, bounded
from .generation import GenerationMixin, KVCache
from .layers import Decoder, Embeddings, PositionalEncoding
from .masks import padding_mask
from .outputs import ModelOutput, head_and_loss
from .pretrained import PreTrainedModel


@dataclass
class DecoderOnlyConfig(TransformerConfig):
    block_size: int = bounded(256, 1, MAX_POSITIONS)  # context length: the most positions the model attends over
    n_layer: int = bounded(4, 1, MAX_LAYERS)

    @property
    def n_decoder_layer(self) -> int:
        """The decoder stack is the whole model."""
        return self.n_layer


class DecoderOnlyLM(PreTrainedModel, GenerationMixin):
    model_type = "decoder_only_lm"
    config_class = DecoderOnlyConfig

    def __init__(self, config: DecoderOnlyConfig):
        super().__init__()
        self.config = c = config
        self.embed = Embeddings(c.vocab_size, c.d_model)
        self.pos = PositionalEncoding(c.d_model, c.block_size, c.dropout)
        self.decoder = Decoder(c)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor,
        targets: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        output_attentions: bool = False,
        loss_only: bool = False,
    ) -> ModelOutput:
        """input_ids: (B, T). targets: (B, T) next-token ids aligned with input_ids, -100 = ignore.
        attention_mask: (B, T_past + T) 1 for real tokens, 0 for padding. `loss_only` (with
        targets): return the loss without the (B, T, vocab) logits, which are then never stored."""
        offset = cache.length if cache is not None else 0
        x = self.pos(self.embed(input_ids), offset)  # (B, T, C)
        mask = padding_mask(attention_mask) if attention_mask is not None else None
        x, maps = self.decoder(x, tgt_mask=mask, cache=cache.layers if cache is not None else None,
                               need_weights=output_attentions)
        if cache is not None:
            cache.length += input_ids.size(1)
        logits, loss = head_and_loss(self.embed, x, targets, loss_only)
        return ModelOutput(logits, loss, maps if output_attentions else None)

    def new_cache(self) -> KVCache:
        return KVCache.empty(self.config.n_layer, capacity=self.config.block_size)

    def generation_window(self) -> int:
        return self.config.block_size

    def next_token_logits(self, tokens: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        """(1, T) tokens of the window so far (T <= block_size: `stream` slides it) -> (1, vocab)."""
        if cache is not None:
            tokens = tokens[:, cache.length:]
        return self(tokens, cache=cache).logits[:, -1]
