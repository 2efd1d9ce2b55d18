"""Knock heads out: the change in P(label) or in the next token's probability when a set of
attention heads is ablated, and every head ranked by its own effect beside where it looks (no
Gradio here; `demo.tabs.ablation_panel` shows it). The mechanism is `inspection.ablation`.

A visitor names heads as the panel lists them: "L2 H3" for the language model; "enc L2 H3",
"dec L1 H3" and "cross L1 H3" for the sentiment model's encoder, decoder and cross-attention.
"""

import copy
import re
import threading
import weakref
from dataclasses import dataclass

import torch

from demo.serving import LM, Checkpoint, DemoError, DemoService, visitor_text
from demo.views.sentiment import labels_and_candidates, reader_of, review_source
from demo.views.tokens import EMPTY_TEXT
from inspection import MODES, Head, ablate, all_heads, classifier_head_effects, lm_head_effects, rank_correlation
from tokenization import in_word, prompt_ids, token_label, visible

PREFIXES = {"encoder_self": "enc ", "decoder_self": "dec ", "cross": "cross "}  # the sentiment model's kinds
NO_HEADS = "Pick at least one head to knock out."
_HEAD = re.compile(r"^\s*(enc|dec|cross)?\s*L(\d{1,3})\s*H(\d{1,3})\s*$", re.IGNORECASE)
_copies: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # served model -> (its copy, the copy's lock)
_copies_lock = threading.Lock()


def head_name(ckpt_name: str, head: Head) -> str:
    prefix = "" if ckpt_name == LM else PREFIXES[head.kind]
    return f"{prefix}L{head.layer + 1} H{head.head + 1}"


def lm_head_name(layer: int, head: int) -> str:
    """A language-model head by its layer and head (from 0) as the pages name it: "L1 H2" (counted from 1)."""
    return head_name(LM, Head("decoder_self", layer, head))


def head_names(service: DemoService, model_name: object) -> list[str]:
    """Every head of the served model `model_name`, as the panel lists them."""
    ckpt = service.checkpoint(model_name)
    model, _ = ckpt.require()
    return [head_name(ckpt.name, h) for h in all_heads(model)]


def parse_heads(ckpt: Checkpoint, names: object) -> list[Head]:
    """Visitor head names (a list, or one comma-separated string) -> heads; unknown names are refused."""
    model, _ = ckpt.require()
    if isinstance(names, str):
        names = names.split(",")
    if not isinstance(names, list | tuple) or not [n for n in names if str(n).strip()]:
        raise DemoError(NO_HEADS)
    known = {head_name(ckpt.name, h): h for h in all_heads(model)}
    heads = []
    for name in (str(n) for n in names if str(n).strip()):
        match = _HEAD.match(name[:40])
        key = match and f"{(match[1] or '').lower()}{' ' if match[1] else ''}L{int(match[2])} H{int(match[3])}"
        if key not in known:
            first, last = next(iter(known)), list(known)[-1]
            raise DemoError(f"There is no head {name[:40]!r} in the {ckpt.name} model: heads go from "
                            f"“{first}” to “{last}”.")
        heads.append(known[key])
    return heads


def check_mode(mode: object) -> str:
    if mode not in MODES:
        raise DemoError(f"Unknown ablation {str(mode)[:20]!r}: choose {' or '.join(MODES)}.")
    return mode  # type: ignore[return-value]


def _private_copy(ckpt: Checkpoint):
    """The checkpoint's model copied once for ablation, and the lock its users take: ablating
    changes the model for every thread, and the shared one keeps serving everybody else."""
    with _copies_lock:
        if ckpt.model not in _copies:
            _copies[ckpt.model] = (copy.deepcopy(ckpt.model).eval(), threading.Lock())
        return _copies[ckpt.model]


@dataclass
class Target:
    """What the ablation is measured on: the text as the model reads it, and the prediction."""

    ids: torch.Tensor  # (1, T): the LM's [bos] + text, or the classifier's source
    tokens: list[str]  # the tokens of `ids`, for display
    index: int  # the label index, or the next token's id
    name: str  # “positive”, or the next token shown
    notices: list[str]


def _target(ckpt: Checkpoint, text: object, model) -> Target:
    tok = ckpt.tokenizer
    if ckpt.name == LM:
        text, notices = visitor_text(text)
        ids = prompt_ids(text, tok)
        if len(ids) == 1:
            raise DemoError(EMPTY_TEXT)
        block = model.config.block_size
        if len(ids) > block:
            notices.append(f"The text is {len(ids)} tokens with the start token; the model reads the last {block}.")
            ids = ids[-block:]
        ids_t = torch.tensor([ids], device=ckpt.device)
        with torch.inference_mode():
            token = int(model(ids_t).logits[0, -1].argmax())
        return Target(ids_t, [token_label(tok, i) for i in ids], token, visible(token_label(tok, token), True),
                      notices)
    source = review_source(ckpt, text)
    labels, candidates = labels_and_candidates(ckpt)
    with torch.inference_mode():
        label = int(reader_of(ckpt, model).read(source.ids, candidates=candidates)[0].argmax())
    return Target(source.ids, [token_label(tok, i) for i in source.ids[0].tolist()], label, labels[label],
                  source.notices)


