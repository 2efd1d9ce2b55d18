"""The classifier's experiments, keyed by the sentiment tour's step ids (`CLASSIFIER_EXPERIMENTS`):
each a patch of named points on the visitor's review, P(label) before and after."""

import math
from collections.abc import Callable

import torch

from classifier import Reader
from inspection.experiments.common import Outcome, Run, Unavailable, entropy
from model import DecoderOnlyLM, attention_point


def _layers(model) -> int:
    return model.config.n_decoder_layer if isinstance(model, DecoderOnlyLM) else model.config.n_encoder_layer


def _by_label(reader: Reader, probs: torch.Tensor) -> dict[str, float]:
    """P(label) (K,) as the outcome shows it: label -> probability, 4 decimals."""
    return dict(zip(reader.labels, [round(float(p), 4) for p in probs], strict=True))


def _labels(r: Run, patch=None, reader: Reader | None = None) -> dict[str, float]:
    reader = reader or r.reader
    with torch.inference_mode(), reader.model.hooks(patch=patch or {}):
        probs = reader.read(r.ids)[0].exp()
    return _by_label(reader, probs)


def _label_outcome(r: Run, change: str, patch: dict, why: str | Callable[[float], str]) -> Outcome:
    """P(label) with and without `patch`; `why` the verdict's end, or a function of the change of
    the top label's probability that writes it."""
    before, after = _labels(r), _labels(r, patch)
    top = max(before, key=before.get)
    shift = after[top] - before[top]
    why = why(shift) if callable(why) else why
    verdict = (f"P({top}) goes from {before[top]:.3f} to {after[top]:.3f} ({shift:+.3f})"
               f"{'; the label flips to ' + max(after, key=after.get) if max(after, key=after.get) != top else ''}: "
               f"{why}")
    return Outcome(change, before, after, verdict, {f"p_{top}": (before[top], after[top])})


def _cross_blocked(r: Run, blocked: torch.Tensor) -> dict:
    """Patch every cross-attention mask so that no decoder step sees the source positions `blocked` (S,)."""
    def block(mask):
        return mask & ~blocked.to(mask.device)
    return {attention_point("cross", i, "mask"): block for i in range(r.model.config.n_decoder_layer)}


def cls_positions(r: Run) -> Outcome:
    return _label_outcome(r, "the encoder gets no positional encoding", {"encoder.pos": torch.zeros_like},
                          "the classifier reads word order too (\"not good\" is not \"good, not\").")


def cls_scaling(r: Run) -> Outcome:
    i = min(r.layer, _layers(r.model) - 1)
    d_k = r.model.config.d_model // r.model.config.n_head
    patch = {attention_point("encoder_self", i, "scores"): lambda s: s * math.sqrt(d_k)}
    weights = attention_point("encoder_self", i, "weights")
    spread = []
    for p in ({}, patch):
        with torch.inference_mode(), r.model.hooks(read=[weights], patch=p) as seen:
            r.reader.read(r.ids)
        spread.append(entropy(seen[weights]))
    outcome = _label_outcome(r, f"the encoder's layer {i + 1} scores are not divided by √d_k = {math.sqrt(d_k):.1f}",
                             patch, f"the attention entropy falls from {spread[0]:.2f} to {spread[1]:.2f} nats, "
                                    "the softmax closer to one token per row.")
    outcome.measures["entropy"] = tuple(spread)
    return outcome


def cls_qkv(r: Run) -> Outcome:
    i, h = min(r.layer, _layers(r.model) - 1), r.head

    def no_query(q):
        q = q.clone()
        q[:, h] = 0
        return q

    return _label_outcome(r, f"head {h + 1} of the encoder's layer {i + 1} gets no query (q = 0): it attends "
                             "evenly to every token it may see",
                          {attention_point("encoder_self", i, "q"): no_query},
                          "the query is how each token chooses what to read; without it the head only averages.")


def cls_softmax(r: Run) -> Outcome:
    i = min(r.layer, _layers(r.model) - 1)

    def hard(w):
        return torch.nn.functional.one_hot(w.argmax(-1), w.size(-1)).to(w.dtype)

    return _label_outcome(r, f"the encoder's layer {i + 1} softmax becomes a hard choice: all weight on each row's "
                             "best key", {attention_point("encoder_self", i, "weights"): hard},
                          "a smooth softmax mixes several tokens, and only a smooth one can be trained by gradients.")


