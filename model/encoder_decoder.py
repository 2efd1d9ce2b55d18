"""The original Transformer: an encoder reads the source, a decoder writes the target one token
at a time while cross-attending to the encoder output (the "memory")."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch

from .config import MAX_LAYERS, MAX_POSITIONS, TransformerConfig, bounded
from .embeddings import Embeddings, PositionalEncoding
from .generation import GenerationMixin, KVCache
from .layers import AttentionMap, Decoder, Encoder, attention_maps
from .masks import padding_mask
from .outputs import ModelOutput, head_and_loss
from .pretrained import PreTrainedModel
from .reading_order import reading_order, reorder, reorder_map


def memory_mask(src_mask: torch.Tensor | None) -> torch.Tensor | None:
    """The model's `src_mask` (B, S), 1 where a source token is real and 0 for padding, as attention
    takes it: (B, 1, 1, S) bool, True where a key may be seen (`padding_mask`). The one place the
    public form becomes the layers' own: the encoder's self-attention and the decoder's
    cross-attention read the same one."""
    return None if src_mask is None else padding_mask(src_mask)


@dataclass
class EncoderDecoderConfig(TransformerConfig):
    """Source and target share one vocabulary and one embedding matrix.

    The architecture only (config.json): what the weights' shapes and the forward pass need. How a
    classifier uses the model (its label words, how it cuts a long review, its temperatures) is the
    classifier's own config, `classifier.ClassifierConfig` (classifier.json beside config.json)."""

    is_encoder_decoder = True
    # fields a config.json written before that split still holds: ignored by `from_pretrained`,
    # which builds the architecture; `classifier.ClassifierConfig.from_pretrained` reads them instead
    moved_to_classifier: ClassVar[tuple[str, ...]] = ("labels", "src_keep_tail", "temperature", "pair_temperature")

    norm_first: bool = False  # the paper's post-norm; True gives pre-norm
    max_src_len: int = bounded(512, 1, MAX_POSITIONS)
    max_tgt_len: int = bounded(64, 1, MAX_POSITIONS)
    n_encoder_layer: int = bounded(4, 1, MAX_LAYERS)
    n_decoder_layer: int = bounded(2, 1, MAX_LAYERS)
    # the encoder keeps a decoder-only LM's causal mask: position t reads tokens <= t only. An encoder
    # started from the LM (`training.transfer`) then begins exactly where the LM stands, instead of
    # reading with a bidirectional mask its weights never saw; the decoder's cross-attention still
    # reads every position of the memory.
    causal_encoder: bool = False
    # the encoder reads each source from its last token to its first (architecture: the weights learned
    # one reading order, and the forward pass reads this field): a classifier started from a
    # backward LM (`DecoderOnlyConfig.reverse`), the other half of ULMFiT's forward + backward ensemble.
    # Only the encoder's reading order changes: its output and attention maps are put back in the
    # source's order (`EncoderDecoder.encode`), so whatever reads them (the decoder, attributions,
    # heatmaps) sees position i as the source's token i, as with a forward encoder.
    reverse: bool = False

    @property
    def max_positions(self) -> int:
        """Rows of the positional table, which source and target share."""
        return max(self.max_src_len, self.max_tgt_len)

    def decoder_input_ids(self, target: Sequence[int]) -> list[int]:
        """What the decoder reads to write `target`: the target shifted right behind the start token."""
        return [self.bos_token_id, *target]


