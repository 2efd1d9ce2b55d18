"""The "Watch it learn" tab's computation: one training run's weight snapshots answering one prompt.

For the snapshot picked (`demo.serving.snapshots` finds and loads them): the prompt's continuation
(greedy, or sampled with a fixed seed, so that moving between snapshots changes only the weights),
the probabilities the model gave the token after the prompt, one layer's attention over prompt and
continuation, and the run's loss at that step. Across the run: every snapshot's numbers (`across_run`),
and one head's attention on the prompt at a few snapshots (`head_across_run`). A snapshot is a
`Checkpoint` record, so the Chat and Attention computations run on it unchanged. No Gradio here;
`demo.tabs.learning` shows it.
"""

from dataclasses import dataclass, replace

import torch

from demo.serving import DemoError, DemoService, read_number, visitor_text
from demo.text import CHAT_EXAMPLES, SENTIMENT_EXAMPLES
from demo.views import chat
from demo.views.attention import AttentionResult, attention_maps
from inspection.head_kinds import HeadScore, copy_loss, on_previous, on_start, repeated_random, score_heads
from tokenization import fit_context, prompt_ids

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
    val_bpb: float | None = None  # the same sample's bits per byte (the table across the run's unit), if logged


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
                        next_token, attention, notices + attention.notices, entry.get("val_bpb"))


@dataclass
class RunRow:
    """One snapshot's numbers along the run: how well it predicts, and what its heads do."""

    step: int
    tokens: int
    val_bpb: float | None  # bits per byte on the run's periodic validation sample
    prompt_loss: float  # mean −log p of each actual next token of the prompt (nats)
    previous: HeadScore  # its strongest previous-token head
    induction: HeadScore
    copy_gain: float  # loss on the first copy of a repeated random sequence minus on the second (nats)


def _heads(model, tokenizer) -> tuple[HeadScore, HeadScore, float]:
    """The strongest previous-token head, the strongest induction head, the copy gain."""
    scores = score_heads(model, tokenizer, [*CHAT_EXAMPLES, *SENTIMENT_EXAMPLES], length=30)
    best = [max((s for s in scores if s.kind == kind), key=lambda s: s.score) for kind in ("previous", "induction")]
    first, second = copy_loss(model, repeated_random(model, 30))
    return (*best, first - second)


def _snapshot_heads(service: DemoService, i: int) -> tuple[HeadScore, HeadScore, float]:
    """Snapshot `i`'s `_heads`, computed once: they are the same for every prompt."""
    snapshots = service.snapshots
    if i not in snapshots.heads:
        snapshots.heads[i] = _heads(*snapshots.checkpoint(i).require())
    return snapshots.heads[i]


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
            ids = torch.tensor([fit_context(prompt_ids(text, tok), model.config.block_size, keep="head")])
            with torch.inference_mode():
                logits = model(ids).logits[0, :-1].float()
            loss = float(torch.nn.functional.cross_entropy(logits, ids[0, 1:])) if ids.size(1) > 1 else float("nan")
            rows.append(RunRow(int(entry["step"]), int(entry.get("tokens", 0)), entry.get("val_bpb"), loss,
                               *_snapshot_heads(service, i)))
    return rows


@dataclass
class HeadAcrossRun:
    """One head's attention on the prompt at a few snapshots, early to last."""

    layer: int  # counted from 0
    head: int
    named: HeadScore | None  # the head picked for the visitor: the last snapshot's strongest previous-token head
    steps: list[int]  # the snapshots' training steps
    maps: list[AttentionResult]  # each snapshot's attention over the prompt, at `layer`, titled with its step
    previous: list[float]  # the head's mean weight on the previous token (from positions t ≥ 2)
    start: list[float]  # its mean weight on the start token (from positions t ≥ 1)
    notices: list[str]


def shown_snapshots(n: int) -> list[int]:
    """The snapshots a head is shown at: the first (the random start), the middle one and the last."""
    return sorted({0, n // 2, n - 1})


def head_across_run(service: DemoService, prompt: object, head: object = None) -> HeadAcrossRun:
    """Head `head` (layer × heads + head, counted from 0; None or −1: the last snapshot's strongest
    previous-token head, as the whole-run table scores it) attending over `prompt` at `shown_snapshots`:
    how one head's pattern forms during training, and its share on the previous and the start token."""
    snapshots = service.snapshots
    if snapshots is None:
        raise DemoError(NO_SNAPSHOTS)
    c = snapshots.checkpoint(0).model.config
    pick = int(round(read_number(head, -1, low=-1, high=c.n_layer * c.n_head - 1)))
    shown = shown_snapshots(len(snapshots.entries))
    with service.compute(heavy=pick < 0):
        named = _snapshot_heads(service, shown[-1])[0] if pick < 0 else None
        layer, h = (named.layer, named.head) if named else divmod(pick, c.n_head)
        maps = [attention_maps(snapshots.checkpoint(i), prompt, "lm_self", layer) for i in shown]
    if maps[0].all_weights.shape[-1] < 3:
        raise DemoError("Type a longer prompt: the shares need a previous token that is not the start token, "
                        "so at least two tokens.")
    steps = [int(snapshots.entries[i]["step"]) for i in shown]
    maps = [replace(m, title=f"Step {step:,}") for m, step in zip(maps, steps, strict=True)]
    weights = [torch.from_numpy(m.weights[h]) for m in maps]
    return HeadAcrossRun(layer, h, named, steps, maps, [float(on_previous(w).mean()) for w in weights],
                         [float(on_start(w).mean()) for w in weights], maps[-1].notices)
