"""Which source tokens made the sentiment classifier write its label: token attributions, by six
methods, and the tests that say how faithful each one is.

The classifier is text-to-text (`EncoderDecoder`): the decoder scores each label's words given the
review, and a softmax over those scores gives the class probabilities (`EncoderDecoder.candidate_scores`). Every
method explains the label the model writes (the argmax), unless another `label` is asked for.

    from inspection import METHODS, attribute, attribute_methods, erase, rank_correlation   # erase: faithfulness.py
    result = attribute(model, src_ids, candidates, "integrated_gradients")   # src_ids: (S,) or (1, S)
    result.scores          # (S,) one score per source token, the end token included; higher = more for the label
    result.label           # index into `candidates` of the explained label
    result.probabilities   # (K,) class probabilities of the full review
    erase(model, src_ids, candidates, result.scores, result.label, (0.1,))  # P(label) once the top 10% are deleted
    attribute_methods(model, src_ids, candidates, METHODS)   # {method: Attribution}, one shared encoder pass

`candidates` are the label words as token ids (`classifier.Reader.candidates`, from its classifier.json's labels).
The methods, registered by name in `ATTRIBUTIONS` (`METHODS` lists the names, `DESCRIPTIONS` gives
each a line for the app). Adding a method is one `ATTRIBUTIONS` entry, a function of `Request`
returning `Scores`, plus its `DESCRIPTIONS` line: `attribute`, the app, the faithfulness and speed
benchmarks and the registry tests pick it up by name.

- `attention`: the label step's cross-attention (the decoder's first step, the one that writes the
  label's first token), averaged over heads and decoder layers. What the app showed before; not an
  explanation on its own (Jain & Wallace, 2019).
- `rollout`: attention rollout (Abnar & Zuidema, 2020): each encoder layer's head-averaged
  self-attention with the residual folded in, 0.5·(A + I), rows renormalised, multiplied through
  the layers, and the cross-attention row pushed through that product back to the input tokens.
- `grad_x_input`: gradient × input on the token embeddings, summed over the embedding dimension.
- `integrated_gradients` (Sundararajan et al., 2017): the gradient averaged along the straight
  path from a baseline of pad embeddings (same positions, same length) to the review, times
  (input − baseline). The path integral uses Gaussian quadrature (`inspection/quadrature.py`),
  evaluated in batches: with the same passes it leaves a smaller completeness gap (scores sum to
  f(input) − f(baseline), `Attribution.baseline_target`) than the midpoint Riemann sum. By
  default it tries Gauss's 7 nodes, then their Kronrod 15-point extension (8 passes more, the 7
  reused), then Gauss–Legendre `IG_MAX_STEPS`, until the gap is within `IG_TOLERANCE` (of
  f(input) − f(baseline), or `IG_ABS_TOLERANCE` nats if larger), so only hard reviews pay for more
  (`Attribution.steps`: the nodes of the rule used; `.passes`: the gradients computed).
  `steps=n` asks for Gauss–Legendre n nodes instead, doubled up to `max_steps`; pass `steps=64`
  where time does not matter.
- `occlusion`: leave-one-out, batched: f(review) − f(review with the unit deleted), every token of
  a unit getting the unit's score. Deleted means removed from the sequence (later tokens move up a
  position), exactly as a visitor would delete it. A unit is one token when the review has at most
  `max_units` = max(OCCLUSION_MIN_UNITS, OCCLUSION_TOKEN_BUDGET // S) tokens; past that one word
  (`word_ids`, e.g. from `tokenization.word_ids(token_texts)`), and past `max_units` words a run
  of consecutive words: each unit costs a pass over the whole review, so the budget of tokens
  encoded (`OCCLUSION_TOKEN_BUDGET`) sets the count.
- `random`: uniform noise from a seeded generator: the floor every method must beat.

The explained quantity f is the *log*-probability of the label among the candidates. For two
classes log p = −log(1 + e^(−margin)): close to linear in the decoder's score margin wherever the
label is not yet certain (along the integrated-gradients path from a baseline that predicts
nothing), where p itself is a sigmoid that flattens at both ends; and log-probabilities of
deletions add up. A gradient of p is the gradient of log p times p, so grad × input ranks tokens
identically either way, and occlusion, a monotone transform of the same deletions, ranks them
identically too. The faithfulness tests (`inspection/faithfulness.py`) use the probability itself, as
ERASER (DeYoung et al., 2020) defines comprehensiveness and sufficiency.

The special tokens (pad, bos, eos) get scores like any position, but are never deleted by
occlusion (score 0) or by `erase`: they are the sequence's frame, not the review's words.
"""

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from classifier import Reader
from model import EncoderDecoder

