"""Why did the language model write *this* token? The classifier's attribution methods
(`inspection.attribution`), applied to one token of a `DecoderOnlyLM`'s text.

    from inspection import attribute_token
    r = attribute_token(lm, ids, position, "integrated_gradients")   # ids: (T,) prompt + generated
    r.scores       # (position,) one per earlier token; the explained token and later ones get none
    r.target       # f(context) = log p(ids[position] | ids[:position])
    attribute_token(lm, ids, position, "grad_x_input", alternative=other_id)   # contrastive
    token_faithfulness(lm, ids, r)   # ERASER's comprehensiveness and sufficiency of p(token)

The explained quantity f is the token's log-probability given everything before it, or, with an
`alternative` token id, log p(token) − log p(alternative): why this token *rather than* that one
(contrastive explanations, Yin & Neubig, 2022). The two scores are a difference of two f's, so the
linear methods (gradient × input, occlusion) give exactly the difference of the two single-token
attributions, and integrated gradients does too at a fixed number of nodes.

One implementation for both models: integrated gradients, gradient × input, occlusion and random
are the registry's functions (`ATTRIBUTIONS`), run on `NextToken`, which shows the LM through the
interface those functions read (`embed`, `encode`, `log_probs`, `config`): the "source" is
the context, the one "label" is f. Only the attention methods differ, since the LM has
self-attention where the classifier has cross-attention: `attention` is the explained position's
attention row (heads and layers averaged), `rollout` pushes that position back to the input tokens
through every layer (`attention_rollout`). The context is what the model saw: the last
`block_size` tokens before the position (generation slides that window); earlier tokens score 0.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from model import DecoderOnlyLM

from .attribution import ATTRIBUTIONS, METHODS, Request, Scores, attention_rollout, evaluating
from .faithfulness import ERASER_FRACTIONS, erase


class NextToken(nn.Module):
    """f(context) = log p(token | context) [− log p(alternative | context)] of a `DecoderOnlyLM`,
    presented as the classifier's interface: `encode` gives the next-token log-probabilities after
    each row's last real token, `log_probs` the one column f. Right-padded rows (occlusion's
    deletions) need no mask inside the LM: causality keeps pads from reaching earlier positions."""

    def __init__(self, lm: DecoderOnlyLM, token: int, alternative: int | None = None):
        super().__init__()
        self.lm, self.token, self.alternative = lm, token, alternative
        self.config = lm.config

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm.embed(ids)  # (B, T, C), the scaled embeddings `forward` takes as inputs_embeds

    def encode(self, src_ids, src_mask=None, output_attentions=False, inputs_embeds=None):
        """-> next-token log-probabilities (B, vocab) after each row's last real token, attention maps."""
        out = self.lm(src_ids, inputs_embeds=inputs_embeds, output_attentions=output_attentions)
        logits = out.logits  # (B, T, vocab)
        if src_mask is None:
            last = logits[:, -1]
        else:
            last = logits[torch.arange(logits.size(0)), src_mask.sum(1) - 1]
        return last.float().log_softmax(-1), out.attentions

    def log_probs(self, memory, candidates=None, src_mask=None) -> torch.Tensor:
        """memory: (B, vocab) log-probabilities -> f (B, 1)."""
        f = memory[:, self.token]
        return (f if self.alternative is None else f - memory[:, self.alternative])[:, None]


@dataclass
class TokenAttribution:
    method: str
    scores: torch.Tensor  # (position,) float32 on CPU, one per earlier token
    position: int  # index in ids of the explained token
    token: int
    alternative: int | None
    target: float  # f(context): log p(token) [- log p(alternative)]
    log_prob: float  # log p(token | context)
    alternative_log_prob: float | None  # log p(alternative | context)
    window_start: int  # first position the model saw; earlier ones score 0
    baseline_target: float | None = None  # integrated_gradients: f(pad context); sum(scores) ≈ target - this
    steps: int | None = None  # integrated_gradients: the nodes of the quadrature rule used
    passes: int | None = None  # integrated_gradients: gradients computed


