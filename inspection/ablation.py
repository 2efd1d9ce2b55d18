"""Knock attention heads out and watch the prediction change: a causal test of what a head does.

An attention map says where a head looks, not whether what it brings matters (Jain & Wallace,
2019). Ablation asks the second question: the head's output, its (T, d_k) slice of the
concatenated heads just before the output projection, is replaced, and the prediction is read
again. Two replacements, `MODES`:

- `zero`: the head writes nothing, as if it were not there (the output projection's bias stays).
- `mean`: at each position the head writes its mean output over the positions of this input, so
  what it always writes stays and what it writes for this text goes. Where the queries are causal
  (the decoder side, a causal encoder) the mean runs over the positions up to each one, so no
  position reads the future. Over the input rather than a reference corpus: no data set to ship.

    from inspection import Head, ablate, classifier_head_effects
    with ablate(model, [Head("encoder_self", 2, 4)], "zero"):       # any forward pass in here
        memory, _ = model.encode(src_ids)
    effects = classifier_head_effects(model, src_ids, candidates, label)  # every head, one by one

A head's output is the named point `{stack}.{layer}.{attn|cross}.heads` (`model/hooks.py`), which
the ablation patches: only the passes of the thread (context) that entered `ablate` see it.

Ranking every head costs one pass per head, but a head in layer l changes nothing below it: the
hidden states entering each layer are computed once, and the n_head ablations of a layer run as
one batch from that layer up (a batch row per head), so on average about half the stack is
recomputed per head. The classifier's decoder heads see an encoder output that does not change:
only its one-token decoder step is re-run for them.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from classifier import Reader
from model import DecoderOnlyLM, EncoderDecoder, MultiHeadAttention, attention_point

MODES = ("zero", "mean")


@dataclass(frozen=True, order=True)
class Head:
    """One attention head: the kind of attention (`AttentionMap.kind`), its layer and its index, from 0."""

    kind: str
    layer: int
    head: int


@dataclass
class HeadEffects:
    """The probability a model gives its prediction, and the same with each head knocked out alone."""

    base: float  # P(label) or P(next token) with every head in place
    ablated: dict[Head, float]  # head -> the probability with that head ablated

    def deltas(self) -> dict[Head, float]:
        """head -> change of the probability (negative: the head was helping the prediction)."""
        return {head: p - self.base for head, p in self.ablated.items()}


class HeadMask:
    """The patch applied to one attention layer's heads' outputs (B, H, T, d_k), the point
    `…heads`, before the output projection.

    `keep` (H,) or (B, H), True = untouched: one row per batch row lets one batched pass ablate a
    different head in each row. Untouched heads pass through `torch.where` bit for bit."""

    def __init__(self, keep: torch.Tensor, mode: str, causal: bool):
        if mode not in MODES:
            raise ValueError(f"unknown ablation mode {mode!r}; choose one of {', '.join(MODES)}")
        self.keep, self.mode, self.causal = keep, mode, causal

    def __call__(self, out: torch.Tensor) -> torch.Tensor:
        keep = self.keep.to(out.device).view(-1, out.size(1), 1, 1)  # (B or 1, H, 1, 1)
        if self.mode == "zero":
            return torch.where(keep, out, torch.zeros((), dtype=out.dtype, device=out.device))
        if self.causal:  # position t: the mean of positions 0..t
            steps = torch.arange(1, out.size(2) + 1, device=out.device, dtype=out.dtype)[:, None]
            mean = out.cumsum(2) / steps
        else:
            mean = out.mean(2, keepdim=True)
        return torch.where(keep, out, mean)


def attention_layers(model: DecoderOnlyLM | EncoderDecoder) -> dict[tuple[str, int], MultiHeadAttention]:
    """Every attention module of the model by (kind, layer), in the order the model runs them."""
    layers: dict[tuple[str, int], MultiHeadAttention] = {}
    if isinstance(model, EncoderDecoder):
        layers |= {("encoder_self", i): layer.self_attn for i, layer in enumerate(model.encoder.layers)}
    for i, layer in enumerate(model.decoder.layers):
        layers[("decoder_self", i)] = layer.self_attn
        if layer.cross_attn is not None:
            layers[("cross", i)] = layer.cross_attn
    return layers


def all_heads(model: DecoderOnlyLM | EncoderDecoder) -> list[Head]:
    """Every head of the model, layer by layer in the order the model runs them."""
    return [Head(kind, layer, h) for (kind, layer), attn in attention_layers(model).items()
            for h in range(attn.n_head)]


def _causal(model, kind: str) -> bool:
    """Whether this kind's queries are causal (every decoder-side query is; an encoder's may be)."""
    return kind != "encoder_self" or bool(getattr(model.config, "causal_encoder", False))


def ablate(model: DecoderOnlyLM | EncoderDecoder, heads: Iterable[Head], mode: str = "zero"):
    """Within the block (`with ablate(...):`), this context's forward passes of `model` run with
    `heads` knocked out: a patch of each affected layer's `…heads` point.

    For whole-sequence passes (the mean of `mode="mean"` needs every position), not KV-cached
    generation. No heads: the model is untouched."""
    layers = attention_layers(model)
    keep = {key: torch.ones(attn.n_head, dtype=torch.bool) for key, attn in layers.items()}
    for head in heads:
        key = (head.kind, head.layer)
        if key not in layers or not 0 <= head.head < layers[key].n_head:
            raise ValueError(f"the model has no head {head}")
        keep[key][head.head] = False
    return model.hooks(patch={attention_point(kind, layer, "heads"): HeadMask(k, mode, _causal(model, kind))
                              for (kind, layer), k in keep.items() if not k.all()})


def _stack_effects(model, layers, kind: str, causal: bool, run: Callable, x: torch.Tensor, score: Callable,
                   mode: str) -> tuple[HeadEffects, torch.Tensor]:
    """Each head of a layer stack ablated alone. `run(layer, x)` is one layer on hidden states
    (B, T, C); `score(x)` reads the probability (B,) from the stack's output. Returns the effects
    and the stack's output (1, T, C) with every head in place."""
    inputs = []
    for layer in layers:
        inputs.append(x)
        x = run(layer, x)
    effects = HeadEffects(float(score(x)[0]), {})
    for i, layer in enumerate(layers):
        n_head = layer.self_attn.n_head
        h = inputs[i].expand(n_head, -1, -1)  # (H, T, C): row j ablates head j
        mask = HeadMask(~torch.eye(n_head, dtype=torch.bool), mode, causal)
        with model.hooks(patch={attention_point(kind, i, "heads"): mask}):
            h = run(layer, h)
        for later in layers[i + 1:]:
            h = run(later, h)
        effects.ablated |= {Head(kind, i, j): p for j, p in enumerate(score(h).tolist())}
    return effects, x