from .quadrature import Rule, gauss_7, gauss_kronrod_15, gauss_legendre

# Integrated gradients' quadrature, cheapest first: Gauss 7 nodes, then the Kronrod 15-point rule
# that contains those 7 (so refining costs 8 passes more, not 15), then Gauss-Legendre IG_MAX_STEPS.
# Each node is one forward/backward pass. `python -m benchmarks.faithfulness` reports the passes it
# took ("mean_passes": 9.7 on 100 held-out reviews, against 16 for Gauss-Legendre 16).
IG_MAX_STEPS = 32
IG_TOLERANCE = 0.05  # of |f(input) - f(baseline)|, or IG_ABS_TOLERANCE where that is larger
IG_ABS_TOLERANCE = 0.01  # nats: a 1% change of the probability
OCCLUSION_TOKEN_BUDGET = 8_000  # source tokens encoded per occlusion: ~2 s on one CPU thread (0.26 ms a token)
OCCLUSION_MIN_UNITS = 16
BATCH = 16  # rows per forward pass for the batched methods


@dataclass
class Attribution:
    method: str
    scores: torch.Tensor  # (S,) float32 on CPU, one per source token
    label: int  # index into the candidates of the explained label
    probabilities: torch.Tensor  # (K,) float32 on CPU, class probabilities of the full source
    target: float  # f(source): log-probability of the label among the candidates
    baseline_target: float | None = None  # integrated_gradients: f(baseline); sum(scores) ≈ target - this
    steps: int | None = None  # integrated_gradients: the nodes of the quadrature rule used
    passes: int | None = None  # integrated_gradients: gradients computed (nodes of every rule tried, shared once)


def attribute(model: EncoderDecoder, src_ids: torch.Tensor, candidates: list[list[int]], method: str,
              src_mask: torch.Tensor | None = None, **options) -> Attribution:
    """Scores per source token for `label` (default: the label the model writes) by `method`.

    src_ids: (S,) or (1, S), one source as the model reads it (`encode(text) + [eos]`); src_mask
    (same shape, 1 = real) drops padded positions, which score 0. The keyword `options` are
    `attribute_methods`'s: `label`, `steps`, `max_steps`, `seed`, `word_ids`, `max_units`.
    """
    return attribute_methods(model, src_ids, candidates, (method,), src_mask, **options)[method]


def attribute_methods(model: EncoderDecoder, src_ids: torch.Tensor, candidates: list[list[int]],
                      methods: Sequence[str], src_mask: torch.Tensor | None = None, *,
                      label: int | None = None, steps: int | None = None, max_steps: int | None = None,
                      seed: int = 0, word_ids: Sequence[int] | None = None,
                      max_units: int | None = None) -> dict[str, Attribution]:
    """`attribute` by several methods at once -> {method: Attribution}: the source is encoded once
    for all of them (the label, f(source), and the maps attention and rollout read), which is
    what "compare all methods" saves over one call per method.

    `steps`: integrated gradients' quadrature (`ig_rules`): None for the nested Gauss–Kronrod
    ladder, or Gauss–Legendre `steps` nodes doubled up to `max_steps` (default: the larger of
    `steps` and IG_MAX_STEPS) while the completeness gap is over tolerance. `seed`: the random
    method's. `word_ids` (S,): the word of each token, for occlusion of long reviews; `max_units`
    overrides occlusion's budget-derived number of units.
    """
    model = explained(model)
    unknown = [m for m in methods if m not in ATTRIBUTIONS]
    if unknown:
        raise ValueError(f"unknown attribution method {unknown[0]!r}; choose one of {', '.join(METHODS)}")
    ids = src_ids.reshape(-1)
    keep = torch.ones_like(ids, dtype=torch.bool) if src_mask is None else src_mask.reshape(-1).bool()
    if ids.numel() != keep.numel():
        raise ValueError(f"src_mask has {keep.numel()} positions, src_ids {ids.numel()}")
    if not keep.any():
        raise ValueError("nothing to attribute: the source is empty")
    if len(candidates) < 2:
        raise ValueError("attribution needs at least two candidate labels")
    with torch.inference_mode(False):
        ids = ids[keep].clone()[None]  # (1, S'): a plain tensor even when the caller is in inference mode
    words = None if word_ids is None else [w for w, k in zip(word_ids, keep.tolist(), strict=True) if k]

    shading = not {"attention", "rollout"}.isdisjoint(methods)  # they read the label step's cross-attention
    with evaluating(model):
        with torch.inference_mode():
            memory, enc_maps = model.encode(ids, output_attentions="rollout" in methods)
            if shading:  # one decoder pass gives the scores and the maps
                log_probs, dec_maps = model.log_probs_and_maps(memory, candidates)
            else:
                log_probs = model.log_probs(memory, candidates)
            log_probs = log_probs[0]  # (K,)
        label = int(log_probs.argmax()) if label is None else label
        if not 0 <= label < len(candidates):
            raise ValueError(f"label {label} is outside 0..{len(candidates) - 1}")
        cross = label_step_attention(dec_maps, label) if shading else None
        request = Request(model, ids, candidates, label, float(log_probs[label]), memory, enc_maps, steps, max_steps,
                          seed, words, max_units, cross)
        results = {}
        for method in methods:
            scores, baseline, quadrature = ATTRIBUTIONS[method](request)
            full = torch.zeros(keep.numel())
            full[keep.cpu()] = scores.detach().float().cpu()
            results[method] = Attribution(method, full, label, log_probs.exp().cpu(), float(log_probs[label]),
                                          baseline, *(quadrature or (None, None)))
    return results


