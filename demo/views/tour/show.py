"""How a step shows its values: the pictures (`heat`, `bars`, `pieces`) and numbers and tokens as
a lesson's text writes them (`num`, `tok`, `dot`)."""

import functools

import numpy as np
import torch

from demo.views.tour.capture import Pass, label
from demo.views.tour.registry import Panel


def tok(token: str) -> str:
    """A token inside Markdown text: as code, so that `<s>` or `**` shows as typed."""
    fence = "``" if "`" in token else "`"
    return f"{fence}{token}{fence}" if fence == "`" else f"{fence} {token} {fence}"


def num(x: float) -> str:
    """A number in a worked example: 3 decimals, or 3 significant digits below 0.1 (−0.0107, not −0.011)."""
    return (f"{x:.3g}" if 0 < abs(x) < 0.1 else f"{x:.3f}").replace("-", "−")


def dot(a: torch.Tensor, b: torch.Tensor) -> str:
    """a·b written out: every product of a toy-sized vector (8 at most), the first 4 and a count otherwise."""
    terms = a.numel() if a.numel() <= 8 else 4
    shown = [f"{num(x)}×{num(y)}" for x, y in zip(a.tolist()[:terms], b.tolist()[:terms], strict=True)]
    rest = f" + … ({a.numel() - terms} more)" if a.numel() > terms else ""
    return " + ".join(shown) + rest


def ids_worked(p: Pass, shown: int = 8) -> str:
    """The first pieces with their ids: "<s> → 1 · This → 1212 · …"."""
    pairs = " · ".join(f"{tok(t)} → {i}" for t, i in zip(p.tokens[:shown], p.ids[:shown], strict=True))
    return pairs + (" …" if len(p.ids) > shown else "")


def pieces(p: Pass) -> Panel:
    return Panel("pieces and their ids", np.array(p.ids), p.tokens, kind="pieces")


def heat(name: str, values: torch.Tensor, rows: list[str], columns: list[str] | None = None, kind="signed",
         masked: torch.Tensor | None = None) -> Panel:
    v = values.float().numpy()  # float32: what a picture needs, half the session's memory
    return Panel(name, v, rows, columns or [], kind, None if masked is None else masked.numpy())


@functools.lru_cache(maxsize=4)
def vocabulary_labels(tokenizer) -> tuple[str, ...]:
    """Every token's display label, by id (bars over the whole vocabulary)."""
    return tuple(label(tokenizer, i) for i in range(tokenizer.vocab_size))


def bars(name: str, values: torch.Tensor, tokenizer, vocab_size: int, mark: int | None = None,
         marked: str = "drawn") -> Panel:
    """One bar per token of the vocabulary; the bar of token `mark`, if any, labelled `◀ {marked}`."""
    labels = list(vocabulary_labels(tokenizer)) + [f"<{i}>" for i in range(tokenizer.vocab_size, vocab_size)]
    if mark is not None:
        labels[mark] += f" ◀ {marked}"
    return Panel(name, values.float().numpy(), labels, kind="bars")
