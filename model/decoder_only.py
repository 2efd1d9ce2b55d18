"""A GPT-style decoder-only language model: token embeddings + sinusoidal positions, a stack of
masked self-attention blocks, and an output projection tied to the input embeddings."""

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .config import MAX_LAYERS, MAX_POSITIONS, TransformerConfig, bounded
from .generation import GenerationMixin, KVCache
from .layers import Decoder, Embeddings, PositionalEncoding
from .masks import padding_mask
from .outputs import ModelOutput, head_and_loss
from .pretrained import PreTrainedModel
from .row_linear import row_linear


@dataclass
class DecoderOnlyConfig(TransformerConfig):
    block_size: int = bounded(256, 1, MAX_POSITIONS)  # context length: the most positions the model attends over
    n_layer: int = bounded(4, 1, MAX_LAYERS)

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
        self.pos = PositionalEncoding(c)
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
        ids: gradient attributions differentiate with respect to them (`model/token_attribution.py`)."""
        offset = cache.length if cache is not None else 0
        x = self.pos(self.embed(input_ids) if inputs_embeds is None else inputs_embeds, offset)  # (B, T, C)
        mask = padding_mask(attention_mask) if attention_mask is not None else None
        x, maps = self.decoder(x, tgt_mask=mask, cache=cache.layers if cache is not None else None,
                               need_weights=output_attentions)
        if cache is not None:
            cache.length += x.size(1)
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
            if tokens.size(1) == 1 and self._plain_decode_step():
                return self._decode_step(tokens, cache)
        return self(tokens, cache=cache).logits[:, -1]

    def _plain_decode_step(self) -> bool:
        """Whether `_decode_step` computes what `forward` would: eval mode (dropout is the identity),
        no autograd, pre-norm, and no head knocked out (`model.ablation`)."""
        return (not self.training and not torch.is_grad_enabled() and self.config.norm_first
                and all(layer.self_attn.head_ablation is None for layer in self.decoder.layers))

    def _decode_step(self, token: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One cached generation step, (1, 1) token -> (1, vocab) logits: the same products as
        `forward`, in the same order (so the same numbers), without its per-layer Python: no
        residual/dropout wrappers, no sublayer closures, no attention-map bookkeeping, and the
        weights called directly instead of through `nn.Module.__call__`. A step is ~5 ms at the
        shipped shape, of which that plumbing was a measurable share (`benchmarks/generate.py`)."""
        C, H = self.config.d_model, self.config.n_head
        x = self.embed(token) + self.pos.pe[cache.length]  # (1, 1, C)
        for layer, lc in zip(self.decoder.layers, cache.layers, strict=True):
            attn, ff, (norm_1, norm_2) = layer.self_attn, layer.feed_forward, (s.norm for s in layer.sublayer)
            h = F.layer_norm(x, (C,), norm_1.weight, norm_1.bias, norm_1.eps)
            q, k, v = row_linear(h, attn.in_proj.weight, attn.in_proj.bias).view(1, 1, 3 * H, C // H).split(H, 2)
            k, v = lc.self_attn.append(k.transpose(1, 2), v.transpose(1, 2))  # (1, H, T_past + 1, d_k)
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k, v)  # one query sees every key
            x = x + F.linear(out.reshape(1, 1, C), attn.out_proj.weight, attn.out_proj.bias)
            h = F.layer_norm(x, (C,), norm_2.weight, norm_2.bias, norm_2.eps)
            x = x + F.linear(F.gelu(row_linear(h, ff.w_1.weight, ff.w_1.bias)), ff.w_2.weight, ff.w_2.bias)
        cache.length += 1
        return self.embed.logits(self.decoder.norm(x))[:, -1]  # (1, vocab)