def explained(model: torch.nn.Module) -> torch.nn.Module:
    """What the methods explain: a sentiment checkpoint's `classifier.Reader` (an encoder-decoder is
    wrapped in one), or anything with the same `embed`, `encode`, `log_probs` and `config`
    (`inspection.token_attribution.NextToken`, the LM's next token)."""
    return Reader(model) if isinstance(model, EncoderDecoder) else model


@contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode while scoring (dropout would make every score noise), each module's mode restored
    after. Only the modules in training mode are switched: `eval()` then `train(False)` walk and set
    every module (~120 here), ~2 ms of each classification for a model the app keeps in eval mode."""
    training = [m for m in model.modules() if m.training]
    for m in training:
        m.training = False
    try:
        yield
    finally:
        for m in training:
            m.training = True


def label_step_attention(maps: list, label: int) -> torch.Tensor:
    """The cross-attention of the step that writes candidate `label`'s first token, averaged over
    heads and decoder layers -> (S,). `maps`: a scoring pass's (`Reader.log_probs_and_maps`, one
    source), whose weights are (K, H, width, S); row `label` is that candidate, query 0 its first step."""
    return torch.stack([m.weights[label, :, 0, :] for m in maps if m.kind == "cross"]).float().mean((0, 1))


@dataclass
class Request:
    """What every method gets: the unpadded source (1, S), the label to explain, f(source), and the
    encoder pass `attribute` already made (its self-attention maps only for rollout). The gradient,
    occlusion and random methods read only `model.embed`, `.encode`, `.log_probs` and
    `.config`: `inspection/token_attribution.py` passes the LM's next token through that interface."""

    model: EncoderDecoder
    ids: torch.Tensor  # (1, S)
    candidates: list[list[int]]
    label: int
    target: float  # f(source)
    memory: torch.Tensor  # (1, S, C)
    enc_maps: list
    ig_steps: int | None  # integrated gradients' quadrature, as `ig_rules` reads them
    ig_max_steps: int | None
    seed: int
    words: list[int] | None
    max_units: int | None
    cross: torch.Tensor | None = None  # (S,) `label_step_attention`, when attention or rollout is asked for


# (S,) scores, f(baseline), (nodes of the rule used, gradients computed): the last two for IG only
Scores = tuple[torch.Tensor, float | None, tuple[int, int] | None]