@torch.inference_mode()
def lm_head_effects(model: DecoderOnlyLM, input_ids: torch.Tensor, token: int, mode: str = "zero") -> HeadEffects:
    """P(token | input_ids) as the next token, with every head in place and with each one ablated.
    input_ids: (1, T), at most the model's block size."""
    def score(x):  # (B, T, C) -> (B,)
        return model.embed.logits(model.decoder.norm(x[:, -1])).float().softmax(-1)[:, token]

    x = model.pos(model.embed(input_ids))  # (1, T, C)
    return _stack_effects(model, model.decoder.layers, "decoder_self", True, lambda layer, h: layer(h), x, score,
                          mode)[0]


@torch.inference_mode()
def classifier_head_effects(model: EncoderDecoder | Reader, src_ids: torch.Tensor, candidates: list[list[int]],
                            label: int, mode: str = "zero") -> HeadEffects:
    """P(label | source) among the candidate labels (as the classifier gives it, `classifier.Reader`:
    pass one to read at its temperature), with every head in place and with each one ablated.
    src_ids: (1, S), one unpadded source."""
    reader = model if isinstance(model, Reader) else Reader(model)
    model = reader.model
    encoder = model.encoder

    def score(x):  # encoder output (B, S, C) -> (B,)
        return reader.log_probs(encoder.norm(x), candidates)[:, label].exp()

    x = model.src_pos(model.embed(src_ids))
    effects, x = _stack_effects(model, encoder.layers, "encoder_self", encoder.is_causal,
                                lambda layer, h: layer(h, None, encoder.is_causal), x, score, mode)
    memory = encoder.norm(x)  # unchanged by the decoder's heads: each of them re-runs the decoder only
    for head in all_heads(model):
        if head.kind != "encoder_self":
            with ablate(model, [head], mode):
                effects.ablated[head] = float(reader.log_probs(memory, candidates)[0, label].exp())
    return effects
