"""What every experiment shares: the run it gets (`Run`), what it returns (`Outcome`), the
refusal of one that cannot run here (`Unavailable`), the effect of a change on a loss (`effect`,
`TOLERANCE`) and the sentence that says it (`effect_sentence`), and attention entropy."""

import math
from dataclasses import dataclass, field

import torch

from classifier import Reader
from model import DecoderOnlyLM, EncoderDecoder, GenerationConfig
from tokenization import BPETokenizer, token_label

TOP = 5  # next tokens shown before and after
TOLERANCE = 0.01  # nats: a loss that moves by this much or less has not changed
EFFECTS = ("worse", "better", "no change")


class Unavailable(ValueError):
    """This experiment cannot run here (it needs a model that is not served)."""


def effect(loss_before: float, loss_after: float) -> str:
    """"worse" when the loss rose by more than `TOLERANCE` nats, "better" when it fell by more,
    "no change" otherwise."""
    change = loss_after - loss_before
    if abs(change) <= TOLERANCE:
        return "no change"
    return "worse" if change > 0 else "better"


def nats(x: float) -> str:
    """A loss as the verdicts write it: 3 decimals, so that a change past `TOLERANCE` shows."""
    return f"{x:.3f}"


@dataclass
class Outcome:
    """One experiment on one text: what was changed, the output before and after, and what it says.

    `loss_before`, `loss_after`: the language model's mean −log p(actual next token) over the text in
    nats (the tokens experiment: the whole text's nats, its two readings having different token counts;
    the learning chapter: −log p of the token learned); the classifier's −log P(`label`), the label it
    predicts. `effect` is `effect(loss_before, loss_after)`; `position` names what the table shows (the
    position whose next tokens, or the label whose probability)."""

    change: str  # what the patch does, in words
    before: list[tuple[str, float]] | dict[str, float]  # top next tokens, best first; or P(label)
    after: list[tuple[str, float]] | dict[str, float]
    verdict: str  # sentences computed from the numbers: what the step is for
    measures: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (before, after)
    loss_before: float = math.nan
    loss_after: float = math.nan
    effect: str = ""  # "worse" | "better" | "no change"
    position: str = ""  # what the before/after table is about, in words
    label: str = ""  # the classifier's: the label `effect` is for

    def __post_init__(self):
        if not self.effect and not math.isnan(self.loss_before):
            self.effect = effect(self.loss_before, self.loss_after)


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


def moves(before: float, after: float, unit: str = "", digits: int = 2) -> str:
    """"falls from 1.20 to 0.40 nats", "rises from …", or "stays at 1.20 nats" (equal at `digits`)."""
    a, b = f"{before:.{digits}f}", f"{after:.{digits}f}"
    unit = f" {unit}" if unit else ""
    if a == b:
        return f"stays at {a}{unit}"
    return f"{'falls' if after < before else 'rises'} from {a} to {b}{unit}"


def effect_sentence(loss_before: float, loss_after: float, what: str) -> str:
    """The measured change of a loss and its effect, in one sentence: `what` names the loss ("over your
    text the loss (−log p of each actual next token)")."""
    said = f"{what[0].upper()}{what[1:]} goes from {nats(loss_before)} to {nats(loss_after)} nats"
    return {"worse": f"{said}: worse.", "better": f"{said}: better.",
            "no change": f"{said}: no change (within {TOLERANCE} nats)."}[effect(loss_before, loss_after)]


def entropy(weights: torch.Tensor) -> float:
    """Mean entropy in nats of attention rows (…, T_k), or of one distribution: 0 when every row looks at
    one key (+ 0.0: a one-hot row's −0.0 is written 0)."""
    w = weights.double()
    return float(-(w * w.clamp_min(1e-30).log()).sum(-1).mean()) + 0.0
