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
from .row_linear import row_weight


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
        x, maps = self._hidden_states(input_ids, attention_mask, cache, output_attentions, inputs_embeds)
        logits, loss = head_and_loss(self.embed, x, targets, loss_only)
        return ModelOutput(logits, loss, maps if output_attentions else None)

    def _hidden_states(self, input_ids, attention_mask=None, cache: KVCache | None = None, need_weights=False,
                       inputs_embeds=None):
        """`forward` before the output projection: hidden states (B, T, C), attention maps."""
        offset = cache.length if cache is not None else 0
        x = self.pos(self.embed(input_ids) if inputs_embeds is None else inputs_embeds, offset)  # (B, T, C)
        mask = padding_mask(attention_mask) if attention_mask is not None else None
        x, maps = self.decoder(x, tgt_mask=mask, cache=cache.layers if cache is not None else None,
                               need_weights=need_weights)
        if cache is not None:
            cache.length += x.size(1)
        return x, maps

    def new_cache(self) -> KVCache:
        return KVCache.empty(self.config.n_layer, capacity=self.config.block_size)

    def generation_window(self) -> int:
        return self.config.block_size

    def next_token_logits(self, tokens: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        """(1, T) tokens of the window so far (T <= block_size: `stream` slides it) -> (1, vocab).

        Only the last position is projected onto the vocabulary: a prompt's other positions would
        cost a (T, vocab) product (~3 ms of a chat's first token for 12 tokens) that nothing reads."""
        if cache is not None:
            tokens = tokens[:, cache.length:]
            if tokens.size(1) == 1 and self._plain_decode_step():
                return self._decode_step(tokens, cache)
        x, _ = self._hidden_states(tokens, cache=cache)
        return self.embed.logits(x[:, -1])

    def _plain_decode_step(self) -> bool:
        """Whether `_decode_step` computes what `forward` would: eval mode (dropout is the identity),
        no autograd, no autocast (generation stays float32), pre-norm, and no head knocked out
        (`model.ablation`)."""
        return (not self.training and not torch.is_grad_enabled() and self.config.norm_first
                and not torch.is_autocast_enabled(self.pos.pe.device.type)
                and all(layer.self_attn.head_ablation is None for layer in self.decoder.layers))

    def _decode_step(self, token: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One cached generation step, (1, 1) token -> (1, vocab) logits: the same products as
        `forward`, in the same order and with the same weight layouts (so the same numbers),
        without its per-layer Python: no residual/dropout wrappers, sublayer closures, attention-map
        bookkeeping or module calls, and no module attribute looked up per token (`_DecodeWeights`,
        bound once per stream). At the shipped shape a step is ~4 ms on a busy machine, ~3 of them
        the weights streaming through the products; the layers' Python had added ~2 ms more
        (`benchmarks/generate.py`)."""
        if cache.step is None:
            cache.step = _DecodeWeights.bind(self)
        w, pos = cache.step, cache.length
        C, eps = w.qkv.size(1) // 3, w.eps
        x = F.embedding(token[0], w.embed) * w.scale + w.pe[pos]  # (1, C)
        for (norm_1_w, norm_1_b, qkv_b, qkv_m, out_b, out_m, norm_2_w, norm_2_b, ff_1_b, ff_1_m, ff_2_b, ff_2_m), lc \
                in zip(w.layers, cache.layers, strict=True):
            h = F.layer_norm(x, (C,), norm_1_w, norm_1_b, eps)
            torch.addmm(qkv_b, h, qkv_m, out=w.qkv)  # (1, 3C): q | k | v
            k, v = lc.self_attn.extend(w.kv)  # (1, H, pos + 1, d_k) each
            out = F.scaled_dot_product_attention(w.q, k, v)  # one query sees every key: (1, H, 1, d_k)
            x = x + torch.addmm(out_b, out.view(1, C), out_m)
            h = F.layer_norm(x, (C,), norm_2_w, norm_2_b, eps)
            x = x + torch.addmm(ff_2_b, F.gelu(torch.addmm(ff_1_b, h, ff_1_m)), ff_2_m)
        cache.length += 1
        return torch.mm(F.layer_norm(x, (C,), *w.norm, eps), w.vocab)  # (1, vocab)


@dataclass
class _DecodeWeights:
    """What `DecoderOnlyLM._decode_step` reads, looked up once per stream (the weights do not change
    while it decodes) instead of ~170 module attributes per token. Each product is bound as
    (bias, (in, out) matrix) in the layout `row_linear` gives a single row, the one `forward`
    multiplies by, so `torch.addmm` computes what the layer computes. The Q/K/V product is written
    into one scratch row whose query and key|value views are made here, once (allocating the row
    and making the views at every product was measured 1-3% slower per token); out= products do
    not autocast, which is one reason `_plain_decode_step` refuses autocast."""

    layers: list[tuple[torch.Tensor, ...]]  # per block: norm 1 (w, b), qkv (b, m), out (b, m), norm 2, ff 1, ff 2
    norm: tuple[torch.Tensor, torch.Tensor]  # the final LayerNorm's weight, bias
    eps: float  # every LayerNorm's (`build_norm` makes them all)
    embed: torch.Tensor  # (vocab, C) the token embeddings, whose transpose...
    vocab: torch.Tensor  # (C, vocab) ...is the output projection (tied)
    scale: float  # √C
    pe: torch.Tensor  # (block_size, C)
    qkv: torch.Tensor  # (1, 3C) scratch
    q: torch.Tensor  # (1, H, 1, d_k) view of its query part
    kv: torch.Tensor  # (2, 1, H, 1, d_k) view of its keys and values, as `AttentionCache.extend` takes them

    @classmethod
    def bind(cls, model: DecoderOnlyLM) -> "_DecodeWeights":
        C, H = model.config.d_model, model.config.n_head
        product = lambda linear: (linear.bias, row_weight(linear.weight).t())  # (out,), (in, out)
        layers = []
        for layer in model.decoder.layers:
            attn, ff, (norm_1, norm_2) = layer.self_attn, layer.feed_forward, (s.norm for s in layer.sublayer)
            layers.append((norm_1.weight, norm_1.bias, *product(attn.in_proj), *product(attn.out_proj),
                           norm_2.weight, norm_2.bias, *product(ff.w_1), *product(ff.w_2)))
        norm, lut = model.decoder.norm, model.embed.lut.weight
        qkv = lut.new_empty(1, 3 * C)
        return cls(layers, (norm.weight, norm.bias), norm.eps, lut, row_weight(lut).t(), model.embed.scale,
                   model.pos.pe, qkv, qkv[:, :C].view(1, H, 1, C // H), qkv[:, C:].view(2, 1, H, 1, C // H))
