"""The classifier's experiments, keyed by the sentiment tour's step ids (`CLASSIFIER_EXPERIMENTS`):
each a patch of named points on the visitor's review, P(label) before and after, and its effect on
the label the classifier predicts (`common.effect` on −log P(label): "worse" when the patch makes it
less sure of that label). What a step is for is said only when the effect shows it ("worse")."""

import math
from collections.abc import Callable

import torch

from classifier import Reader
from inspection.experiments.common import Outcome, Run, effect, entropy, moves
from model import DecoderOnlyLM, attention_point

# what the verdict says when the label's probability does not show what the step is for
NOT_SHOWN = {"better": "Without it the classifier is even more sure of its label: this review does not show what "
                       "the step is for (try another).",
             "no change": "This review does not show what the step is for (try another)."}


def _layers(model) -> int:
    return model.config.n_decoder_layer if isinstance(model, DecoderOnlyLM) else model.config.n_encoder_layer


def _by_label(reader: Reader, probs: torch.Tensor) -> dict[str, float]:
    """P(label) (K,) as the outcome shows it: label -> probability, 4 decimals."""
    return dict(zip(reader.labels, [round(float(p), 4) for p in probs], strict=True))


def _probabilities(reader: Reader, ids: torch.Tensor, patch=None, mask=None) -> torch.Tensor:
    with torch.inference_mode(), reader.model.hooks(patch=patch or {}):
        return reader.read(ids, mask)[0].double().exp()


def _labels(r: Run, patch=None, reader: Reader | None = None) -> dict[str, float]:
    return _by_label(reader or r.reader, _probabilities(reader or r.reader, r.ids, patch))


def outcome_of(r: Run, change: str, before: torch.Tensor, after: torch.Tensor, said: str, worse: str,
               measures: dict | None = None, judged: bool = True, always: bool = False) -> Outcome:
    """The outcome from P(label) before and after (K,): the verdict says how the predicted label's
    probability moved, its effect, what was measured (`said`) and what the step is for (`worse`) when
    the effect shows it (`judged`: False where nothing is switched off, a comparison: no why at all;
    `always`: `worse` is true whatever the effect, as a guarantee the step gives every review)."""
    labels = r.reader.labels
    top = int(before.argmax())
    name = labels[top]
    loss = (float(-before[top].log()), float(-after[top].log()))
    flipped = int(after.argmax()) != top
    moved_p = moves(float(before[top]), float(after[top]), "", 3)
    sure = {"worse": f"it is less sure of {name}", "better": f"it is more sure of {name}",
            "no change": f"it is about as sure of {name} as before (−log P({name}) moves by "
                         f"{abs(loss[1] - loss[0]):.3f} nats, within 0.01)"}[effect(*loss)]
    verdict = (f"P({name}), the label the classifier gives your review, {moved_p}"
               f"{f' and the label flips to {labels[int(after.argmax())]}' if flipped else ''}: {sure}.")
    why = "" if not judged else worse if always or effect(*loss) == "worse" else NOT_SHOWN[effect(*loss)]
    verdict = " ".join(part for part in (verdict, said, why) if part)
    return Outcome(change, _by_label(r.reader, before), _by_label(r.reader, after), verdict,
                   {f"p_{name}": (float(before[top]), float(after[top])), **(measures or {})}, loss[0], loss[1],
                   position=f"P(label) after the whole review: the effect is for {name}, the label it gives",
                   label=name)


def _label_outcome(r: Run, change: str, patch: dict, said: str, worse: str, measures: dict | None = None) -> Outcome:
    """P(label) with and without `patch`."""
    return outcome_of(r, change, _probabilities(r.reader, r.ids), _probabilities(r.reader, r.ids, patch), said,
                      worse, measures)


def _cross_blocked(r: Run, blocked: torch.Tensor) -> dict:
    """Patch every cross-attention mask so that no decoder step sees the source positions `blocked` (S,)."""
    def block(mask):
        return mask & ~blocked.to(mask.device)
    return {attention_point("cross", i, "mask"): block for i in range(r.model.config.n_decoder_layer)}


def cls_positions(r: Run) -> Outcome:
    causal = bool(r.model.config.causal_encoder)
    said = ("Without positions this causal encoder still sees the order through its mask (each token reads only the "
            "ones before it), but not where each word is." if causal else
            "Without positions this encoder reads the review as a bag of words.")
    return _label_outcome(r, "the encoder gets no positional encoding", {"src_pos.hook_pos": torch.zeros_like}, said,
                          "Where each word is carries part of the verdict (\"not good\" is not \"good, not\").")


def _flip_head(h: int):
    def flipped(s):
        s = s.clone()
        s[:, h] = -s[:, h]
        return s
    return flipped