def ig_rules(steps: int | None = None, max_steps: int | None = None) -> list[Rule]:
    """Integrated gradients' quadrature rules, cheapest first, each tried while the one before it
    left the completeness gap over tolerance. None: Gauss 7, its Kronrod 15 extension (which reuses
    the 7 gradients), Gauss–Legendre `max_steps` (default IG_MAX_STEPS). `steps`: Gauss–Legendre
    `steps`, 2·`steps`, ... up to `max_steps` (default the larger of `steps` and IG_MAX_STEPS)."""
    if steps is None:
        return [gauss_7(), gauss_kronrod_15(), gauss_legendre(max_steps or IG_MAX_STEPS)]
    if steps < 1:
        raise ValueError(f"integrated gradients needs at least one step, got {steps}")
    top, rules = max(steps, max_steps or IG_MAX_STEPS), [gauss_legendre(steps)]
    while steps < top:
        steps = min(2 * steps, top)
        rules.append(gauss_legendre(steps))
    return rules


def _target(model: EncoderDecoder, candidates, label: int, src_ids=None, src_mask=None, inputs_embeds=None):
    """f: log P(label | source) among the candidates -> (B,)."""
    memory, _ = model.encode(src_ids, src_mask, inputs_embeds=inputs_embeds)
    return model.log_probs(memory, candidates, src_mask)[:, label]


@torch.inference_mode()
def _attention(r: Request, rollout: bool) -> torch.Tensor:
    return attention_rollout([m.weights[0] for m in r.enc_maps], r.cross) if rollout else r.cross


def attention_rollout(layers: list[torch.Tensor], row: torch.Tensor) -> torch.Tensor:
    """Abnar & Zuidema's rollout: `row` (S,), weights over the last layer's positions, pushed back
    to the input tokens through each layer's self-attention (H, S, S), heads averaged and the
    residual folded in -> (S,). Shared by the classifier's encoder and the LM (token_attribution)."""
    eye = torch.eye(row.numel(), device=row.device)
    flow = eye  # (S, S): how much of each layer's position i comes from input token j
    for w in layers:
        a = 0.5 * (w.float().mean(0) + eye)  # heads averaged, residual folded in
        flow = (a / a.sum(-1, keepdim=True)) @ flow
    return row.float() @ flow


