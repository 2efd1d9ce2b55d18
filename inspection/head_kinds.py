"""Heads with names: score every attention head of a decoder-only LM for behaviours that have names
in the literature, each with a measured criterion, so that "layer 1, head 2" can be called what it
does ("a previous-token head, score 0.43") or, as honestly, nothing in particular.

The kinds (`KINDS`), each a mean attention weight read at the head's `…attn.weights` point:

- `sink`: from every position after the first, the weight on position 0 (the start token `<s>`).
  Many heads park attention there when nothing else is worth reading (Xiao et al. 2023, "attention
  sinks").
- `previous`: from position t, the weight on position t − 1 (t ≥ 2, so that the start token is not
  the previous token): a head that moves each token's information one step forward.
- `induction` (Olsson et al. 2022): on a random token sequence repeated twice, from each token of the
  second copy, the weight on the token that followed its previous occurrence (the token it can copy
  next). The text is random so that nothing but in-context copying can predict the second copy;
  `copy_loss` gives the LM's loss on each copy, the behaviour an induction head produces.
- `negation`: from the word after a negation ("not", "never", "no", "n't"), the weight on the
  negation, minus the weight that head puts on the previous token in general: how much more it reads
  a negation than any previous word (a previous-token head alone scores 0).

A head is named a kind when its score reaches that kind's `THRESHOLDS` entry.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from model import DecoderOnlyLM, attention_point
from tokenization import BPETokenizer, fit_context, prompt_ids

HEADS_NAME = "heads.json"  # the table beside a checkpoint (`python -m benchmarks.heads --store`)
KINDS = ("sink", "previous", "induction", "negation")
THRESHOLDS = {"sink": 0.5, "previous": 0.3, "induction": 0.3, "negation": 0.1}
NEGATIONS = ("not", "never", "no", "n't", "'t")  # "'t": the tokenizer splits "didn't" as "didn" + "'t"
ABOUT = {
    "sink": "parks its attention on the start token",
    "previous": "reads the token just before",
    "induction": "copies what followed an earlier occurrence of the current token",
    "negation": "reads a negation from the word after it",
}


@dataclass(frozen=True)
class HeadScore:
    layer: int  # counted from 0, as in the model's point names
    head: int
    kind: str
    score: float

    @property
    def named(self) -> bool:
        return self.score >= THRESHOLDS[self.kind]


def attention_weights(model: DecoderOnlyLM, ids: torch.Tensor) -> torch.Tensor:
    """Every layer's attention weights of one text (1, T) -> (L, H, T, T)."""
    names = [attention_point("decoder_self", i, "weights") for i in range(model.config.n_layer)]
    with torch.inference_mode(), model.hooks(read=names) as seen:
        model(ids)
    return torch.stack([seen[n][0].float() for n in names])


def on_start(w: torch.Tensor) -> torch.Tensor:
    """(…, T, T) attention weights -> (…, T − 1): from every position after the first, the weight on
    position 0 (what `sink` averages)."""
    return w[..., 1:, 0]


def on_previous(w: torch.Tensor) -> torch.Tensor:
    """(…, T, T) attention weights -> (…, T − 2): from each position t ≥ 2, the weight on t − 1 (what
    `previous` averages; t = 1's previous token is the start token)."""
    t = torch.arange(2, w.size(-1))
    return w[..., t, t - 1]


def on_induction(w: torch.Tensor) -> torch.Tensor:
    """(…, T, T) attention weights over `repeated_random` ids (T = 1 + 2n) -> (…, n − 1): from each token
    of the second copy whose earlier occurrence a token followed in the first copy, the weight on that
    token (what `induction` averages; the last token's successor would be the second copy's own start)."""
    n = (w.size(-1) - 1) // 2
    second = torch.arange(n + 1, 2 * n)  # positions of the second copy, its last one left out
    return w[..., second, second - n + 1]  # the token after the same token's first occurrence


def _negation_positions(tokenizer: BPETokenizer, ids: list[int]) -> list[int]:
    """Positions p whose token is a negation and which a next token follows."""
    words = [tokenizer.decode([i]).strip().lower() for i in ids]
    return [p for p, w in enumerate(words[:-1]) if w in NEGATIONS]