def _attention_row(r: Request, rollout: bool) -> torch.Tensor:
    """The last context position's attention (its row feeds the next token's logits) -> (S,)."""
    with torch.inference_mode():
        _, maps = r.model.encode(r.ids, output_attentions=True)
    layers = [m.weights[0] for m in maps]  # (H, S, S) each
    if rollout:
        last = torch.zeros(r.ids.size(1), device=r.ids.device)
        last[-1] = 1.0
        return attention_rollout(layers, last)
    return torch.stack([w[:, -1].float() for w in layers]).mean((0, 1))


# The LM's methods: the registry's, with its cross-attention entries swapped for self-attention ones.
TOKEN_ATTRIBUTIONS: dict[str, Callable[[Request], Scores]] = {
    **ATTRIBUTIONS,
    "attention": lambda r: (_attention_row(r, False), None, None),
    "rollout": lambda r: (_attention_row(r, True), None, None),
}
assert tuple(TOKEN_ATTRIBUTIONS) == METHODS


def attribute_token(lm: DecoderOnlyLM, ids: torch.Tensor | Sequence[int], position: int, method: str, *,
                    alternative: int | None = None, steps: int | None = None, max_steps: int | None = None,
                    seed: int = 0, word_ids: Sequence[int] | None = None,
                    max_units: int | None = None) -> TokenAttribution:
    """Scores per earlier token for ids[position] (contrasted with `alternative`) by `method`.

    ids: (T,) or (1, T) token ids, prompt and generated text; `position` in 1..T-1 (the first
    token has no context). `steps`, `max_steps`, `seed`, `max_units`: as `attribute`'s;
    `word_ids` (T,) the word of each token, for occlusion of long contexts.
    """
    if method not in TOKEN_ATTRIBUTIONS:
        raise ValueError(f"unknown attribution method {method!r}; choose one of {', '.join(METHODS)}")
    flat = torch.as_tensor(ids).reshape(-1)
    if not 1 <= position < flat.numel():
        raise ValueError(f"position {position} is outside 1..{flat.numel() - 1}: a token needs earlier tokens")
    vocab = lm.config.vocab_size
    if alternative is not None and not 0 <= alternative < vocab:
        raise ValueError(f"alternative token {alternative} is outside the vocabulary 0..{vocab - 1}")
    start = max(0, position - lm.config.block_size)
    with torch.inference_mode(False):
        context = flat[start:position].clone()[None]  # (1, S): a plain tensor even under inference mode
    token = int(flat[position])
    words = None if word_ids is None else list(word_ids)[start:position]

    model = NextToken(lm, token, alternative)
    with evaluating(lm):
        with torch.inference_mode():
            log_probs, _ = model.encode(context)  # (1, vocab)
        target = float(model.log_probs(log_probs)[0, 0])
        request = Request(model, context, [[token]], 0, target, None, [], steps, max_steps, seed, words, max_units)
        scores, baseline, quadrature = TOKEN_ATTRIBUTIONS[method](request)
    full = torch.zeros(position)
    full[start:] = scores.detach().float().cpu()
    alt = None if alternative is None else float(log_probs[0, alternative])
    return TokenAttribution(method, full, position, token, alternative, target, float(log_probs[0, token]), alt,
                            start, baseline, *(quadrature or (None, None)))


def token_faithfulness(lm: DecoderOnlyLM, ids: torch.Tensor | Sequence[int], result: TokenAttribution,
                       fractions: Sequence[float] = ERASER_FRACTIONS) -> dict[str, float]:
    """ERASER's comprehensiveness and sufficiency (`inspection.faithfulness`) for the LM: p(token) lost
    when the context tokens `result` ranks highest are deleted, or when only they are kept (AOPC
    over `fractions`). Always p of the token itself, also for a contrastive attribution."""
    context = torch.as_tensor(ids).reshape(-1)[result.window_start : result.position]
    model = NextToken(lm, result.token)
    p = math.exp(result.log_prob)
    scores = result.scores[result.window_start :]
    deleted = erase(model, context, [[result.token]], scores, 0, fractions)
    kept = erase(model, context, [[result.token]], scores, 0, fractions, keep=True)
    return {"comprehensiveness": float((p - deleted).mean()), "sufficiency": float((p - kept).mean())}