def cls_scores(r: Run) -> Outcome:
    i, h = min(r.layer, _layers(r.model) - 1), r.head
    return _label_outcome(r, f"head {h + 1} of the encoder's layer {i + 1} has its scores QKᵀ negated: each query "
                             "prefers the keys it matched least",
                          {attention_point("encoder_self", i, "scores"): _flip_head(h)}, "",
                          "The scores are how a head picks what to read: reversed, it reads the wrong tokens.")


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
    return _label_outcome(r, f"the encoder's layer {i + 1} scores are not divided by √d_k = {math.sqrt(d_k):.1f}",
                          patch, f"The attention entropy {moves(*spread, 'nats')}: the softmax is closer to one "
                                 "token per row.",
                          "The division keeps the softmax from saturating, so that a row can mix several tokens.",
                          {"entropy": tuple(spread)})


def cls_qkv(r: Run) -> Outcome:
    i, h = min(r.layer, _layers(r.model) - 1), r.head

    def no_query(q):
        q = q.clone()
        q[:, h] = 0
        return q

    return _label_outcome(r, f"head {h + 1} of the encoder's layer {i + 1} gets no query (q = 0): it attends "
                             "evenly to every token it may see",
                          {attention_point("encoder_self", i, "q"): no_query},
                          "Without a query the head only averages the tokens it may see.",
                          "The query is how each token chooses what to read.")


def cls_softmax(r: Run) -> Outcome:
    i = min(r.layer, _layers(r.model) - 1)

    def hard(w):
        return torch.nn.functional.one_hot(w.argmax(-1), w.size(-1)).to(w.dtype)

    return _label_outcome(r, f"the encoder's layer {i + 1} softmax becomes a hard choice: all weight on each row's "
                             "best key", {attention_point("encoder_self", i, "weights"): hard},
                          "Only a smooth softmax can be trained: the argmax has no gradient.",
                          "A smooth softmax mixes several tokens; the hard choice keeps only one per row.")


def cls_padding(r: Run) -> Outcome:
    """The review with pad tokens after it, as a batch holds it: read with its padding mask, then with
    the pads marked as real tokens (no padding mask; a causal encoder keeps its causal mask, which is
    not the padding's). In the shipped causal encoder no review token can see the pads anyway, and the
    decoder's reading of them moved the label by more than 0.01 nats on 2% of 200 training reviews: the
    verdict says what the mask guarantees (a padded review's label is its label alone) whatever the
    effect, and how much of the decoder's attention the pads took, rather than "try another review"."""
    pad, n = r.model.config.pad_token_id, 2
    review, cut = r.ids, ""
    room = r.model.config.max_src_len - n
    if review.size(1) > room:  # a review that fills the encoder: its head and end token, with room for the pads
        review = torch.cat([review[:, :room - 1], review[:, -1:]], 1)
        cut = f" (its first {room - 1} pieces and its end token: the whole review and the pads do not fit)"
    ids = torch.cat([review, torch.full((1, n), pad, device=r.ids.device)], 1)
    mask = torch.ones_like(ids)
    mask[0, -n:] = 0
    before = _probabilities(r.reader, ids, mask=mask)
    alone = _probabilities(r.reader, review)
    top = int(before.argmax())
    name = r.reader.labels[top]
    cross = [attention_point("cross", i, "weights") for i in range(r.model.config.n_decoder_layer)]
    with torch.inference_mode(), r.model.hooks(read=cross) as seen:
        after = r.reader.read(ids, torch.ones_like(ids))[0].double().exp()
    steps = len(r.model.config.decoder_input_ids(r.reader.candidates[top]))  # the rows writing `name`
    on_pads = float(torch.stack([seen[p][top, :, :steps, -n:].sum(-1).mean() for p in cross]).mean())
    read = (f"Without it the decoder's cross-attention gives the pads {on_pads:.1%} of its weight (on average over "
            f"its heads and the steps writing {name}).")
    if r.model.config.causal_encoder:
        said = (f"With the padding mask P({name}) is {float(before[top]):.3f}, as for the review{cut} alone "
                f"({float(alone[top]):.3f}). This encoder is causal: no token of the review can see the pads after "
                f"it, with or without the padding mask; what the mask keeps from the pads is the decoder's "
                f"cross-attention. {read}")
    else:
        said = (f"With the padding mask P({name}) is {float(before[top]):.3f}, as for the review{cut} alone "
                f"({float(alone[top]):.3f}); without it every token of the review and the decoder may read the pads. "
                f"{read}")
    return outcome_of(r, f"the padding mask is removed: the {n} pad tokens a batch adds after the review are read as "
                         "if they were words (the causal mask, if any, stays)", before, after, said,
                      "What the mask guarantees is that a padded review gets the label it gets alone, however many "
                      "pads its batch adds.", {"on_pads": (0.0, on_pads)}, always=True)


def cls_cross(r: Run) -> Outcome:
    """Cross-attention blocked from the review token the tour's cross-attention step names: the one the
    chosen head of the decoder layer the tour shows attends to most at its first step, writing the label
    the classifier gives."""
    i = min(r.layer, r.model.config.n_decoder_layer - 1)
    point = attention_point("cross", i, "weights")
    with torch.inference_mode(), r.model.hooks(read=[point]) as seen:
        best = int(r.reader.read(r.ids)[0].argmax())
    first_step = seen[point][best, r.head, 0].float()  # (S,): row k of the batch is candidate k
    top = int(first_step.argmax())
    blocked = torch.zeros(r.ids.size(1), dtype=torch.bool)
    blocked[top] = True
    word = r.label(int(r.ids[0, top]))
    return _label_outcome(r, f"the decoder may not look at “{word}” (position {top + 1}), the review token head "
                             f"{r.head + 1} of decoder layer {i + 1} attends to most at its first step writing "
                             f"{r.reader.labels[best]} ({float(first_step[top]):.0%} of its attention)",
                          _cross_blocked(r, blocked), "",
                          "Cross-attention is the decoder's only way to read the review: what it cannot see cannot "
                          "move the label.")


