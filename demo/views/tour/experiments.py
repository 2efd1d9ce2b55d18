"""Each step's experiment (`inspection.experiments`): the step changed for one forward pass of the
same model on the same text, the output before and after, and what it shows, for the layer and head
the visitor chose.

An experiment runs when it is first asked for, not with the tour: the tab asks for the step it shows,
`tour_json` for every step (the `/tour` API returns them all). A visitor who reads three steps pays
for three experiments rather than every pass paying for all of them. The sampling step's experiment
also runs at the visitor's own temperature, top-k and top-p (`Experiments.sampled`)."""

import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from functools import cached_property

import torch

from classifier import Reader
from demo.serving import LM, SENTIMENT_BACKWARD, Checkpoint
from demo.views.chat import generation_config
from demo.views.tour.capture import Pass
from inspection.experiments import CLASSIFIER_EXPERIMENTS, LEARN_EXPERIMENTS, LM_EXPERIMENTS, Outcome, Run, Unavailable
from model import GenerationConfig

SAMPLING = GenerationConfig(temperature=0.8, top_k=40, top_p=0.95, seed=0)  # the chat's defaults: the sampling step's

EXPERIMENTS = {"lm": LM_EXPERIMENTS, "sentiment": CLASSIFIER_EXPERIMENTS, "learn": LEARN_EXPERIMENTS}  # by track


class Experiments:
    """The experiments of one tour: what they run on, and each outcome once it has run. `ids`: the text
    as the model read it (the LM's with its start token; the review's unpadded); `backward`: the reader
    the reading-order experiment compares; `slot`: each run's turn on the machine (`DemoService.compute`);
    `track`: the tour's track when it is not the model's own (the learning chapter's)."""

    def __init__(self, ckpt: Checkpoint, ids: list[int], layer: int, head: int, backward: Checkpoint | None = None,
                 slot: Callable[[], AbstractContextManager] = nullcontext, track: str | None = None):
        self.ckpt, self.ids, self.layer, self.head, self.backward, self.slot = ckpt, ids, layer, head, backward, slot
        self.registry = EXPERIMENTS[track or (LM if ckpt.name == LM else "sentiment")]
        self.outcomes: dict[str, Outcome | None] = {}
        self.why_not: dict[str, str] = {}  # a step whose experiment cannot run on this model: why, in words

    @cached_property
    def run(self) -> Run:
        """What every experiment gets; the sampling step's at the chat's settings (`SAMPLING`), as the
        step's own picture draws."""
        model, tok = self.ckpt.require()
        reader = None if self.ckpt.name == LM else Reader(model, tok, self.ckpt.name, self.ckpt.classifier)
        other = (Reader(self.backward.model, self.backward.tokenizer, SENTIMENT_BACKWARD, self.backward.classifier)
                 if self.backward else None)
        ids = torch.tensor([self.ids], device=next(model.parameters()).device)
        sampling, _ = self.settings(SAMPLING.temperature, SAMPLING.top_k, SAMPLING.top_p)
        return Run(model, tok, ids, self.layer, self.head, reader, other, sampling)

    def settings(self, temperature: object, top_k: object, top_p: object) -> tuple[GenerationConfig, list[str]]:
        """A visitor's sampler settings, clamped as the chat clamps them (top-k past the vocabulary is
        off, temperature 0 is greedy), with a notice for each change."""
        model, _ = self.ckpt.require()
        return generation_config(model.config.vocab_size, None, 1, temperature, top_k, top_p, SAMPLING.seed)

    def of(self, key: str) -> Outcome | None:
        """Step `key`'s outcome, run on the first call; None where the step has no experiment, or its
        experiment cannot run on this model (`why_not` says why: the toy's word-level vocabulary has no
        bytes to read a text with)."""
        if key in self.registry and key not in self.outcomes:
            self.outcomes[key] = self._outcome(key, lambda: self.run)
        return self.outcomes.get(key)

    def sampled(self, settings: GenerationConfig) -> Outcome | None:
        """The sampling step's experiment at `settings` (the tour's controls), run at every call: a
        control moved is a new experiment, and one more pass costs what a cached one would save."""
        return self._outcome("sampling", lambda: replace(self.run, sampling=settings))

    def _outcome(self, key: str, run: Callable[[], Run]) -> Outcome | None:
        with self.slot():
            try:
                return self.registry[key](run())
            except Unavailable as e:
                self.why_not[key] = str(e)
                return None


def experiment_ids(p: Pass) -> list[int]:
    """What the experiments read: the tokens the track's pass read, so that a step and its experiment are
    about the same text: the LM's (and the learning chapter's) start token and the text up to the context
    (`lm_pass`, `learn_pass`: its last `block_size` − 1 tokens); the review as `sentiment_pass` reads it,
    without the pads it adds (`real`: the padding step's experiment adds its own)."""
    real = p.extra.get("real")
    return p.ids if real is None else [i for i, r in zip(p.ids, real.tolist(), strict=True) if r]


def experiment_json(o: Outcome) -> dict:
    """The API's form: before/after as [[token, probability], …] best first (LM) or {label: probability};
    `loss_before`, `loss_after` in nats (None where infinite: a sampler that cannot draw the text),
    `effect` ("worse", "better", "no change"), `position` (what the table is about) and, for the
    classifier, `label` (the label the effect is for)."""
    def form(v):
        return [[t, p] for t, p in v] if isinstance(v, list) else dict(v)

    def loss(x: float) -> float | None:
        return x if math.isfinite(x) else None
    out = {"change": o.change, "before": form(o.before), "after": form(o.after), "verdict": o.verdict,
           "loss_before": loss(o.loss_before), "loss_after": loss(o.loss_after), "effect": o.effect,
           "position": o.position}
    return out | ({"label": o.label} if o.label else {})
