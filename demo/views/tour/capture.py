"""Capture: the model's own forward pass, read at its named points (`model/hooks.py`). This is the
one place the tour attaches to a model; each track says which points it reads and which pass it runs
(`demo.views.tour.lm`, `demo.views.tour.sentiment`).

Values are captured, never reimplemented: `model.hooks(read=...)` records what the model computed
during its ordinary pass, for this request's thread only (the models are shared by every visitor,
and another visitor's pass through the same points must not land in this tour)."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import torch

from tokenization import token_label, visible

T = TypeVar("T")
# a heatmap draws the last this many tokens of a pass (the LM's context; the review's end and its pads) until
# asked for every one, which the pass reads: the pictures stay legible
MAX_TOUR_TOKENS = 32


@dataclass
class Pass:
    """What one forward pass computed, for the steps to show and recompute: `values` (float64 on CPU,
    batch dimension dropped) by name, the `modules` whose parameters the recomputation reads, and
    the token labels. The tests corrupt a value here to see a check fail."""

    model: str  # LM or SENTIMENT
    config: object
    ids: list[int]
    tokens: list[str]
    layer: int
    values: dict[str, torch.Tensor]
    modules: dict[str, torch.nn.Module]
    extra: dict = field(default_factory=dict)  # what else a track needs (the decoder's tokens, the labels, ...)


def capture(model: torch.nn.Module, points: Mapping[str, str],
            run: Callable[[], T]) -> tuple[dict[str, torch.Tensor], T]:
    """`run()` (a forward pass of `model`, without gradient) with `points` read: key -> named point.
    Returns what each point saw (as the model holds it, batch included) by key, and what `run` returned."""
    with torch.inference_mode():
        with model.hooks(read=list(points.values())) as seen:  # this request's pass only
            out = run()
    return {key: seen[name] for key, name in points.items()}, out


def label(tok, i: int) -> str:
    """Token `i` as the tour shows it (spaces visible)."""
    return visible(token_label(tok, i), show_spaces=True)


def heads_to_rows(x: torch.Tensor) -> torch.Tensor:
    """(H, T, d_k), one head after another -> (T, H·d_k), the heads side by side as the layer concatenates them."""
    return x.transpose(0, 1).flatten(1)


def parameter_counts(model: torch.nn.Module, parts: list[torch.nn.Module]) -> tuple[int, int]:
    """(the parameters of `parts`, of the whole model), each parameter counted once (tied weights too)."""
    return sum(p.numel() for m in parts for p in m.parameters()), sum(p.numel() for p in model.parameters())