def cls_end_token(r: Run) -> Outcome:
    """The decoder reads the memory at the end token `</s>` only (every other review position blocked
    from its cross-attention); `</s>` blocked alone is measured beside it. Blocking `</s>` alone was the
    experiment until it moved no label by 0.01 nats on 200 training reviews (the shipped causal encoder's
    positions before `</s>` have read nearly all of the review too), while reading `</s>` alone moved nearly 90%
    of them: the memory is read through every position, not through the one that saw everything."""
    last = r.ids.size(1) - 1
    end = torch.zeros(r.ids.size(1), dtype=torch.bool)
    end[last] = True
    before = _probabilities(r.reader, r.ids)
    top = int(before.argmax())
    name = r.reader.labels[top]
    without_end = _probabilities(r.reader, r.ids, _cross_blocked(r, end))
    causal = bool(r.model.config.causal_encoder)
    where = ("In this causal encoder `</s>` is the one position that has read the whole review."
             if causal else "Every position of this encoder has read the whole review, `</s>` included.")
    alone = f"With only `</s>` blocked instead, P({name}) {moves(float(before[top]), float(without_end[top]), '', 3)}."
    return outcome_of(r, f"the decoder may read only the memory at the end token `</s>` (the other {last} review "
                         "positions blocked)", before, _probabilities(r.reader, r.ids, _cross_blocked(r, ~end)),
                      f"{where} {alone}",
                      "The decoder reads the review through every position of the memory: the one vector that has "
                      "seen the whole review does not carry all that the label rests on.",
                      {f"p_{name}_without_end": (float(before[top]), float(without_end[top]))})


def cls_decoder_input(r: Run) -> Outcome:
    return _label_outcome(r, "the decoder's input gets no positional encoding: `<s>` and the label's words without "
                             "their places", {"tgt_pos.hook_pos": torch.zeros_like}, "",
                          "The decoder reads its own input in order, as the encoder reads the review: without "
                          "positions it scores the label's words less well.")


def cls_reading_order(r: Run) -> Outcome:
    """The review read by the backward reader when one is served; else the review's pieces reversed (its
    end token kept last), read by this reader."""
    if r.backward is None:
        ids = r.ids.clone()
        ids[0, :-1] = r.ids[0, :-1].flip(0)
        before, after = _probabilities(r.reader, r.ids), _probabilities(r.reader, ids)
        return outcome_of(r, "the review's pieces are read in reverse order (the end token kept last)", before, after,
                          "", "The order of the pieces is part of what the classifier reads, not only which pieces "
                              "there are.")
    before, after = _probabilities(r.reader, r.ids), _probabilities(r.backward, r.ids)
    top = int(before.argmax())
    name = r.reader.labels[top]
    return outcome_of(r, "the same review read by the backward reader (last token first)", before, after,
                      f"Read right to left, P({name}) is {float(after[top]):.3f} instead of {float(before[top]):.3f}: "
                      "two readers that see the text in opposite orders make different mistakes, which is why the "
                      "app averages them.", "", judged=False)


def cls_label(r: Run) -> Outcome:
    t = r.reader.temperature
    with torch.inference_mode():
        scores = r.model.candidate_scores(r.reader.encode(r.ids)[0], r.reader.candidates)[0][0].double()
    raw = scores.softmax(-1)
    fitted = _probabilities(r.reader, r.ids)
    top = int(fitted.argmax())
    said = (f"The fitted temperature {t:.2f} makes the classifier's probabilities match how often it is right on "
            f"held-out reviews; the label is the same at both temperatures ({r.reader.labels[top]})."
            if int(raw.argmax()) == top else "")
    return outcome_of(r, f"the label scores softmaxed at temperature 1 instead of the fitted {t:.2f}", fitted, raw,
                      said, "", judged=False)


CLASSIFIER_EXPERIMENTS: dict[str, Callable[[Run], Outcome]] = {
    "source_tokens": cls_reading_order, "source_embedding": cls_positions, "qkv": cls_qkv, "scores": cls_scores,
    "scaling": cls_scaling, "padding_mask": cls_padding, "softmax": cls_softmax, "memory": cls_end_token,
    "decoder_input": cls_decoder_input, "cross": cls_cross, "label": cls_label,
}


def classifier_experiment(step: str, reader: Reader, ids: torch.Tensor, layer: int = 0, head: int = 0,
                          backward: Reader | None = None) -> Outcome:
    """The experiment of the sentiment tour's `step` on a review's ids (1, S)."""
    return CLASSIFIER_EXPERIMENTS[step](Run(reader.model, reader.tokenizer, ids, layer, head, reader, backward))
