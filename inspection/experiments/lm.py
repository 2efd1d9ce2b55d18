"""The language model's experiments, keyed by the LM tour's step ids (`LM_EXPERIMENTS`): each a
patch of named points on the visitor's text, its top next tokens before and after."""

import math
from collections.abc import Callable
from dataclasses import replace

import torch

from inspection.ablation import HeadMask
from inspection.experiments.common import TOP, Outcome, Run, Unavailable, entropy
from model import DecoderOnlyLM, GenerationConfig, attention_point, sampling_distribution
from tokenization import BPETokenizer


def _lm_logits(r: Run, patch=None, read=()) -> tuple[torch.Tensor, dict]:
    with torch.inference_mode(), r.model.hooks(read=read, patch=patch or {}) as seen:
        return r.model(r.ids).logits[0].float(), seen


def _top(r: Run, probs: torch.Tensor) -> list[tuple[str, float]]:
    top = probs.topk(TOP)
    return [(r.label(i), round(float(p), 4)) for i, p in zip(top.indices.tolist(), top.values, strict=True)]


def _teacher_forced_loss(logits: torch.Tensor, ids: torch.Tensor) -> float:
    """Mean −log p(actual next token) over the text (nats)."""
    return float(torch.nn.functional.cross_entropy(logits[:-1].double(), ids[0, 1:]))


def _guess(r: Run, probs: torch.Tensor) -> str:
    i = int(probs.argmax())
    return f"“{r.label(i)}” ({probs[i]:.0%})"


def _lm_outcome(r: Run, change: str, patch: dict, why: str, read=(), measure=None) -> Outcome:
    """The last position's next-token distribution with and without `patch`; `why(before, after)`
    the verdict's second half from the two probability vectors."""
    plain, seen_before = _lm_logits(r, read=read)
    changed, seen_after = _lm_logits(r, patch, read=read)
    before, after = plain[-1].softmax(-1), changed[-1].softmax(-1)
    measures = {"loss": (_teacher_forced_loss(plain, r.ids), _teacher_forced_loss(changed, r.ids))}
    if measure:
        measures.update(measure(seen_before, seen_after))
    if before.argmax() == after.argmax():
        guess = f"The top guess stays “{r.label(int(before.argmax()))}” ({before.max():.0%} → {after.max():.0%})"
    else:
        guess = f"The top guess goes from {_guess(r, before)} to {_guess(r, after)}"
    verdict = f"{guess}; {why(before, after, measures)}"
    return Outcome(change, _top(r, before), _top(r, after), verdict, measures)


def _loss_sentence(_b, _a, m) -> str:
    was, now = m["loss"]
    return (f"Over your text the loss (−log p of each actual next token) goes from {was:.2f} to {now:.2f} nats"
            f"{': the model predicts worse without it' if now > was else ''}.")


def _ffn_share(config) -> float:
    """The feed-forward network's share of a layer's weights (attention: 4 d², FFN: 2 d d_ff)."""
    ffn = 2 * config.d_model * config.d_ff
    return ffn / (ffn + 4 * config.d_model ** 2)


def _recorder(store: dict, key: str):
    def record(x):
        store[key] = x
        return x
    return record


def lm_embedding(r: Run) -> Outcome:
    d = r.model.config.d_model

    def sizes(seen_before, seen_after):
        ratio = [float(s["decoder.embed"].norm(dim=-1).mean() / s["decoder.pos"].norm(dim=-1).mean())
                 for s in (seen_before, seen_after)]
        return {"token_to_position_size": (ratio[0], ratio[1])}

    return _lm_outcome(
        r, f"the token vectors are not multiplied by √d_model = {math.sqrt(d):.1f}",
        {"decoder.embed": lambda x: x / math.sqrt(d)},
        lambda b, a, m: (f"unscaled, a token vector is {m['token_to_position_size'][1]:.2f}× the size of the position "
                         f"row added to it instead of {m['token_to_position_size'][0]:.1f}×: the scale keeps the "
                         f"words from drowning in their positions. " + _loss_sentence(b, a, m)),
        read=("decoder.embed", "decoder.pos"), measure=sizes)


def lm_position(r: Run) -> Outcome:
    return _lm_outcome(
        r, "no positional encoding is added: the model gets the tokens without their places",
        {"decoder.pos": torch.zeros_like},
        lambda b, a, m: ("without positions it can tell the order only through the causal mask (what each token may "
                         "see), not where a word is. " + _loss_sentence(b, a, m)))


