"""Heads with names (`inspection.head_kinds`) for the served LM: the table `/heads` returns and the
Attention tab shows, and the one line that says what a chosen head is.

The app runs without data, so it serves the table measured on held-out reviews beside the
checkpoint (`heads.json`, written by `python -m benchmarks.heads --store`); a model without one (your
own run) is scored on the page's example sentences, and the page says so."""

import json
import weakref
from dataclasses import dataclass

import torch

from demo.serving import DemoService
from demo.text import CHAT_EXAMPLES, SENTIMENT_EXAMPLES
from inspection.head_kinds import (
    ABOUT,
    HEADS_NAME,
    KINDS,
    THRESHOLDS,
    HeadScore,
    copy_loss,
    describe,
    repeated_random,
    score_heads,
)


@dataclass
class HeadTable:
    scores: list[HeadScore]
    source: str  # what the scores were measured on
    copy_loss: tuple[float, float]  # nats on the first and second copy of a repeated random sequence

    def rows(self) -> list[dict]:
        """The `/heads` JSON: one row per head and kind, layers and heads counted from 0 as in the model."""
        return [{"layer": s.layer, "head": s.head, "kind": s.kind, "score": s.score, "named": s.named}
                for s in self.scores]

    def summary(self) -> str:
        """What the table says, in sentences computed from it."""
        lines = []
        for kind in KINDS:
            named = sorted((s for s in self.scores if s.kind == kind and s.named), key=lambda s: -s.score)
            if not any(s.kind == kind for s in self.scores):
                continue
            heads = ", ".join(f"L{s.layer + 1} H{s.head + 1} ({s.score:.2f})" for s in named) or "none"
            lines.append(f"- **{kind}** (a head that {ABOUT[kind]}; named from {THRESHOLDS[kind]:.2f}): {heads}")
        first, second = self.copy_loss
        best = max((s for s in self.scores if s.kind == "induction"), key=lambda s: s.score)
        copies = "copies in context" if best.named else "barely copies in context"
        lines.append(f"\nOn a random token sequence repeated, the loss falls from {first:.1f} nats on the first copy "
                     f"to {second:.1f} on the second and the best induction score is {best.score:.2f} "
                     f"(L{best.layer + 1} H{best.head + 1}): this model {copies}. Measured on {self.source}.")
        return "\n".join(lines)


_TABLES: "weakref.WeakKeyDictionary[torch.nn.Module, HeadTable]" = weakref.WeakKeyDictionary()


def head_table(service: DemoService) -> HeadTable:
    """The served LM's head table, read or scored once per model (every tour of the LM asks for it)."""
    model, tok = service.lm.require()
    if model not in _TABLES:
        _TABLES[model] = _measure(service, model, tok)
    return _TABLES[model]


def _measure(service: DemoService, model, tok) -> HeadTable:
    """The stored table when it fits the model, else scored here."""
    ckpt, c = service.lm, model.config
    stored = ckpt.directory / HEADS_NAME if ckpt.directory is not None else None
    if stored is not None and stored.is_file():
        data = json.loads(stored.read_text(encoding="utf-8"))
        scores = [HeadScore(r["layer"], r["head"], r["kind"], r["score"]) for r in data["heads"]]
        if {(s.layer, s.head) for s in scores} == {(i, h) for i in range(c.n_layer) for h in range(c.n_head)}:
            loss = data["copy_loss_nats"]
            return HeadTable(scores, data["texts"], (loss["first_copy"], loss["second_copy"]))
    with service.compute(heavy=True):
        texts = [*CHAT_EXAMPLES, *SENTIMENT_EXAMPLES]
        scores = score_heads(model, tok, texts)
        loss = copy_loss(model, repeated_random(model, min(50, (c.block_size - 1) // 2)))
    return HeadTable(scores, f"the page's {len(texts)} example texts (no {HEADS_NAME} beside this model)", loss)


def head_line(service: DemoService, layer: int, head: int) -> str:
    """What the head at `layer`, `head` (from 0) is, for the tour's head picker."""
    return describe(head_table(service).scores, layer, head)
