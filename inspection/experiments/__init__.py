"""Switch one part of a trained model off, or change it, for one forward pass, and see what breaks:
why each step of the tour is there (seed 003: understand *why* each component exists).

Every experiment is a patch of named points (`model.hooks(patch=...)`, `model/hooks.py`) on the
visitor's own text, so the model, the text and the code are the tour's; the output before and
after is the same view (the top next tokens for the LM, the label probabilities for the
classifier) and the verdict is a sentence computed from the numbers, never a fixed claim:

    outcome = lm_experiment("mask", lm, tokenizer, ids, layer=2, head=1)
    outcome.change, outcome.before, outcome.after, outcome.verdict, outcome.measures

`LM_EXPERIMENTS` (`lm.py`), `CLASSIFIER_EXPERIMENTS` (`classifier.py`) and `LEARN_EXPERIMENTS`
(`learn.py`, the learning chapter's) are registries keyed by the tour's step ids (a new experiment
is one function and one entry); what they share is in `common.py`: each outcome's loss before and
after, and its effect ("worse", "better", "no change").
"""

from inspection.experiments.classifier import CLASSIFIER_EXPERIMENTS, classifier_experiment
from inspection.experiments.common import TOP, Outcome, Run, Unavailable, entropy
from inspection.experiments.learn import LEARN_EXPERIMENTS, learn_experiment
from inspection.experiments.lm import LM_EXPERIMENTS, lm_experiment

__all__ = ["CLASSIFIER_EXPERIMENTS", "LEARN_EXPERIMENTS", "LM_EXPERIMENTS", "TOP", "Outcome", "Run", "Unavailable",
           "classifier_experiment", "entropy", "learn_experiment",
           "lm_experiment"]