def lm_norm(r: Run) -> Outcome:
    """Layer `r.layer`'s attention reads its input without the LayerNorm (pre-norm), or writes its
    sum without it (post-norm)."""
    i, store = r.layer, {}
    below = "decoder.input" if i == 0 else f"decoder.{i - 1}.ffn.resid"
    if r.model.config.norm_first:
        patch = {below: _recorder(store, "x"), f"decoder.{i}.attn.in": lambda _: store["x"]}
    else:
        patch = {f"decoder.{i}.attn.in": _recorder(store, "x"), f"decoder.{i}.attn.out": _recorder(store, "out"),
                 f"decoder.{i}.attn.resid": lambda _: store["x"] + store["out"]}

    def spread(seen_before, seen_after):
        return {"input_std": tuple(float(s[f"decoder.{i}.attn.in"].std()) for s in (seen_before, seen_after))}

    return _lm_outcome(
        r, f"layer {i + 1}'s attention reads the residual stream without its LayerNorm",
        patch,
        lambda b, a, m: (f"the numbers it reads spread {m['input_std'][1]:.2f} instead of {m['input_std'][0]:.2f} "
                         "(LayerNorm keeps every layer's input at the scale its weights learned). "
                         + _loss_sentence(b, a, m)),
        read=(f"decoder.{i}.attn.in",), measure=spread)


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
        lambda b, a, m: (f"with nothing to ask, the head spreads its attention evenly over the earlier tokens "
                         f"(entropy {m['entropy'][0]:.2f} → {m['entropy'][1]:.2f} nats): the query is how a token "
                         f"chooses what to read. " + _loss_sentence(b, a, m)),
        read=(weights,), measure=_head_entropy(weights, h))


def lm_scaling(r: Run) -> Outcome:
    i = r.layer
    d_k = r.model.config.d_model // r.model.config.n_head
    weights = attention_point("decoder_self", i, "weights")
    return _lm_outcome(
        r, f"layer {i + 1}'s scores are not divided by √d_k = {math.sqrt(d_k):.1f}",
        {attention_point("decoder_self", i, "scores"): lambda s: s * math.sqrt(d_k)},
        lambda b, a, m: (f"scores {math.sqrt(d_k):.1f}× larger push the softmax to one key per row: the attention "
                         f"entropy falls from {m['entropy'][0]:.2f} to {m['entropy'][1]:.2f} nats (a saturated "
                         f"softmax also passes almost no gradient in training). " + _loss_sentence(b, a, m)),
        read=(weights,), measure=_head_entropy(weights, None))


def lm_mask(r: Run) -> Outcome:
    """Every layer's causal mask removed on the text read teacher-forced: each position sees the
    token it is asked to predict."""
    n, T = r.model.config.n_layer, r.ids.size(1)
    patch = {attention_point("decoder_self", i, "mask"): torch.ones_like for i in range(n)}
    plain, _ = _lm_logits(r)
    changed, _ = _lm_logits(r, patch)
    t = max(T - 2, 0)  # a position whose next token is in the text: what it now sees
    before, after = plain[t].softmax(-1), changed[t].softmax(-1)
    nxt = r.ids[0, 1:]
    copies = [float((logits[:-1].argmax(-1) == nxt).float().mean()) for logits in (plain, changed)]
    loss = (_teacher_forced_loss(plain, r.ids), _teacher_forced_loss(changed, r.ids))
    said = (f"Allowed to look ahead, position {t + 1} gives the next token of your text, “{r.label(int(nxt[t]))}”, "
            f"{float(after[nxt[t]]):.0%} instead of {float(before[nxt[t]]):.0%}; over the text the loss goes from "
            f"{loss[0]:.2f} to {loss[1]:.2f} nats and {copies[1]:.0%} of the guesses are the next token (was "
            f"{copies[0]:.0%}). ")
    if loss[1] < loss[0]:
        why = ("It reads the answer instead of predicting it: trained that way a model learns to copy, and has "
               "nothing to copy from when it writes. The mask keeps training honest.")
    else:
        why = ("This model was trained with the mask, so it never learned to use later tokens: shown them, it is "
               "thrown off rather than helped. Trained without the mask, it would learn to copy the next token, "
               "which it cannot do when it writes: the mask keeps training honest.")
    verdict = said + why
    return Outcome("the causal mask is removed in every layer: each token may look at the tokens after it",
                   _top(r, before), _top(r, after), verdict, {"loss": loss, "next_token_copied": tuple(copies)})


def lm_softmax(r: Run) -> Outcome:
    i = r.layer
    weights = attention_point("decoder_self", i, "weights")

    def hard(w):
        return torch.nn.functional.one_hot(w.argmax(-1), w.size(-1)).to(w.dtype)

    def why(b, a, m) -> str:
        was, now = m["loss"]
        spread = m["entropy"][0]
        if now > was:
            said = "a weighted average of several tokens carries more than the one best token alone"
        else:
            said = (f"here the hard choice costs nothing on your text: this layer's rows already lean on one key "
                    f"(entropy {spread:.2f} nats)")
        return (f"{said}; and only a smooth softmax can be trained, the argmax has no gradient. "
                + _loss_sentence(b, a, m))

    return _lm_outcome(
        r, f"layer {i + 1}'s softmax becomes a hard choice: each row puts all its weight on its best key",
        {weights: hard}, why, read=(weights,), measure=_head_entropy(weights, None))


def _heads_kept(r: Run, keep: torch.Tensor, change: str, why) -> Outcome:
    """Layer `r.layer`'s heads where `keep` (H,) is False write 0 (their weighted sums, before W_O)."""
    return _lm_outcome(r, change, {attention_point("decoder_self", r.layer, "heads"): HeadMask(keep, "zero", True)},
                       why)


