"""The "Watch it learn" tab's computation: one training run's weight snapshots answering one prompt.

For the snapshot picked (`demo.serving.snapshots` finds and loads them): the prompt's continuation
(greedy, or sampled with a fixed seed, so that moving between snapshots changes only the weights),
the probabilities the model gave the token after the prompt, one layer's attention over prompt and
continuation, and the run's loss at that step. A snapshot is a `Checkpoint` record, so the Chat and
Attention computations run on it unchanged. No Gradio here; `demo.tabs.learning` shows it.
"""

from dataclasses import dataclass

import torch

from demo.serving import DemoError, DemoService, read_number, visitor_text
from demo.text import CHAT_EXAMPLES, SENTIMENT_EXAMPLES
from demo.views import chat
from demo.views.attention import AttentionResult, attention_maps
from inspection.head_kinds import copy_loss, repeated_random, score_heads
from tokenization import prompt_ids

NO_SNAPSHOTS = ("No snapshots: the language model served was trained without them. A training run keeps them "
                "(`python -m training.run --task lm --preset laptop ...`); serve it with `python -m demo --lm RUN`.")
MAX_NEW_TOKENS = 24
SAMPLED = {"temperature": 0.8, "top_k": 50, "seed": 0}  # one fixed draw: only the weights change along the slider


@dataclass
class LearningView:
    """What snapshot `index` makes of the prompt."""

    index: int
    step: int
    tokens: int
    val_loss: float | None  # on the run's periodic validation sample, at this step
    continuation: str
    next_token: list[tuple[str, float]]  # the model's top probabilities for the token after the prompt
    attention: AttentionResult  # one layer, over the prompt and the continuation
    notices: list[str]


def learning_view(service: DemoService, index: object, prompt: object, sampled: object = False,
                  layer: object = None) -> LearningView:
    """Snapshot `index` (clamped, with a notice) continuing `prompt`: greedy, or one fixed sampled
    draw; the attention map of `layer` (default: the last) over the prompt and what it wrote. The
    continuation takes the budget's slots token by token (`chat.stream_continuation`), the attention
    pass one slot, as a batched pass."""
    snapshots = service.snapshots
    if snapshots is None:
        raise DemoError(NO_SNAPSHOTS)
    notices = []
    i = int(round(read_number(index, 0)))
    if not 0 <= i < len(snapshots.entries):
        notices.append(f"There are {len(snapshots.entries)} snapshots (0 to {len(snapshots.entries) - 1}): "
                       "showing the nearest.")
        i = min(max(i, 0), len(snapshots.entries) - 1)
    entry, ckpt = snapshots.entries[i], snapshots.checkpoint(i)
    settings = SAMPLED if sampled else {"temperature": 0}
    *_, update = chat.stream_continuation(service, prompt, max_new_tokens=MAX_NEW_TOKENS, lm=ckpt, **settings)
    _, said = chat.generation_config(None, None, MAX_NEW_TOKENS, **settings)  # "0 is greedy": the radio says so
    notices += [n for n in update.notices if n not in said]
    first = update.steps[0] if update.steps else None
    next_token = sorted({first.token: first.prob, **dict(first.alternatives)}.items(), key=lambda kv: -kv[1]) \
        if first else []
    n_layers = ckpt.model.config.n_layer
    layer_i = n_layers - 1 if layer is None else int(round(read_number(layer, n_layers - 1)))
    text = ckpt.tokenizer.decode(list(update.token_ids))  # the prompt as the model read it, and its continuation
    with service.compute(batched=True):
        attention = attention_maps(ckpt, text, "lm_self", layer_i)  # a layer out of range: the nearest, noted
    return LearningView(i, int(entry["step"]), int(entry.get("tokens", 0)), entry.get("val_loss"), update.text,
                        next_token, attention, notices + attention.notices)


@dataclass
class RunRow:
    """One snapshot's numbers along the run: how well it predicts, and what its heads do."""

    step: int
    tokens: int
    val_bpb: float | None  # bits per byte on the run's periodic validation sample
    prompt_loss: float  # mean −log p of each actual next token of the prompt (nats)
    previous: tuple[str, float]  # its strongest previous-token head ("L1 H2") and that head's score
    induction: tuple[str, float]
    copy_gain: float  # loss on the first copy of a repeated random sequence minus on the second (nats)


def _heads(model, tokenizer) -> tuple:
    """(strongest previous-token head, its score), (strongest induction head, its score), copy gain."""
    scores = score_heads(model, tokenizer, [*CHAT_EXAMPLES, *SENTIMENT_EXAMPLES], length=30)
    best = [max((s for s in scores if s.kind == kind), key=lambda s: s.score) for kind in ("previous", "induction")]
    first, second = copy_loss(model, repeated_random(model, 30))
    return (*((f"L{b.layer + 1} H{b.head + 1}", b.score) for b in best), first - second)


def across_run(service: DemoService, prompt: object) -> list[RunRow]:
    """Every snapshot, in step order: its validation bits per byte, its loss on the visitor's prompt, its
    strongest previous-token and induction heads (`inspection.head_kinds`, scored on the page's example
    texts) and how much it copies in context: what training changes, in numbers."""
    snapshots = service.snapshots
    if snapshots is None:
        raise DemoError(NO_SNAPSHOTS)
    text, _ = visitor_text(prompt)
    rows = []
    with service.compute(heavy=True):
        for i, entry in enumerate(snapshots.entries):
            model, tok = snapshots.checkpoint(i).require()
            ids = torch.tensor([prompt_ids(text, tok)[: model.config.block_size]])
            with torch.inference_mode():
                logits = model(ids).logits[0, :-1].float()
            loss = float(torch.nn.functional.cross_entropy(logits, ids[0, 1:])) if ids.size(1) > 1 else float("nan")
            if i not in snapshots.heads:  # the same for every prompt: once per snapshot
                snapshots.heads[i] = _heads(model, tok)
            rows.append(RunRow(int(entry["step"]), int(entry.get("tokens", 0)), entry.get("val_bpb"), loss,
                               *snapshots.heads[i]))
    return rows
