"""A GPT-style decoder-only language model: token embeddings + sinusoidal positions, a stack of
masked self-attention blocks, and an output projection tied to the input embeddings."""

from dataclasses import dataclass

import torch

from . import fast
from .config import MAX_LAYERS, MAX_POSITIONS, TransformerConfig, bounded
from .embeddings import Embeddings, PositionalEncoding
from .generation import GenerationMixin, KVCache
from .layers import Decoder, attention_maps
from .masks import padding_mask
from .outputs import ModelOutput, head_and_loss
from .pretrained import PreTrainedModel


@dataclass
class DecoderOnlyConfig(TransformerConfig):
    block_size: int = bounded(256, 1, MAX_POSITIONS)  # context length: the most positions the model attends over
    n_layer: int = bounded(4, 1, MAX_LAYERS)
    # trained on text read from its last token to its first (ULMFiT's backward LM, Howard & Ruder 2018,
    # section 3): the model is the same, only its training stream is reversed (`training.tasks.LMTask`).
    # It predicts the token *before* a text, so it is no chat model; its weights start a classifier
    # whose encoder reads reviews backwards (`EncoderDecoderConfig.reverse`), the second half
    # of a forward + backward ensemble.
    reverse: bool = False

    @property
    def max_positions(self) -> int:
        """Rows of the positional table: the context length."""
        return self.block_size

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
        self.embed = Embeddings(c)
        self.pos = PositionalEncoding(c)  # the decoder's input: its points are pos.hook_embed, .hook_pos, .hook_input
        self.decoder = Decoder(c)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None,
        targets: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        output_attentions: bool = False,
        loss_only: bool = False,
        inputs_embeds: torch.Tensor | None = None,
    ) -> ModelOutput:
        """input_ids: (B, T). targets: (B, T) next-token ids aligned with input_ids, -100 = ignore.
        attention_mask: (B, T_past + T) 1 for real tokens, 0 for padding. `loss_only` (with
        targets): return the loss without the (B, T, vocab) logits, which are then never stored.
        `inputs_embeds` (B, T, C), the scaled token embeddings `self.embed(input_ids)`, replaces the
        ids: gradient attributions differentiate with respect to them (`inspection/token_attribution.py`).
        `output_attentions`: every layer's attention weights, read at their named points."""
        with attention_maps(self.decoder, output_attentions) as maps:
            x = self._hidden_states(input_ids, attention_mask, cache, inputs_embeds)
            logits, loss = head_and_loss(self.embed, x, targets, loss_only)
        return ModelOutput(logits, loss, maps if output_attentions else None)

    def _hidden_states(self, input_ids, attention_mask=None, cache: KVCache | None = None, inputs_embeds=None):
        """`forward` before the output projection: the final hidden states (B, T, C)."""
        offset = cache.length if cache is not None else 0
        x = self.pos(self.embed(input_ids) if inputs_embeds is None else inputs_embeds, offset)  # (B, T, C)
        mask = padding_mask(attention_mask) if attention_mask is not None else None
        x = self.decoder(x, tgt_mask=mask, cache=cache.layers if cache is not None else None)
        if cache is not None:
            cache.length += x.size(1)
        return x

    def new_cache(self) -> KVCache:
        return KVCache.empty(self.config.n_layer)

    def generation_window(self) -> int:
        return self.config.block_size

    def next_token_logits(self, tokens: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        """(1, T) tokens of the window so far (T <= block_size: `stream` slides it) -> (1, vocab).

        With a cache only the tokens it has not seen go through the stack. Only the last position
        is projected onto the vocabulary: a prompt's other positions would cost a (T, vocab)
        product (~3 ms of a chat's first token for 12 tokens) that nothing reads."""
        if cache is not None:
            tokens = tokens[:, cache.length:]
            if tokens.size(1) == 1 and fast.can_decode(self):  # fast: the same step without the layers' Python
                return fast.decode_step(self, tokens, cache)
        x = self._hidden_states(tokens, cache=cache)
        return self.embed.logits(x[:, -1])
