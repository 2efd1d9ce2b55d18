"""The language model's experiments, keyed by the LM tour's step ids (`LM_EXPERIMENTS`): each a
patch of named points on the visitor's text, its top next tokens before and after at one named
position, the loss over the whole text before and after, and its effect ("worse", "better", "no
change": `common.effect`). Every sentence of a verdict is written from those numbers: what a step is
for is said only where the loss shows it ("worse"), and otherwise the verdict says the text does not
show it."""

import math
from collections.abc import Callable
from dataclasses import replace

import torch

from inspection.ablation import HeadMask
from inspection.experiments.common import (
    TOP,
    Outcome,
    Run,
    Unavailable,
    effect,
    effect_sentence,
    entropy,
    moves,
    nats,
)
from model import DecoderOnlyLM, GenerationConfig, attention_point, residual_point, sampling_distribution
from tokenization import BPETokenizer

BYTES = 256  # a byte-level vocabulary holds one token per byte (the toy's word-level one does not)
# what the verdict says when the loss does not show what the step is for
NOT_SHOWN = {"better": "On your text the model does better without it: this one text does not show what the step is "
                       "for (try a longer one).",
             "no change": "On your text it makes no difference to the loss: this one text does not show what the step "
                          "is for (try a longer one)."}


def _lm_logits(r: Run, patch=None, read=(), ids: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
    with torch.inference_mode(), r.model.hooks(read=read, patch=patch or {}) as seen:
        return r.model(r.ids if ids is None else ids).logits[0].float(), seen


def _top(r: Run, probs: torch.Tensor) -> list[tuple[str, float]]:
    top = probs.topk(TOP)
    return [(r.label(i), round(float(p), 4)) for i, p in zip(top.indices.tolist(), top.values, strict=True)]


def _teacher_forced_loss(logits: torch.Tensor, ids: torch.Tensor) -> float:
    """Mean −log p(actual next token) over the text (nats)."""
    return float(torch.nn.functional.cross_entropy(logits[:-1].double(), ids[0, 1:]))


def _guess(r: Run, probs: torch.Tensor) -> str:
    i = int(probs.argmax())
    return f"“{r.label(i)}” ({probs[i]:.0%})"


def position(r: Run, t: int) -> str:
    """Position `t` (0-based) in words: “after “ was” (position 17, the last)”."""
    last = ", the last" if t == r.ids.size(1) - 1 else ""
    return f"after “{r.label(int(r.ids[0, t]))}” (position {t + 1}{last})"


def over_text(r: Run) -> str:
    n = r.ids.size(1) - 1
    return f"over your text ({n} prediction{'s' if n != 1 else ''}) the loss (−log p of each actual next token)"


def _verdict(r: Run, before: torch.Tensor, after: torch.Tensor, loss: tuple[float, float], said: str,
             worse: str) -> str:
    """The verdict: the top guess at the last position, the loss over the text and its effect, what the
    experiment measured (`said`), and what the step is for (`worse`) only when the loss shows it."""
    at = position(r, r.ids.size(1) - 1)
    if before.argmax() == after.argmax():
        guess = f"{at[0].upper()}{at[1:]}, the top guess stays “{r.label(int(before.argmax()))}” " \
                f"({before.max():.0%} → {after.max():.0%})."
    else:
        guess = f"{at[0].upper()}{at[1:]}, the top guess goes from {_guess(r, before)} to {_guess(r, after)}."
    why = worse if effect(*loss) == "worse" else NOT_SHOWN[effect(*loss)]
    return " ".join(part for part in (guess, effect_sentence(*loss, over_text(r)), said, why) if part)


def _lm_outcome(r: Run, change: str, patch: dict, said, worse: str, read=(), measure=None) -> Outcome:
    """The last position's next-token distribution and the loss over the text with and without
    `patch`; `said(measures)` (or a string) what the experiment measured, `worse` what the step is for,
    said when the loss rises."""
    plain, seen_before = _lm_logits(r, read=read)
    changed, seen_after = _lm_logits(r, patch, read=read)
    before, after = plain[-1].softmax(-1), changed[-1].softmax(-1)
    loss = (_teacher_forced_loss(plain, r.ids), _teacher_forced_loss(changed, r.ids))
    measures = {"loss": loss}
    if measure:
        measures.update(measure(seen_before, seen_after))
    said = said(measures) if callable(said) else said
    return Outcome(change, _top(r, before), _top(r, after), _verdict(r, before, after, loss, said, worse), measures,
                   loss[0], loss[1], position=position(r, r.ids.size(1) - 1))


def _ffn_share(config) -> float:
    """The feed-forward network's share of a layer's weights (attention: 4 d², FFN: 2 d d_ff)."""
    ffn = 2 * config.d_model * config.d_ff
    return ffn / (ffn + 4 * config.d_model ** 2)


def _recorder(store: dict, key: str):
    def record(x):
        store[key] = x
        return x
    return record


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet: the character a byte-level BPE vocabulary writes each byte as."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def byte_ids(tokenizer: BPETokenizer, text: str) -> list[int]:
    """`text` as one token per byte: each byte's own token of a byte-level vocabulary."""
    chars = _bytes_to_unicode()
    ids = [tokenizer.tokenizer.token_to_id(chars[b]) for b in text.encode("utf-8")]
    if any(i is None for i in ids):
        raise Unavailable("this vocabulary has no token for every byte: the text cannot be read byte by byte")
    return ids


def lm_tokens(r: Run) -> Outcome:
    """The text read one byte per token instead of in its BPE pieces: the whole text's nats compared (the
    two readings have different token counts)."""
    if r.model.config.vocab_size < BYTES:
        raise Unavailable("a word-level vocabulary has no byte tokens to read the text with")
    text = r.tokenizer.decode(r.ids[0, 1:].tolist())
    keep = r.model.config.block_size - 1
    cut = ""
    while len(text.encode("utf-8")) > keep:  # as bytes the text may not fit the context: its first part
        text, cut = text[:-1], " (its first part: as bytes the whole text is longer than the context)"
    pieces = [r.tokenizer.bos_id, *r.tokenizer.encode(text)]
    as_bytes = [r.tokenizer.bos_id, *byte_ids(r.tokenizer, text)]
    totals, last = [], []
    for ids in (pieces, as_bytes):
        x = torch.tensor([ids], device=r.ids.device)
        logits, _ = _lm_logits(r, ids=x)
        totals.append(_teacher_forced_loss(logits, x) * (len(ids) - 1))
        last.append(logits[-1].softmax(-1))
    loss = (totals[0], totals[1])
    said = (f"Your text{cut} is {len(pieces) - 1} BPE pieces or {len(as_bytes) - 1} bytes; the whole text costs "
            f"{nats(loss[0])} nats read in pieces and {nats(loss[1])} nats read byte by byte.")
    worse = ("The model learned its pieces: the vocabulary's merges are the units its embeddings and attention "
             "were trained on, and a text cut differently is a text it has not seen.")
    why = worse if effect(*loss) == "worse" else NOT_SHOWN[effect(*loss)]
    verdict = " ".join((said, effect_sentence(*loss, "the whole text's loss"), why))
    return Outcome("the text is read one byte per token instead of in the tokenizer's pieces (the table: the next "
                   "token after the whole text)", _top(r, last[0]), _top(r, last[1]), verdict, {"loss": loss},
                   loss[0], loss[1], position="after the whole text")


def lm_embedding(r: Run) -> Outcome:
    d = r.model.config.d_model

    def sizes(seen_before, seen_after):
        ratio = [float(s["pos.hook_embed"].norm(dim=-1).mean() / s["pos.hook_pos"].norm(dim=-1).mean())
                 for s in (seen_before, seen_after)]
        return {"token_to_position_size": (ratio[0], ratio[1])}

    return _lm_outcome(
        r, f"the token vectors are not multiplied by √d_model = {math.sqrt(d):.1f}",
        {"pos.hook_embed": lambda x: x / math.sqrt(d)},
        lambda m: (f"Unscaled, a token vector is {m['token_to_position_size'][1]:.2f}× the size of the position row "
                   f"added to it instead of {m['token_to_position_size'][0]:.1f}×."),
        "The scale keeps the words from drowning in their positions.",
        read=("pos.hook_embed", "pos.hook_pos"), measure=sizes)


def lm_position(r: Run) -> Outcome:
    return _lm_outcome(
        r, "no positional encoding is added: the model gets the tokens without their places",
        {"pos.hook_pos": torch.zeros_like},
        "Without positions the model can tell the order only through the causal mask (what each token may see).",
        "Where each word is helps it predict: attention alone treats its inputs as a set.")


def lm_norm(r: Run) -> Outcome:
    """Layer `r.layer`'s attention reads its input without the LayerNorm (pre-norm), or writes its
    sum without it (post-norm)."""
    i, store = r.layer, {}
    below = "pos.hook_input" if i == 0 else residual_point(r.model, "decoder", i - 1)
    attn_in, attn_resid = f"decoder.layers.{i}.sublayer.0.hook_in", f"decoder.layers.{i}.sublayer.0.hook_resid"
    if r.model.config.norm_first:
        patch = {below: _recorder(store, "x"), attn_in: lambda _: store["x"]}
    else:
        patch = {attn_in: _recorder(store, "x"), attention_point("decoder_self", i, "out"): _recorder(store, "out"),
                 attn_resid: lambda _: store["x"] + store["out"]}

    def spread(seen_before, seen_after):
        return {"input_std": tuple(float(s[attn_in].std()) for s in (seen_before, seen_after))}

    return _lm_outcome(
        r, f"layer {i + 1}'s attention reads the residual stream without its LayerNorm",
        patch,
        lambda m: f"The numbers it reads spread {m['input_std'][1]:.2f} instead of {m['input_std'][0]:.2f}.",
        "LayerNorm keeps every layer's input at the scale its weights learned: fed the raw stream, the layer misreads "
        "it.", read=(f"decoder.layers.{i}.sublayer.0.hook_in",), measure=spread)


def _head_entropy(point: str, head: int | None):
    def measure(seen_before, seen_after):
        pick = (lambda w: w[:, head]) if head is not None else (lambda w: w)
        return {"entropy": (entropy(pick(seen_before[point])), entropy(pick(seen_after[point])))}
    return measure


def lm_qkv(r: Run) -> Outcome:
    i, h = r.layer, r.head
    weights = attention_point("decoder_self", i, "weights")

    def no_query(q):
        q = q.clone()
        q[:, h] = 0
        return q

    return _lm_outcome(
        r, f"head {h + 1} of layer {i + 1} gets no query (q = 0): every score is 0",
        {attention_point("decoder_self", i, "q"): no_query},
        lambda m: (f"With nothing to ask, the head spreads its attention evenly over the earlier tokens: its "
                   f"entropy {moves(*m['entropy'], 'nats')}."),
        "The query is how a token chooses what to read.", read=(weights,), measure=_head_entropy(weights, h))


def lm_scores(r: Run) -> Outcome:
    """Head `r.head`'s scores negated: each query now prefers the keys it matched least."""
    i, h = r.layer, r.head
    weights = attention_point("decoder_self", i, "weights")

    def flipped(s):
        s = s.clone()
        s[:, h] = -s[:, h]
        return s

    def best(seen_before, seen_after):
        w_before, w_after = seen_before[weights][0, h, -1], seen_after[weights][0, h, -1]
        j = int(w_before.argmax())
        return {"best_key_weight": (float(w_before[j]), float(w_after[j])), "best_key": (j, j)}

    def said(m):
        j = int(m["best_key"][0])
        was, now = m["best_key_weight"]
        return (f"The last row's weight on the key it scored highest, “{r.label(int(r.ids[0, j]))}” (position "
                f"{j + 1}), {moves(was, now)}.")

    return _lm_outcome(r, f"head {h + 1} of layer {i + 1} has its scores QKᵀ negated: each query prefers the keys it "
                          "matched least", {attention_point("decoder_self", i, "scores"): flipped}, said,
                       "The scores are how a head picks what to read: reversed, it reads the wrong tokens.",
                       read=(weights,), measure=best)


def lm_scaling(r: Run) -> Outcome:
    i = r.layer
    d_k = r.model.config.d_model // r.model.config.n_head
    weights = attention_point("decoder_self", i, "weights")
    return _lm_outcome(
        r, f"layer {i + 1}'s scores are not divided by √d_k = {math.sqrt(d_k):.1f}",
        {attention_point("decoder_self", i, "scores"): lambda s: s * math.sqrt(d_k)},
        lambda m: (f"Scores {math.sqrt(d_k):.1f}× larger push the softmax toward one key per row: the attention "
                   f"entropy {moves(*m['entropy'], 'nats')}."),
        "The division keeps the softmax from saturating; a saturated softmax also passes almost no gradient in "
        "training.", read=(weights,), measure=_head_entropy(weights, None))


def lm_mask(r: Run) -> Outcome:
    """Every layer's causal mask removed on the text read teacher-forced: each position sees the
    token it is asked to predict. The table and the first sentence are one position's, the last whose
    next token is in the text; the loss and the effect are the whole text's."""
    n, T = r.model.config.n_layer, r.ids.size(1)
    if T < 2:
        raise Unavailable("the text has no next token to look ahead to")
    patch = {attention_point("decoder_self", i, "mask"): torch.ones_like for i in range(n)}
    plain, _ = _lm_logits(r)
    changed, _ = _lm_logits(r, patch)
    t = T - 2  # the last position whose next token is in the text: what it now sees
    before, after = plain[t].softmax(-1), changed[t].softmax(-1)
    nxt = r.ids[0, 1:]
    target = int(nxt[t])
    here = (float(-before[target].log()), float(-after[target].log()))
    copies = [float((logits[:-1].argmax(-1) == nxt).float().mean()) for logits in (plain, changed)]
    loss = (_teacher_forced_loss(plain, r.ids), _teacher_forced_loss(changed, r.ids))
    at = position(r, t)
    said = (f"{at[0].upper()}{at[1:]}, the model can now see the token it predicts, “{r.label(target)}”: it gives it "
            f"{float(after[target]):.0%} instead of {float(before[target]):.0%} (a loss of {nats(here[1])} instead "
            f"of {nats(here[0])} nats at this position). {effect_sentence(*loss, over_text(r))} "
            f"{copies[1]:.0%} of the guesses are now the next token (before: {copies[0]:.0%}).")
    honest = ("Trained without the mask, a model would learn to copy the next token instead of predicting it, and "
              "when it writes there is nothing after it to copy: the mask keeps training honest.")
    if effect(*loss) == "better":
        why = f"It reads the answer instead of predicting it. {honest}"
    else:
        helped = " at this position seeing the answer helps, but" if effect(*here) == "better" else ""
        why = (f"This model was trained with the mask and never learned to use later tokens:{helped} over the text "
               f"seeing them {'throws it off' if effect(*loss) == 'worse' else 'does not help'}. {honest}")
    return Outcome(f"the causal mask is removed in every layer: each token may look at the tokens after it (the "
                   f"table: the next tokens {at})", _top(r, before), _top(r, after), f"{said} {why}",
                   {"loss": loss, "loss_here": here, "next_token_copied": tuple(copies)}, loss[0], loss[1],
                   position=at)


def lm_softmax(r: Run) -> Outcome:
    i = r.layer
    weights = attention_point("decoder_self", i, "weights")

    def hard(w):
        return torch.nn.functional.one_hot(w.argmax(-1), w.size(-1)).to(w.dtype)

    return _lm_outcome(
        r, f"layer {i + 1}'s softmax becomes a hard choice: each row puts all its weight on its best key",
        {weights: hard},
        lambda m: (f"Layer {i + 1}'s attention entropy {moves(*m['entropy'], 'nats')} (0: one key per row). Only a "
                   "smooth softmax can be trained: the argmax has no gradient."),
        "A weighted average of several tokens carries more than the one best token alone.",
        read=(weights,), measure=_head_entropy(weights, None))


def _heads_kept(r: Run, keep: torch.Tensor, change: str, said, worse: str) -> Outcome:
    """Layer `r.layer`'s heads where `keep` (H,) is False write 0 (their weighted sums, before W_O)."""
    return _lm_outcome(r, change, {attention_point("decoder_self", r.layer, "heads"): HeadMask(keep, "zero", True)},
                       said, worse)


def lm_weighted_sum(r: Run) -> Outcome:
    keep = torch.zeros(r.model.config.n_head, dtype=torch.bool)
    keep[r.head] = True
    return _heads_kept(r, keep, f"in layer {r.layer + 1} only head {r.head + 1} writes; the other heads' weighted "
                                "sums are set to 0", "",
                       "One head's weighted sum alone is not enough: the layer needs what its other heads read.")


def lm_heads(r: Run) -> Outcome:
    keep = torch.ones(r.model.config.n_head, dtype=torch.bool)
    keep[r.head] = False
    plain, _ = _lm_logits(r)
    best = int(plain[-1].argmax())
    label = r.label(best)

    def said(m):
        return (f"P(“{label}”) at the last position moves by {m['p_best'][1] - m['p_best'][0]:+.3f}: how much this "
                "prediction leans on this one head.")

    def p_best(seen_before, seen_after):
        return {"p_best": (float(seen_before["embed.hook_logits"][0, -1].float().softmax(-1)[best]),
                           float(seen_after["embed.hook_logits"][0, -1].float().softmax(-1)[best]))}

    return _lm_outcome(r, f"head {r.head + 1} of layer {r.layer + 1} is knocked out (its output set to 0)",
                       {attention_point("decoder_self", r.layer, "heads"): HeadMask(keep, "zero", True)}, said,
                       "The other heads do not make up for it: each head reads something of its own.",
                       read=("embed.hook_logits",), measure=p_best)


def lm_residual(r: Run) -> Outcome:
    i, store = r.layer, {}
    attn_resid = f"decoder.layers.{i}.sublayer.0.hook_resid"
    patch = {attention_point("decoder_self", i, "out"): _recorder(store, "out"), attn_resid: lambda _: store["out"]}
    if not r.model.config.norm_first:  # post-norm: the norm of the sublayer's output alone
        sub = r.model.decoder.layers[i].sublayer[0]
        patch[attn_resid] = lambda _: sub.norm(store["out"])
    return _lm_outcome(
        r, f"layer {i + 1}'s attention output replaces the residual stream instead of being added to it",
        patch, "Without the skip connection, everything the layers below wrote (the token itself included) is lost "
               "at this layer.",
        "The residual stream carries each token through the layers; in training it is also the path the gradient "
        "takes straight down to the lower layers.")


def lm_ffn(r: Run) -> Outcome:
    i = r.layer
    share = _ffn_share(r.model.config)

    def guesses(seen_before, seen_after):  # the two passes' logits, read at their named point
        changed = (seen_before["embed.hook_logits"].argmax(-1) != seen_after["embed.hook_logits"].argmax(-1)).sum()
        return {"guesses_changed": (0.0, float(changed))}

    def said(m):
        return (f"{int(m['guesses_changed'][1])} of the {r.ids.size(1)} next-token guesses over your text change. The "
                f"feed-forward network is {share:.0%} of a layer's weights and works on each position alone.")

    return _lm_outcome(r, f"layer {i + 1}'s feed-forward network is skipped (it writes 0)",
                       {f"decoder.layers.{i}.feed_forward.hook_out": torch.zeros_like}, said,
                       "Attention moves information between tokens; the FFN turns what each token gathered into "
                       "the features the layers above and the output read.", read=("embed.hook_logits",),
                       measure=guesses)


def lm_stack(r: Run) -> Outcome:
    n = r.model.config.n_layer
    if n == 1:
        raise Unavailable("a one-layer model has no layer above the first to remove")
    k = min(r.layer, n - 2)  # the chosen layer, or the one below the last: something to remove
    patch = {f"decoder.layers.{i}.{part}.hook_out": torch.zeros_like for i in range(k + 1, n)
             for part in ("self_attn", "feed_forward")}
    return _lm_outcome(
        r, f"the model stops after layer {k + 1} of {n}: the layers above add nothing (the logit lens's view)",
        patch, f"What the stream holds after layer {k + 1} is read out by the final norm and the output matrix.",
        "The upper layers refine the guess.")


def lm_logits(r: Run) -> Outcome:
    """The final LayerNorm skipped: the tied output matrix scores the raw residual stream."""
    store = {}
    last = residual_point(r.model, "decoder", r.model.config.n_layer - 1)

    def spread(seen_before, seen_after):
        return {"final_std": tuple(float(s["decoder.hook_norm"].std()) for s in (seen_before, seen_after))}

    return _lm_outcome(
        r, "the final LayerNorm is skipped: the output matrix scores the raw residual stream",
        {last: _recorder(store, "x"), "decoder.hook_norm": lambda _: store["x"]},
        lambda m: f"The vectors it scores spread {m['final_std'][1]:.2f} instead of {m['final_std'][0]:.2f}.",
        "The output matrix (the embedding table, transposed) was trained on normalised vectors: each logit is a dot "
        "product that grows with the vector's size.", read=("decoder.hook_norm",), measure=spread)


def _sampler_effect(z: torch.Tensor, s: GenerationConfig) -> str:
    """What the sampler's settings `s` do to the logits `z` (V,), in words: the temperature's direction
    and how many tokens each cut removes, counted with the generation code's own `sampling_distribution`."""
    if s.greedy:
        return "temperature 0 is greedy decoding, the likeliest token every time."
    said = []
    if s.temperature != 1:
        said.append("a temperature below 1 sharpens the choice (more predictable text)" if s.temperature < 1 else
                    "a temperature above 1 flattens the choice (more surprising text)")
    vocab = z.numel()
    after_k = int((sampling_distribution(z, replace(s, top_p=None)) > 0).sum())
    kept = int((sampling_distribution(z, s) > 0).sum())
    cuts = [f"top-k removes {vocab - after_k:,} tokens"] if s.top_k is not None else []
    if s.top_p is not None and s.top_p < 1:
        cuts.append(f"top-p {after_k - kept:,} more" if cuts else f"top-p removes {after_k - kept:,} tokens")
    if cuts:
        said.append(" and ".join(cuts) + (", the long tail of unlikely tokens that would derail the text"
                                           if kept < vocab else ""))
    return "; ".join(said) + "." if said else "nothing changes: this is the model's own distribution."


def _sampling_outcome(r: Run, change: str, settings: GenerationConfig) -> Outcome:
    """The model's own next-token distribution (temperature 1, nothing cut) against the one the sampler
    draws from at `settings` (`model.sampling_distribution`: the generation code's, not a copy); the loss
    over the text is −log of each actual next token under each."""
    logits, _ = _lm_logits(r)
    z = logits[-1]
    before, after = z.softmax(-1), sampling_distribution(z, settings)
    entropies = entropy(before), entropy(after)
    kept = int((after > 0).sum())
    nxt = r.ids[0, 1:]
    drawn = torch.stack([sampling_distribution(row, settings) for row in logits[:-1]]).double()
    q = drawn[torch.arange(len(nxt)), nxt]
    cut = int((q == 0).sum())
    loss = (_teacher_forced_loss(logits, r.ids), float(-q.log().mean()))
    at = position(r, r.ids.size(1) - 1)
    said = (f"{at[0].upper()}{at[1:]}, the distribution's entropy goes from {entropies[0]:.2f} to "
            f"{entropies[1]:.2f} nats and {kept:,} token{'s' if kept != 1 else ''} can still be drawn: "
            f"{_sampler_effect(z, settings)}")
    if cut:
        score = (f" At {cut} of the {len(nxt)} positions of your text the actual next token could not have been "
                 f"drawn at these settings (its probability is 0): over the text the loss is infinite, so the "
                 f"sampler could not have written your text.")
    else:
        score = " " + effect_sentence(*loss, f"scored with what the sampler draws from, {over_text(r)}")
    return Outcome(change, _top(r, before), _top(r, after), said + score, {"entropy": entropies, "loss": loss},
                   loss[0], loss[1], position=at)


def sampler_settings(s: GenerationConfig) -> str:
    """The sampler's settings as the sampling step's experiment names them: "temperature 0.8, top-k 40,
    top-p 0.95"."""
    if s.greedy:
        return "temperature 0 (greedy decoding)"
    top_k = f"top-k {s.top_k:,}" if s.top_k is not None else "no top-k"
    top_p = f"top-p {s.top_p:g}" if s.top_p is not None and s.top_p < 1 else "no top-p"
    return f"temperature {s.temperature:g}, {top_k}, {top_p}"


def lm_probabilities(r: Run) -> Outcome:
    return _sampling_outcome(r, "temperature 2 instead of 1 (the logits divided by 2 before the softmax)",
                             GenerationConfig(temperature=2))


def lm_sampling(r: Run) -> Outcome:
    """What the sampler draws from at `r.sampling` (the tour's temperature, top-k and top-p controls)."""
    return _sampling_outcome(r, f"the next token drawn at {sampler_settings(r.sampling)} instead of from the "
                                "model's own probabilities (temperature 1, nothing cut)", r.sampling)


LM_EXPERIMENTS: dict[str, Callable[[Run], Outcome]] = {
    "tokens": lm_tokens, "embedding": lm_embedding, "position": lm_position, "norm": lm_norm, "qkv": lm_qkv,
    "scores": lm_scores, "scaling": lm_scaling, "mask": lm_mask, "softmax": lm_softmax,
    "weighted_sum": lm_weighted_sum, "heads": lm_heads, "residual": lm_residual, "ffn": lm_ffn, "stack": lm_stack,
    "logits": lm_logits, "probabilities": lm_probabilities, "sampling": lm_sampling,
}


def lm_experiment(step: str, model: DecoderOnlyLM, tokenizer: BPETokenizer, ids: torch.Tensor, layer: int = 0,
                  head: int = 0) -> Outcome:
    """The experiment of the LM tour's `step` on `ids` (1, T), at the tour's layer and head."""
    return LM_EXPERIMENTS[step](Run(model, tokenizer, ids, layer, head))
