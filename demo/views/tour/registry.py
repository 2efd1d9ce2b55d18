"""The registry of steps: what a step is (its id, its source lines, the code that builds its pictures
and checks), what each track is (its pass and its steps in order), and what
the tour returns (`Step`, `Panel`, `Tour`). A step's words (title, paragraphs, formula) are not here:
they are Markdown in `lessons/<id>.md` (`demo.views.tour.lesson_text`), filled with the numbers its
code supplies (`Built.fills`).

A track module registers its steps with `@step(id, code=...)` on the function that builds them from
the track's `State`, and the track with `add_track`; the attention steps both tracks share are in
`demo.views.tour.attention`."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from demo.views.tour.capture import Pass
from demo.views.tour.code import CodeRange, CodeRef, source_lines
from demo.views.tour.recompute import Check, HeadAttention
from inspection.experiments import Outcome

if TYPE_CHECKING:  # its module reads the LM track's settings, which registers through this one
    from demo.views.tour.experiments import Experiments


@dataclass
class Panel:
    """One picture of a step: a heatmap (rows × columns) or bars (one value per label)."""

    name: str  # its caption: what the numbers are
    values: np.ndarray  # 2-D for a heatmap, 1-D for bars
    rows: list[str]  # heatmap rows (tokens) or bar labels
    columns: list[str] = field(default_factory=list)  # a heatmap's columns when they are tokens (keys); else dimensions
    kind: str = "signed"  # "signed" (blue < 0 < red), "weights" (0 to 1), "bars", "pieces" (tokens and ids)
    masked: np.ndarray | None = None  # heatmap cells a mask removed (−∞), drawn blank


class State:
    """What a track's steps read: the pass, the head the visitor chose, and what the track derives
    from them (its subclass). The attention steps both tracks share read `attention` (this head's
    recomputation), `attention_in` (the layer's input to Q/K/V), `projection` (the Q/K/V module),
    `qkv_captured` (the model's Q/K/V, (T, 3C)), `weights` (the model's weights, every head), `ok`
    (where a query may look), `where` (the layer, in words) and `focus` (the token whose row the
    worked examples follow)."""

    attention: HeadAttention
    attention_in: torch.Tensor
    projection: torch.nn.Module
    qkv_captured: torch.Tensor
    weights: torch.Tensor
    ok: torch.Tensor
    where: str
    focus: int

    def __init__(self, p: Pass, head: int):
        self.p, self.head = p, head
        self.c, self.v, self.m, self.tokens = p.config, p.values, p.modules, p.tokens
        self.n, self.d = len(p.tokens), p.config.d_model
        self.d_k = self.d // p.config.n_head


class Built:
    """What a step's code makes: its pictures, its checks, and `fills`, the values its lesson text
    names (`{{token}}` -> fills["token"]): text as it is to be shown, a count, or a `lesson_text.Part`."""

    def __init__(self, panels: list[Panel], checks: list[Check] = (), **fills):
        self.panels, self.checks, self.fills = list(panels), list(checks), fills


@dataclass(frozen=True)
class StepSpec:
    """A registered step: `id` names it (and its text, `lessons/<id>.md`); `code`, its source lines;
    `build(state)`, its pictures, checks and numbers; `link`, the app view that goes further ("lens"
    or "sampling"). A step's experiment, if it has one, is registered under its id in
    `inspection.experiments` (`Tour.experiment` runs it)."""

    id: str
    code: CodeRef
    build: Callable[[State], Built]
    link: str = ""

    @property
    def tracks(self) -> tuple[str, ...]:
        return tuple(name for name, track in TRACKS.items() if self.id in track.steps)


@dataclass(frozen=True)
class Track:
    """One model's tour: `run(ckpt, text, layer)` -> (its `Pass`, notices); `state(pass, head)` -> what
    its steps read; `steps`, the step ids in order; `layers`, the config field counting the layers a
    visitor picks from; `overview`, the overview figure's parts ((label, the step it opens); {n}: the
    layer count); `outcome(pass)`, what the tour reports of the pass besides its steps."""

    name: str
    run: Callable
    state: Callable[[Pass, int], State]
    steps: tuple[str, ...]
    layers: str
    overview: tuple[tuple[str, str], ...]
    outcome: Callable[[Pass], dict]


REGISTRY: dict[str, StepSpec] = {}
TRACKS: dict[str, Track] = {}


def step(id: str, code: CodeRef, link: str = ""):
    """Register the decorated `build(state) -> Built` as step `id`."""
    def register(build: Callable[[State], Built]) -> Callable[[State], Built]:
        if id in REGISTRY:
            raise ValueError(f"two steps are registered as {id!r}")
        REGISTRY[id] = StepSpec(id, code, build, link)
        return build
    return register


def add_track(track: Track) -> None:
    TRACKS[track.name] = track


def code_range(key: str) -> CodeRange:
    """Step `key`'s source lines, read from the file; LookupError naming the step if its `code`
    no longer matches the code (after a refactor of `model/`, re-point it where the step is registered)."""
    try:
        return source_lines(REGISTRY[key].code)
    except LookupError as e:
        raise LookupError(f"step {key!r} ({REGISTRY[key].code.target}): {e}") from e


@dataclass
class Step:
    """One screen of the tour: what it says, its formula, its pictures and its checks."""

    key: str  # its id in `REGISTRY`
    title: str
    explanation: str  # paragraphs, Markdown
    formula: str  # LaTeX
    shape: str  # the live tensor's shape, in words
    panels: list[Panel]
    checks: list[Check] = field(default_factory=list)
    worked: str = ""  # one number worked out by hand
    link: str = ""  # "lens" or "sampling": the app view that goes further

    @property
    def mismatches(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def code(self) -> CodeRange | None:
        try:
            return code_range(self.key)
        except (LookupError, AttributeError, OSError, TypeError):  # not re-pointed after a refactor
            return None


@dataclass
class Tour:
    """One pass as steps, and what the API reports of it; kept in the visitor's session."""

    model: str  # LM or SENTIMENT
    toy: bool
    text: str
    layer: int  # 0-based
    head: int
    n_layers: int
    n_heads: int
    steps: list[Step]
    overview: list[tuple[str, int]]  # the overview figure's parts: (label, the step it opens)
    notices: list[str]
    top_tokens: list[tuple[str, float]] = field(default_factory=list)  # LM: the model's likeliest next tokens
    label_probabilities: dict[str, float] = field(default_factory=dict)  # sentiment
    head_about: str = ""  # what the chosen head is (the LM's head table), said beside its attention steps
    target: str = ""  # the learning chapter: the token learned, its probability before and after one step
    probability_before: float | None = None
    probability_after: float | None = None
    experiments: "Experiments | None" = None  # each step's experiment, run when first asked for

    def experiment(self, key: str) -> Outcome | None:
        """Step `key` changed for one pass (`inspection.experiments`), or None where it has no experiment."""
        return self.experiments.of(key) if self.experiments is not None else None
