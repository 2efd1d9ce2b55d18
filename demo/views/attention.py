"""The Attention tab's computation: every layer's and head's attention weights for any text, with
the tokens for both axes (no Gradio here; `demo.tabs.attention` shows them)."""

from dataclasses import dataclass

import numpy as np
import torch

from demo.serving import LM, SENTIMENT, Checkpoint, DemoError, DemoService, read_number, visitor_text
from demo.views.sentiment import NOTHING_LEFT, labels_and_candidates, read_source
from demo.views.tokens import EMPTY_TEXT
from model import AttentionMap
from tokenization import clean_texts, in_word, prompt_ids, token_label, visible

MAX_ATTENTION_TOKENS = 64  # beyond this a heatmap's labels are unreadable


@dataclass(frozen=True)
class AttentionKind:
    checkpoint: str  # LM or SENTIMENT
    map_kind: str  # `AttentionMap.kind`
    layers_field: str  # the config field counting this kind's layers
    title: str
    causal: bool  # True: the upper triangle is masked by construction, not learned


ATTENTION_KINDS = {
    "lm_self": AttentionKind(LM, "decoder_self", "n_layer", "LM self-attention (masked)", True),
    "encoder_self": AttentionKind(SENTIMENT, "encoder_self", "n_encoder_layer", "Encoder self-attention", False),
    "cross": AttentionKind(SENTIMENT, "cross", "n_decoder_layer", "Decoder cross-attention (label → review)", False),
    "decoder_self": AttentionKind(SENTIMENT, "decoder_self", "n_decoder_layer", "Decoder self-attention (masked)",
                                  True),
}


@dataclass
class AttentionResult:
    kind: str
    title: str
    layer: int  # the layer picked for the large heatmap
    n_layers: int
    n_heads: int
    query_tokens: list[str]
    key_tokens: list[str]
    all_weights: np.ndarray  # (L, H, T_q, T_k), rows sum to 1
    causal: bool
    notices: list[str]

    @property
    def weights(self) -> np.ndarray:
        """(H, T_q, T_k): the picked layer's heads."""
        return self.all_weights[self.layer]


def attention_kind(kind: object) -> AttentionKind:
    if not isinstance(kind, str) or kind not in ATTENTION_KINDS:
        raise DemoError(f"Unknown attention kind {kind!r}.")
    return ATTENTION_KINDS[kind]


def attention_kinds(service: DemoService, model_name: str | None = None) -> list[tuple[str, str]]:
    """(label, key) of the attention kinds whose model is loaded (of `model_name` only, when given)."""
    return [(spec.title, key) for key, spec in ATTENTION_KINDS.items()
            if service.checkpoint(spec.checkpoint).ready and model_name in (None, spec.checkpoint)]


def served(service: DemoService, kind: object) -> Checkpoint:
    """The served model whose attention `kind` is."""
    return service.checkpoint(attention_kind(kind).checkpoint)


def attention_shape(ckpt: Checkpoint, kind: str) -> tuple[int, int]:
    """(number of layers, number of heads) for an attention kind."""
    model, _ = ckpt.require()
    return getattr(model.config, attention_kind(kind).layers_field), model.config.n_head


def _lm_maps(ckpt: Checkpoint, text: str, notices: list[str]) -> tuple[list[AttentionMap], list[int], list[int]]:
    """Self-attention maps of `[bos] + text` (`prompt_ids`); queries and keys are the same tokens."""
    model, tok = ckpt.require()
    limit = min(model.config.block_size, MAX_ATTENTION_TOKENS)
    ids = prompt_ids(text, tok)
    if len(ids) == 1:
        raise DemoError(EMPTY_TEXT)
    if len(ids) > limit:
        notices.append(f"The text is {len(ids)} tokens with the start token; the heatmap shows the first {limit}.")
        ids = ids[:limit]
    maps = model(torch.tensor([ids], device=ckpt.device), output_attentions=True).attentions
    return maps, ids, ids