def _embed(model: EncoderDecoder, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.embed(ids)  # (1, S, C), the scaled embeddings `encode` takes as inputs_embeds


@torch.inference_mode(False)
def _grad_x_input(model, ids, candidates, label) -> torch.Tensor:
    x = _embed(model, ids).requires_grad_()
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(_target(model, candidates, label, inputs_embeds=x).sum(), x)
    return (grad * x).sum(-1)[0]


@torch.inference_mode(False)
def _integrated_gradients(model, ids, candidates, label, target: float,
                          rules: list[Rule]) -> tuple[torch.Tensor, float, tuple[int, int]]:
    """-> scores (S,), f(baseline), (nodes of the rule used, gradients computed): the first of
    `rules` whose completeness gap is within tolerance, else the last (module doc)."""
    x = _embed(model, ids)  # (1, S, C)
    x0 = _embed(model, torch.full_like(ids, model.config.pad_token_id))  # the pad baseline
    with torch.inference_mode():
        f0 = float(_target(model, candidates, label, inputs_embeds=x0)[0])
    gap = target - f0
    node_scores: dict[float, torch.Tensor] = {}  # α -> (S,): nested rules share their nodes' passes
    for rule in rules:
        new = [a for a in rule.nodes.tolist() if a not in node_scores]
        if new:
            node_scores.update(zip(new, _node_scores(model, x, x0, candidates, label, new), strict=True))
        scores = sum(w * node_scores[a] for a, w in zip(rule.nodes.tolist(), rule.weights.tolist(), strict=True))
        if abs(float(scores.sum()) - gap) <= max(IG_TOLERANCE * abs(gap), IG_ABS_TOLERANCE):
            break
    return scores, f0, (len(rule.nodes), len(node_scores))


def _node_scores(model, x, x0, candidates, label, alphas: list[float]) -> torch.Tensor:
    """(x - x0) · ∇f(x0 + α(x - x0)) at each α, summed over the embedding dim -> (n, S); a rule's
    integrated gradients are these rows weighted by its weights."""
    out = []
    for a in torch.tensor(alphas, dtype=x.dtype, device=x.device).split(BATCH):
        path = (x0 + a[:, None, None] * (x - x0)).requires_grad_()  # (b, S, C)
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(_target(model, candidates, label, inputs_embeds=path).sum(), path)
        out.append(((x - x0) * grad).sum(-1))  # (b, S)
    return torch.cat(out)


def special_mask(model: EncoderDecoder, ids: torch.Tensor) -> torch.Tensor:
    c = model.config
    return (ids == c.pad_token_id) | (ids == c.bos_token_id) | (ids == c.eos_token_id)


def _occlusion_units(eligible: list[int], words: Sequence[int] | None, max_units: int) -> list[list[int]]:
    """Groups of positions to delete together: tokens, words, or runs of consecutive words."""
    if len(eligible) <= max_units:
        return [[p] for p in eligible]
    groups: dict[int, list[int]] = {}
    for p in eligible:
        groups.setdefault(words[p] if words is not None else p, []).append(p)
    units = list(groups.values())
    per = math.ceil(len(units) / max_units)
    return [sum(units[i : i + per], []) for i in range(0, len(units), per)]


def _delete(ids: torch.Tensor, drops: list[torch.Tensor], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One row per boolean mask in `drops` (S,): `ids` (S,) without those positions, right-padded
    -> ids (N, S_max), mask (N, S_max)."""
    rows = [ids[~d] for d in drops]
    width = max(len(r) for r in rows)
    out = ids.new_full((len(rows), width), pad_id)
    mask = torch.zeros_like(out)
    for i, r in enumerate(rows):
        out[i, : len(r)], mask[i, : len(r)] = r, 1
    return out, mask


@torch.inference_mode()
def deletion_log_probs(model, ids, drops, candidates, label) -> torch.Tensor:
    """f for each deletion in `drops`, batched -> (N,)."""
    out = []
    for first in range(0, len(drops), BATCH):
        rows, mask = _delete(ids, drops[first : first + BATCH], model.config.pad_token_id)
        out.append(_target(model, candidates, label, rows, mask))
    return torch.cat(out)


def _occlusion(model, ids, candidates, label, target: float, words, max_units) -> torch.Tensor:
    """`target`: f(source), already computed by `attribute`."""
    S = ids.size(1)
    eligible = (~special_mask(model, ids[0])).nonzero().flatten().tolist()
    scores = torch.zeros(S, device=ids.device)
    if not eligible:
        return scores
    if max_units is None:
        max_units = max(OCCLUSION_MIN_UNITS, OCCLUSION_TOKEN_BUDGET // S)
    units = _occlusion_units(eligible, words, max_units)
    drops = []
    for unit in units:
        drop = torch.zeros(S, dtype=torch.bool, device=ids.device)
        drop[unit] = True
        drops.append(drop)
    deleted = deletion_log_probs(model, ids[0], drops, candidates, label)
    for unit, f in zip(units, deleted.tolist(), strict=True):
        scores[unit] = target - f
    return scores


def _random(r: Request) -> Scores:
    return torch.rand(r.ids.size(1), generator=torch.Generator().manual_seed(r.seed)), None, None


# The registry, as HF's ACT2FN: name -> fn(Request) -> Scores. Adding a method is one entry here
# (and its line in DESCRIPTIONS); the app's method list and intro, the benchmarks and the tests read it.
ATTRIBUTIONS: dict[str, Callable[[Request], Scores]] = {
    "attention": lambda r: (_attention(r, False), None, None),
    "rollout": lambda r: (_attention(r, True), None, None),
    "grad_x_input": lambda r: (_grad_x_input(r.model, r.ids, r.candidates, r.label), None, None),
    "integrated_gradients": lambda r: _integrated_gradients(r.model, r.ids, r.candidates, r.label, r.target,
                                                            ig_rules(r.ig_steps, r.ig_max_steps)),
    "occlusion": lambda r: (_occlusion(r.model, r.ids, r.candidates, r.label, r.target, r.words, r.max_units),
                            None, None),
    "random": _random,
}
METHODS = tuple(ATTRIBUTIONS)
# One line per method, for people: the app's explanation intro and the docs read it. A new method
# adds its line here beside its ATTRIBUTIONS entry (a test checks every method has one).
DESCRIPTIONS: dict[str, str] = {
    "attention": "the label step's cross-attention",
    "rollout": "attention traced back through the encoder",
    "grad_x_input": "the gradient on the token embeddings, times the embeddings",
    "integrated_gradients": "gradients averaged on the path from a blank review to this one",
    "occlusion": "the probability lost when a token, word or run of words is deleted",
    "random": "noise: the floor every method must beat",
}