def cls_padding(r: Run) -> Outcome:
    """The review with pad tokens after it, as a batch holds it: read with the padding mask, then with
    the mask removed (every encoder and cross-attention may read the padding)."""
    pad = r.model.config.pad_token_id
    ids = torch.cat([r.ids, torch.full((1, 2), pad, device=r.ids.device)], 1)
    mask = torch.ones_like(ids)
    mask[0, -2:] = 0
    c = r.model.config
    patch = {attention_point(kind, i, "mask"): torch.ones_like
             for kind, n in (("encoder_self", c.n_encoder_layer), ("cross", c.n_decoder_layer)) for i in range(n)}

    def read(p):
        with torch.inference_mode(), r.model.hooks(patch=p):
            probs = r.reader.read(ids, mask)[0].exp()
        return _by_label(r.reader, probs)

    before, after = read({}), read(patch)
    top = max(before, key=before.get)
    verdict = (f"With the padding mask P({top}) is {before[top]:.3f}, as for the review alone ({_labels(r)[top]:.3f}); "
               f"with the padding read it is {after[top]:.3f}: the mask is what keeps the pad tokens a batch adds "
               "from changing a review's verdict.")
    return Outcome("the padding mask is removed: attention may read the 2 pad tokens after the review", before, after,
                   verdict, {f"p_{top}": (before[top], after[top])})


def cls_cross(r: Run) -> Outcome:
    """Cross-attention blocked from the source token the label step attends to most."""
    with torch.inference_mode(), r.model.hooks(read=[attention_point("cross", i, "weights")
                                                     for i in range(r.model.config.n_decoder_layer)]) as seen:
        r.reader.read(r.ids)
    first_step = torch.stack([w[:, :, 0, :] for w in seen.values()]).float().mean((0, 1, 2))  # (S,) over K candidates
    top = int(first_step.argmax())
    blocked = torch.zeros(r.ids.size(1), dtype=torch.bool)
    blocked[top] = True
    word = r.label(int(r.ids[0, top]))
    return _label_outcome(r, f"the decoder may not look at “{word}” (position {top + 1}), the review token its "
                             f"first step attends to most ({float(first_step[top]):.0%} of its attention)",
                          _cross_blocked(r, blocked),
                          "cross-attention is the decoder's only way to read the review: what it cannot see "
                          "cannot move the label.")


def cls_end_token(r: Run) -> Outcome:
    last = r.ids.size(1) - 1
    blocked = torch.zeros(r.ids.size(1), dtype=torch.bool)
    blocked[last] = True
    causal = bool(r.model.config.causal_encoder)
    where = ("in this causal encoder `</s>` is the one position that has read the whole review"
             if causal else "every position of this encoder has read the whole review, `</s>` included")

    def why(shift: float) -> str:
        if abs(shift) < 0.02:
            return (f"{where}, yet the label barely moves: the decoder does not rely on one summary position, it "
                    "reads the review's words themselves.")
        return f"{where}, and the decoder leans on it for its summary."

    return _label_outcome(r, "the decoder may not look at the end token `</s>`", _cross_blocked(r, blocked), why)


def cls_reading_order(r: Run) -> Outcome:
    if r.backward is None:
        raise Unavailable("no backward reader is served: nothing to compare the reading order with")
    before, after = _labels(r), _labels(r, reader=r.backward)
    top = max(before, key=before.get)
    verdict = (f"Read right to left, P({top}) is {after[top]:.3f} instead of {before[top]:.3f}: two readers that see "
               "the text in opposite orders make different mistakes, which is why the app averages them.")
    return Outcome("the same review read by the backward reader (last token first)", before, after, verdict,
                   {f"p_{top}": (before[top], after[top])})


def cls_label(r: Run) -> Outcome:
    t = r.reader.temperature
    with torch.inference_mode():
        scores = r.model.candidate_scores(r.reader.encode(r.ids)[0], r.reader.candidates)[0].float()
    raw = _by_label(r.reader, scores.softmax(-1))
    fitted = _labels(r)
    top = max(fitted, key=fitted.get)
    verdict = (f"At temperature 1 P({top}) would be {raw[top]:.3f}; at the fitted {t:.2f} it is {fitted[top]:.3f}: "
               "the same label, with a confidence that matches how often the classifier is right on held-out reviews.")
    return Outcome(f"the label scores softmaxed at temperature 1 instead of the fitted {t:.2f}", fitted, raw, verdict,
                   {f"p_{top}": (fitted[top], raw[top])})


CLASSIFIER_EXPERIMENTS: dict[str, Callable[[Run], Outcome]] = {
    "source_tokens": cls_reading_order, "source_embedding": cls_positions, "qkv": cls_qkv, "scaling": cls_scaling,
    "padding_mask": cls_padding, "softmax": cls_softmax, "memory": cls_end_token, "cross": cls_cross,
    "label": cls_label,
}


def classifier_experiment(step: str, reader: Reader, ids: torch.Tensor, layer: int = 0, head: int = 0,
                          backward: Reader | None = None) -> Outcome:
    """The experiment of the sentiment tour's `step` on a review's ids (1, S)."""
    return CLASSIFIER_EXPERIMENTS[step](Run(reader.model, reader.tokenizer, ids, layer, head, reader, backward))
