"""Switch one part of a trained model off, or change it, for one forward pass, and see what breaks:
why each step of the tour is there (seed 003: understand *why* each component exists).

Every experiment is a patch of named points (`model.hooks(patch=...)`, `model/hooks.py`) on the
visitor's own text, so the model, the text and the code are the tour's; the output before and
after is the same view (the top next tokens for the LM, the label probabilities for the
classifier) and the verdict is a sentence computed from the numbers, never a fixed claim:

    outcome = lm_experiment("mask", lm, tokenizer, ids, layer=2, head=1)
    outcome.change, outcome.before, outcome.after, outcome.verdict, outcome.measures

`LM_EXPERIMENTS` (`lm.py`) and `CLASSIFIER_EXPERIMENTS` (`classifier.py`) are registries keyed by
the tour's step ids (a new experiment is one function and one entry); what both share is in `common.py`.
"""

from inspection.experiments.classifier import CLASSIFIER_EXPERIMENTS, classifier_experiment
from inspection.experiments.common import TOP, Outcome, Run, Unavailable, entropy
from inspection.experiments.lm import LM_EXPERIMENTS, lm_experiment

__all__ = ["CLASSIFIER_EXPERIMENTS", "LM_EXPERIMENTS", "TOP", "Outcome", "Run", "Unavailable",
           "classifier_experiment", "entropy", "lm_experiment"]