def lm_weighted_sum(r: Run) -> Outcome:
    keep = torch.zeros(r.model.config.n_head, dtype=torch.bool)
    keep[r.head] = True
    return _heads_kept(r, keep, f"in layer {r.layer + 1} only head {r.head + 1} writes; the other heads' weighted "
                                "sums are set to 0",
                       lambda b, a, m: ("one head alone carries part of what the layer's heads read together. "
                                        + _loss_sentence(b, a, m)))


def lm_heads(r: Run) -> Outcome:
    keep = torch.ones(r.model.config.n_head, dtype=torch.bool)
    keep[r.head] = False
    return _heads_kept(r, keep, f"head {r.head + 1} of layer {r.layer + 1} is knocked out (its output set to 0)",
                       lambda b, a, m: (f"P(“{r.label(int(b.argmax()))}”) moves by "
                                        f"{float(a[b.argmax()] - b[b.argmax()]):+.3f}: how much this text's prediction "
                                        "leans on this one head. " + _loss_sentence(b, a, m)))


def lm_residual(r: Run) -> Outcome:
    i, store = r.layer, {}
    patch = {f"decoder.{i}.attn.out": _recorder(store, "out"), f"decoder.{i}.attn.resid": lambda _: store["out"]}
    if not r.model.config.norm_first:  # post-norm: the norm of the sublayer's output alone
        sub = r.model.point_owner(f"decoder.{i}.attn.resid")
        patch[f"decoder.{i}.attn.resid"] = lambda _: sub.norm(store["out"])
    return _lm_outcome(
        r, f"layer {i + 1}'s attention output replaces the residual stream instead of being added to it",
        patch,
        lambda b, a, m: ("without the skip connection, everything the layers below wrote (the token itself "
                         "included) is lost at this layer. " + _loss_sentence(b, a, m)))


def lm_ffn(r: Run) -> Outcome:
    i = r.layer

    def guesses(seen_before, seen_after):  # the two passes' logits, read at their named point
        changed = (seen_before["logits"].argmax(-1) != seen_after["logits"].argmax(-1)).sum()
        return {"guesses_changed": (0.0, float(changed))}

    outcome = _lm_outcome(r, f"layer {i + 1}'s feed-forward network is skipped (it writes 0)",
                          {f"decoder.{i}.ffn.out": torch.zeros_like}, _loss_sentence, read=("logits",),
                          measure=guesses)
    changed_guesses = int(outcome.measures["guesses_changed"][1])
    outcome.verdict += (f" {changed_guesses} of the {r.ids.size(1)} next-token guesses over your text change. The "
                        f"feed-forward network is {_ffn_share(r.model.config):.0%} of a layer's weights and works on "
                        "each position alone: attention moves information between tokens, the FFN transforms it.")
    return outcome


def lm_stack(r: Run) -> Outcome:
    n = r.model.config.n_layer
    if n == 1:
        raise Unavailable("a one-layer model has no layer above the first to remove")
    k = min(r.layer, n - 2)  # the chosen layer, or the one below the last: something to remove
    patch = {f"decoder.{i}.{part}.out": torch.zeros_like for i in range(k + 1, n) for part in ("attn", "ffn")}
    return _lm_outcome(
        r, f"the model stops after layer {k + 1} of {n}: the layers above add nothing (the logit lens's view)",
        patch,
        lambda b, a, m: (f"what the stream holds after layer {k + 1}, read out by the final norm and the output "
                         f"matrix, is a rougher guess: the upper layers refine it. " + _loss_sentence(b, a, m)))


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
    draws from at `settings` (`model.sampling_distribution`: the generation code's, not a copy)."""
    logits, _ = _lm_logits(r)
    z = logits[-1]
    before, after = z.softmax(-1), sampling_distribution(z, settings)
    entropies = entropy(before), entropy(after)
    kept = int((after > 0).sum())
    verdict = (f"The distribution's entropy goes from {entropies[0]:.2f} to {entropies[1]:.2f} nats and "
               f"{kept:,} token{'s' if kept != 1 else ''} can still be drawn: {_sampler_effect(z, settings)}")
    return Outcome(change, _top(r, before), _top(r, after), verdict, {"entropy": entropies})


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
    "embedding": lm_embedding, "position": lm_position, "norm": lm_norm, "qkv": lm_qkv, "scaling": lm_scaling,
    "mask": lm_mask, "softmax": lm_softmax, "weighted_sum": lm_weighted_sum, "heads": lm_heads,
    "residual": lm_residual, "ffn": lm_ffn, "stack": lm_stack, "probabilities": lm_probabilities,
    "sampling": lm_sampling,
}


def lm_experiment(step: str, model: DecoderOnlyLM, tokenizer: BPETokenizer, ids: torch.Tensor, layer: int = 0,
                  head: int = 0) -> Outcome:
    """The experiment of the LM tour's `step` on `ids` (1, T), at the tour's layer and head."""
    return LM_EXPERIMENTS[step](Run(model, tokenizer, ids, layer, head))