def repeated_random(model: DecoderOnlyLM, length: int, seed: int = 0) -> torch.Tensor:
    """`<s>`, then `length` random ordinary token ids, then the same ids again: (1, 1 + 2·length)."""
    g = torch.Generator().manual_seed(seed)
    c = model.config
    specials = {c.pad_token_id, c.bos_token_id, c.eos_token_id}
    pool = torch.tensor([i for i in range(c.vocab_size) if i not in specials])
    seq = pool[torch.randint(len(pool), (length,), generator=g)]
    return torch.cat([torch.tensor([c.bos_token_id]), seq, seq])[None]


def copy_loss(model: DecoderOnlyLM, ids: torch.Tensor) -> tuple[float, float]:
    """Mean −log p(next token) (nats) on the first and on the second copy of `repeated_random` ids:
    a model that copies in context predicts the second copy far better than the first."""
    n = (ids.size(1) - 1) // 2
    with torch.inference_mode():
        log_p = model(ids).logits[0, :-1].float().log_softmax(-1).gather(-1, ids[0, 1:, None])[:, 0]
    return float(-log_p[1:n].mean()), float(-log_p[n:].mean())  # each copy's tokens after its first


def score_heads(model: DecoderOnlyLM, tokenizer: BPETokenizer, texts: Sequence[str], length: int | None = None,
                seed: int = 0) -> list[HeadScore]:
    """Every head's score for every kind, from `texts` (sink, previous, negation) and a repeated random
    sequence of `length` tokens (induction; default: as long as the context allows, at most 50)."""
    c = model.config
    L, H = c.n_layer, c.n_head
    sums = {kind: torch.zeros(L, H, dtype=torch.float64) for kind in ("sink", "previous", "negation_at")}
    counts = {"sink": 0, "previous": 0, "negation_at": 0}
    for text in texts:
        ids = fit_context(prompt_ids(text, tokenizer), c.block_size, keep="head")
        if len(ids) < 3:
            continue
        w = attention_weights(model, torch.tensor([ids]))  # (L, H, T, T)
        T = w.size(-1)
        sums["sink"] += on_start(w).sum(-1).double()
        counts["sink"] += T - 1
        sums["previous"] += on_previous(w).sum(-1).double()
        counts["previous"] += T - 2
        for p in _negation_positions(tokenizer, ids):
            sums["negation_at"] += w[:, :, p + 1, p].double()
            counts["negation_at"] += 1
    mean = {k: sums[k] / max(counts[k], 1) for k in sums}
    scores = {"sink": mean["sink"], "previous": mean["previous"], "induction": induction_scores(model, length, seed),
              "negation": (mean["negation_at"] - mean["previous"]) if counts["negation_at"] else None}
    return [HeadScore(layer, head, kind, round(float(scores[kind][layer, head]), 4))
            for kind in KINDS if scores[kind] is not None for layer in range(L) for head in range(H)]


def induction_scores(model: DecoderOnlyLM, length: int | None = None, seed: int = 0,
                     weights: torch.Tensor | None = None) -> torch.Tensor:
    """(L, H): each head's induction score on a random sequence of `length` tokens shown twice
    (default: as long as the context allows, at most 50): from each token of the second copy, the
    weight on the token that followed its first occurrence. `weights`: the model's (L, H, T, T)
    attention on `repeated_random(model, length, seed)`, when already read."""
    n = length or min(50, (model.config.block_size - 1) // 2)
    w = attention_weights(model, repeated_random(model, n, seed)) if weights is None else weights
    return on_induction(w).mean(-1).double()


def describe(scores: Sequence[HeadScore], layer: int, head: int) -> str:
    """One line for the tour's head picker: what this head is, by its named kinds and their scores."""
    own = [s for s in scores if (s.layer, s.head) == (layer, head)]
    named = sorted((s for s in own if s.named), key=lambda s: -s.score)
    where = f"layer {layer + 1}, head {head + 1}"
    if named:
        return f"{where}: " + "; ".join(f"{ABOUT[s.kind]} ({s.kind} score {s.score:.2f})" for s in named)
    best = max(own, key=lambda s: s.score / THRESHOLDS[s.kind], default=None)
    return (f"{where}: no named behaviour" + (f" (closest: {best.kind} {best.score:.2f}, named from "
                                                f"{THRESHOLDS[best.kind]:.2f})" if best else ""))