def _probability(ckpt: Checkpoint, model, target: Target) -> float:
    with torch.inference_mode():
        if ckpt.name == LM:
            return float(model(target.ids).logits[0, -1].float().softmax(-1)[target.index])
        return float(reader_of(ckpt, model).read(target.ids)[0, target.index].exp())


@dataclass
class AblationResult:
    heads: list[str]
    mode: str
    prediction: str  # what the probability is of: “P(positive)” or “P(next token “ great”)”
    before: float
    after: float
    notices: list[str]


def _prediction(ckpt: Checkpoint, target: Target) -> str:
    return f"P({target.name})" if ckpt.name != LM else f"P(next token “{target.name}”)"


def ablate_heads(service: DemoService, model_name: object, text: object, heads: object,
                 mode: object = "zero") -> AblationResult:
    """The probability of the prediction of the served model `model_name` with every head, and with
    `heads` knocked out."""
    ckpt = service.checkpoint(model_name)
    with service.compute():
        ckpt.require()
        mode = check_mode(mode)
        chosen = parse_heads(ckpt, heads)
        model, lock = _private_copy(ckpt)
        with lock:
            target = _target(ckpt, text, model)
            before = _probability(ckpt, model, target)
            with ablate(model, chosen, mode):
                after = _probability(ckpt, model, target)
        return AblationResult([head_name(ckpt.name, h) for h in chosen], mode, _prediction(ckpt, target), before, after,
                              target.notices)


@dataclass
class HeadRow:
    head: str
    ablated: float  # the probability with this head knocked out
    delta: float  # ablated - base
    looks_at: str  # the token this head attends to most (from the prediction's query row), inside its word
    weight: float  # and its weight


@dataclass
class HeadRanking:
    mode: str
    prediction: str
    base: float
    rows: list[HeadRow]  # by |delta|, largest first
    agreement: float  # Spearman's rank correlation of |delta| with the top attention weight, over heads
    notices: list[str]


def _looks_at(ckpt: Checkpoint, model, target: Target) -> dict[Head, tuple[str, float]]:
    """Each head's most-attended key token, shown inside its word ("ne[g]ative", `in_word`), and its
    weight, read where the prediction is made: the LM's last query; the classifier's label step in
    cross-attention (as the app's attention shading reads it); elsewhere, where no one row makes the
    prediction, the mean over the queries (in the decoder's self-attention the label step's row alone
    would be trivial: it sees only the start)."""
    tok = ckpt.tokenizer
    with torch.inference_mode():
        if ckpt.name == LM:
            maps = model(target.ids, output_attentions=True).attentions
            rows = {m.layer: m.weights[0, :, -1] for m in maps}  # (H, T)
            return {Head("decoder_self", layer, h): (in_word(target.tokens, int(w.argmax())), float(w.max()))
                    for layer, ws in rows.items() for h, w in enumerate(ws)}
        memory, enc_maps = model.encode(target.ids, output_attentions=True)
        label_ids = labels_and_candidates(ckpt)[1][target.index]
        tgt = [model.config.bos_token_id, *label_ids]
        _, dec_maps = model.decode(torch.tensor([tgt], device=target.ids.device), memory, output_attentions=True)
    looks = {}
    for m in enc_maps + dec_maps:
        keys = [token_label(tok, i) for i in tgt] if m.kind == "decoder_self" else target.tokens
        rows = m.weights[0, :, 0].float() if m.kind == "cross" else m.weights[0].float().mean(1)  # (H, T_k)
        for h, w in enumerate(rows):
            looks[Head(m.kind, m.layer, h)] = (in_word(keys, int(w.argmax())), float(w.max()))
    return looks


def rank_heads(service: DemoService, model_name: object, text: object, mode: object = "zero") -> HeadRanking:
    """Every head of the served model `model_name` knocked out alone (one pass each, batched by
    `inspection.ablation`), ranked by how much the prediction's probability moves, beside the token
    each head looks at most."""
    ckpt = service.checkpoint(model_name)
    with service.compute(heavy=True):
        _, tok = ckpt.require()
        mode = check_mode(mode)
        model, lock = _private_copy(ckpt)
        with lock:
            target = _target(ckpt, text, model)
            if ckpt.name == LM:
                effects = lm_head_effects(model, target.ids, target.index, mode)
            else:
                candidates = labels_and_candidates(ckpt)[1]
                effects = classifier_head_effects(reader_of(ckpt, model), target.ids, candidates, target.index, mode)
            looks = _looks_at(ckpt, model, target)
        rows = [HeadRow(head_name(ckpt.name, h), p, p - effects.base, visible(looks[h][0].strip(), True), looks[h][1])
                for h, p in effects.ablated.items()]
        rows.sort(key=lambda r: -abs(r.delta))
        agreement = rank_correlation(torch.tensor([abs(r.delta) for r in rows]), torch.tensor([r.weight for r in rows]))
        return HeadRanking(mode, _prediction(ckpt, target), effects.base, rows, agreement, target.notices)