class EncoderDecoder(PreTrainedModel, GenerationMixin):
    model_type = "encoder_decoder"
    config_class = EncoderDecoderConfig

    def __init__(self, config: EncoderDecoderConfig):
        super().__init__()
        self.config = c = config
        self.embed = Embeddings(c)  # one table for both sides, tied to the output projection
        self.src_pos = PositionalEncoding(c)  # the same sinusoids (no weights), each side's input
        self.tgt_pos = PositionalEncoding(c)  # with its own named points
        self.encoder = Encoder(c)
        self.decoder = Decoder(c)
        self.post_init()

    def encode(self, src_ids: torch.Tensor | None, src_mask: torch.Tensor | None = None,
               output_attentions: bool = False, inputs_embeds: torch.Tensor | None = None):
        """src_ids: (B, S), src_mask: (B, S) 1 = real -> memory (B, S, C), and with `output_attentions`
        the encoder's attention maps (else an empty list).

        `inputs_embeds` (B, S, C), the scaled token embeddings `self.embed(src_ids)`, replaces the ids:
        gradient attributions differentiate with respect to them (see `inspection/attribution.py`)."""
        mask = memory_mask(src_mask)
        x = self.embed(src_ids) if inputs_embeds is None else inputs_embeds  # (B, S, C)
        if not self.config.reverse:
            with attention_maps(self.encoder, output_attentions) as maps:
                memory = self.encoder(self.src_pos(x), mask)
            return memory, maps
        order = reading_order(src_mask if src_mask is not None else torch.ones(x.shape[:2], device=x.device))
        with attention_maps(self.encoder, output_attentions) as maps:
            memory = self.encoder(self.src_pos(reorder(x, order)), mask)  # positions count from the end
        return reorder(memory, order), [AttentionMap(m.kind, m.layer, reorder_map(m.weights, order)) for m in maps]

    def decode(self, tgt_ids, memory, src_mask=None, cache: KVCache | None = None, output_attentions=False):
        """tgt_ids: (B, T) -> logits (B, T, vocab), attention maps. Right-padded targets need no
        mask: causality keeps pads from influencing earlier positions, and the loss ignores them."""
        with attention_maps(self.decoder, output_attentions) as maps:
            logits = self.embed.logits(self.decoder_states(tgt_ids, memory, src_mask, cache))
        return logits, maps

    def decoder_states(self, tgt_ids, memory, src_mask=None, cache: KVCache | None = None):
        """`decode` before the output projection: hidden states (B, T, C)."""
        offset = cache.length if cache is not None else 0
        x = self.tgt_pos(self.embed(tgt_ids), offset)
        x = self.decoder(x, memory=memory, memory_mask=memory_mask(src_mask),
                         cache=cache.layers if cache is not None else None)
        if cache is not None:
            cache.length += tgt_ids.size(1)
        return x

    def forward(self, src_ids, tgt_ids, src_mask=None, targets=None, output_attentions=False,
                loss_only=False) -> ModelOutput:
        """targets: (B, T) aligned with tgt_ids (tgt shifted left), -100 = ignore. `loss_only` (with
        targets): return the loss without the (B, T, vocab) logits, which are then never stored."""
        memory, enc_maps = self.encode(src_ids, src_mask, output_attentions)
        with attention_maps(self.decoder, output_attentions) as dec_maps:
            x = self.decoder_states(tgt_ids, memory, src_mask)
            logits, loss = head_and_loss(self.embed, x, targets, loss_only)
        return ModelOutput(logits, loss, enc_maps + dec_maps if output_attentions else None, memory)

    def candidate_scores(self, memory, candidates: list[list[int]], src_mask=None, output_attentions=False):
        """log P(candidate | source) for each candidate target sequence, from an encoded source
        (B, S, C) -> scores (B, K), differentiable (for attributions), and with `output_attentions` the
        decoder's attention maps (else an empty list), weights (B·K, H, width, ·): row b·K + k is
        candidate k of source b, query 0 its first step.

        This is how a text-to-text model classifies: the label whose words the decoder finds most
        likely wins, and a softmax over these scores gives the class probabilities (`classifier/`).
        One decoder pass scores every candidate: each source is repeated once per candidate, and
        shorter candidates are right-padded (causality keeps the padding from reaching their tokens;
        padded positions add nothing to the sum)."""
        c = self.config
        B, K = memory.size(0), len(candidates)
        width = max(len(cand) for cand in candidates) + 1
        tgt_in = torch.tensor([c.decoder_input_ids(cand) + [c.pad_token_id] * (width - 1 - len(cand))
                               for cand in candidates], device=memory.device).repeat(B, 1)  # (B·K, width)
        tgt_out = torch.tensor([[*cand, c.eos_token_id] + [-1] * (width - 1 - len(cand)) for cand in candidates],
                               device=memory.device).repeat(B, 1)  # (B·K, width), -1 = padding
        src_mask = None if src_mask is None else src_mask.repeat_interleave(K, 0)
        logits, maps = self.decode(tgt_in, memory.repeat_interleave(K, 0), src_mask,
                                   output_attentions=output_attentions)
        log_probs = logits.float().log_softmax(-1).gather(-1, tgt_out.clamp(min=0)[..., None]).squeeze(-1)
        return (log_probs * (tgt_out >= 0)).sum(-1).view(B, K), maps

    def new_cache(self) -> KVCache:
        return KVCache.empty(self.config.n_decoder_layer)

    def next_token_logits(self, tokens, cache: KVCache | None, src_ids, src_mask=None) -> torch.Tensor:
        """(1, T) decoder tokens so far -> (1, vocab); the source is encoded once per cache."""
        if cache is None:
            memory, _ = self.encode(src_ids, src_mask)
            x = self.decoder_states(tokens, memory, src_mask)
        else:
            if cache.memory is None:
                cache.memory, _ = self.encode(src_ids, src_mask)
                cache.src_mask = src_mask
            x = self.decoder_states(tokens[:, cache.length:], cache.memory, cache.src_mask, cache=cache)
        return self.embed.logits(x[:, -1])  # the last position only: the others are never read
