"""Each step's experiment (`inspection.experiments`): the step changed for one forward pass of the
same model on the same text, the output before and after, and what it shows. Computed with the tour,
after its steps, for the layer and head the visitor chose."""

import torch

from classifier import Reader
from demo.serving import LM, SENTIMENT_BACKWARD, Checkpoint
from inspection.experiments import CLASSIFIER_EXPERIMENTS, LM_EXPERIMENTS, Outcome, Run, Unavailable

EXPERIMENTS = {"lm": LM_EXPERIMENTS, "sentiment": CLASSIFIER_EXPERIMENTS}


def run_experiments(ckpt: Checkpoint, ids: list[int], layer: int, head: int, step_ids: list[str],
                    backward: Checkpoint | None = None) -> dict[str, Outcome]:
    """step id -> its experiment's outcome, for the steps of `step_ids` that have one. `ids`: the text
    as the model read it (the LM's with its start token; the review's unpadded)."""
    model, tok = ckpt.require()
    registry = EXPERIMENTS[LM if ckpt.name == LM else "sentiment"]
    reader = None if ckpt.name == LM else Reader(model, tok, ckpt.name, ckpt.classifier)
    other = (Reader(backward.model, backward.tokenizer, SENTIMENT_BACKWARD, backward.classifier)
             if backward is not None else None)
    run = Run(model, tok, torch.tensor([ids], device=next(model.parameters()).device), layer, head, reader, other)
    outcomes = {}
    for key in step_ids:
        if key in registry:
            try:
                outcomes[key] = registry[key](run)
            except Unavailable:  # the reading-order experiment without a backward reader (a toy)
                pass
    return outcomes


def experiment_json(o: Outcome) -> dict:
    """The API's form: before/after as [[token, probability], …] best first (LM) or {label: probability}."""
    def form(v):
        return [[t, p] for t, p in v] if isinstance(v, list) else dict(v)
    return {"change": o.change, "before": form(o.before), "after": form(o.after), "verdict": o.verdict}
