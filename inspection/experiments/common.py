"""What every experiment shares: the run it gets (`Run`), what it returns (`Outcome`), the
refusal of one that cannot run here (`Unavailable`), and attention entropy."""

from dataclasses import dataclass, field

import torch

from classifier import Reader
from model import DecoderOnlyLM, EncoderDecoder, GenerationConfig
from tokenization import BPETokenizer, token_label

TOP = 5  # next tokens shown before and after


class Unavailable(ValueError):
    """This experiment cannot run here (it needs a model that is not served)."""


@dataclass
class Outcome:
    """One experiment on one text: what was changed, the output before and after, and what it says."""

    change: str  # what the patch does, in words
    before: list[tuple[str, float]] | dict[str, float]  # top next tokens, best first; or P(label)
    after: list[tuple[str, float]] | dict[str, float]
    verdict: str  # one sentence computed from the numbers: what the step is for
    measures: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (before, after)


@dataclass
class Run:
    """What an experiment gets: the model, the text's ids (1, T), the layer and head the tour shows."""

    model: DecoderOnlyLM | EncoderDecoder
    tokenizer: BPETokenizer
    ids: torch.Tensor
    layer: int
    head: int
    reader: Reader | None = None  # the classifier's reader (its label words and temperature)
    backward: Reader | None = None  # the other reading order, when one is served
    sampling: GenerationConfig = field(default_factory=lambda: GenerationConfig(top_k=TOP))  # the sampling step's
    # settings (the tour's controls)

    def label(self, token_id: int) -> str:
        return token_label(self.tokenizer, token_id)


def entropy(weights: torch.Tensor) -> float:
    """Mean entropy in nats of attention rows (…, T_k), or of one distribution: 0 when every row looks at
    one key (+ 0.0: a one-hot row's −0.0 is written 0)."""
    w = weights.double()
    return float(-(w * w.clamp_min(1e-30).log()).sum(-1).mean()) + 0.0