def _sentiment_maps(ckpt: Checkpoint, text: str, notices: list[str]) -> tuple[list[AttentionMap], list[int],
                                                                                list[int], str]:
    """Encoder, cross and decoder maps of one pass; the decoder reads the start token and the
    label the model predicts. Returns the maps, the source ids, the decoder ids and the label."""
    model, tok = ckpt.require()
    limit = min(model.config.max_src_len, MAX_ATTENTION_TOKENS)
    source = read_source(text, tok, ckpt.reading, "text", ckpt.device, limit)
    if not source.text:
        raise DemoError(NOTHING_LEFT if clean_texts([text])[0] else EMPTY_TEXT)
    notices += source.notices  # each says what the heatmap draws and what the model reads
    labels, candidates = labels_and_candidates(ckpt)
    memory, enc_maps = model.encode(source.ids, output_attentions=True)
    best = int(model.candidate_scores(memory, candidates)[0].argmax(-1)[0])
    tgt_ids = model.config.decoder_input_ids(candidates[best])
    _, dec_maps = model.decode(torch.tensor([tgt_ids], device=source.ids.device), memory, output_attentions=True)
    return enc_maps + dec_maps, source.ids[0].tolist(), tgt_ids, labels[best]


def _labels(tok, ids: list[int], whole_words: bool) -> list[str]:
    """Axis labels: each token as it reads, the decoder's label pieces inside their word ("[p]ositive",
    `in_word`): the decoder reads the label word, which BPE cuts into pieces such as "p", "os"."""
    labels = [token_label(tok, i) for i in ids]
    if whole_words:
        labels = [in_word(labels, k) for k in range(len(labels))]
    return [visible(label, show_spaces=True) for label in labels]


def attention_maps(ckpt: Checkpoint, text: object, kind: str = "lm_self", layer: object = 0) -> AttentionResult:
    """All layers' and heads' attention weights of one kind, with the tokens for both axes."""
    spec = attention_kind(kind)
    n_layers, n_heads = attention_shape(ckpt, kind)
    _, tok = ckpt.require()
    text, notices = visitor_text(text)  # `_lm_maps` and `_sentiment_maps` read it as their model does
    layer_i = int(round(read_number(layer, 0)))
    if not 0 <= layer_i < n_layers:
        notices.append(f"Layer {layer_i} does not exist (0 to {n_layers - 1}): showing the nearest.")
        layer_i = min(max(layer_i, 0), n_layers - 1)

    with torch.inference_mode():
        if spec.checkpoint == LM:
            maps, query_ids, key_ids = _lm_maps(ckpt, text, notices)
        else:
            maps, src_ids, tgt_ids, label = _sentiment_maps(ckpt, text, notices)
            if kind != "encoder_self":
                pieces = [token_label(tok, i) for i in tgt_ids[1:]]
                notices.append(f"The decoder reads the start token, then the label it writes, “{label}”"
                               + (f", which is {len(pieces)} tokens to it ({', '.join(pieces)}): each row marks its "
                                  f"token inside the word, as in {in_word(pieces, 0)}." if len(pieces) > 1 else "."))
            query_ids = src_ids if kind == "encoder_self" else tgt_ids
            key_ids = tgt_ids if kind == "decoder_self" else src_ids
        chosen = sorted((m for m in maps if m.kind == spec.map_kind), key=lambda m: m.layer)
        weights = torch.stack([m.weights[0] for m in chosen]).float().cpu().numpy()  # (L, H, T_q, T_k)

    # a classifier whose encoder keeps the LM's causal mask (`causal_encoder`) masks its encoder map too
    causal = spec.causal or kind == "encoder_self" and getattr(ckpt.model.config, "causal_encoder", False)
    return AttentionResult(
        kind=kind, title=spec.title + (" (masked)" if causal and not spec.causal else ""), layer=layer_i,
        n_layers=n_layers, n_heads=n_heads,
        query_tokens=_labels(tok, query_ids, whole_words=kind in ("cross", "decoder_self")),
        key_tokens=_labels(tok, key_ids, whole_words=kind == "decoder_self"),
        all_weights=weights, causal=causal, notices=notices)


def attention_view(service: DemoService, text: object, kind: str = "lm_self", layer: object = 0) -> AttentionResult:
    """`attention_maps` of the served model `kind` belongs to, as one batched pass of the budget."""
    ckpt = served(service, kind)
    with service.compute(batched=True):
        return attention_maps(ckpt, text, kind, layer)
