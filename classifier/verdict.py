"""One verdict from several readers of the same labels: ULMFiT's forward + backward ensemble
(Howard & Ruder 2018) averages a classifier that reads a review forwards and one that reads it
backwards (`EncoderDecoderConfig.reverse`). Two readers that see the text in opposite
orders make different mistakes, so their verdict is right more often than either's.

How to average: the readers' calibrated log-probabilities, then a softmax at the pair's own
temperature (a geometric mean of the probabilities, renormalised and tempered). With two labels it
picks the same label as the mean of the probabilities, at any temperature. The pair needs a
temperature of its own: it is right more often than either reader but no surer, so each reader's
calibration leaves it underconfident. The pair's is fitted on the selection rows, as each reader's
is (`benchmarks.calibration --also ... --store`), and kept in the last reader's classifier.json
(`ClassifierConfig.pair_temperature`); docs/results.md gives the calibration it buys.

    classifier = Classifier.from_pretrained(["checkpoints/sentiment", "checkpoints/sentiment-backward"])
    verdict = classifier.read_texts(["A wonderful film."])
    verdict.probabilities(0)       # {"negative": ..., "positive": ...}: what the app shows
    verdict.readers["sentiment"]   # (N, K) one reader's own log P(label)

The app, `training.pseudo` and the benchmarks all get the verdict from here.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .reader import DEFAULT_MAX_TOKENS, Reader


def combine_readers(log_probs: Sequence[torch.Tensor], temperature: float = 1.0) -> torch.Tensor:
    """Each reader's calibrated log P(label) (..., K) -> the verdict's log P(label) (..., K): the
    mean over readers, divided by the pair's `temperature`, renormalised. One reader at temperature 1
    gives back its own."""
    return (torch.stack(list(log_probs)).mean(0) / temperature).log_softmax(-1)


def pair_temperature(configs: Sequence) -> float:
    """The temperature of the verdict of readers with these `ClassifierConfig`s, in the order they are
    combined: the last one's `pair_temperature` when there are several, else 1."""
    return configs[-1].pair_temperature if len(configs) > 1 else 1.0


@dataclass
class Verdict:
    """What the classifier says about N reviews."""

    labels: list[str]
    log_probs: torch.Tensor  # (N, K): the verdict, every reader combined at the pair's temperature
    readers: dict[str, torch.Tensor]  # reader name -> its own calibrated log P(label) (N, K)

    def probabilities(self, row: int = 0) -> dict[str, float]:
        """label -> P(label) of review `row`, as the app shows it."""
        return dict(zip(self.labels, self.log_probs[row].exp().tolist(), strict=True))

    def reader_probabilities(self, row: int = 0) -> dict[str, dict[str, float]]:
        """reader name -> label -> that reader's P(label) of review `row`."""
        return {name: dict(zip(self.labels, lp[row].exp().tolist(), strict=True)) for name, lp in self.readers.items()}


class Classifier:
    """The sentiment classifier as one product: its readers (one, or the forward + backward pair) and
    their verdict. Every reader scores the same label words with the same tokenizer."""

    def __init__(self, readers: Sequence[Reader]):
        if not readers:
            raise ValueError("a classifier needs at least one reader")
        first = readers[0]
        if any(r.labels != first.labels for r in readers) or len(first.labels) < 2:
            raise ValueError(f"the readers must share two or more labels, got {[r.labels for r in readers]}")
        if len({r.name for r in readers}) != len(readers):
            raise ValueError(f"the readers need distinct names, got {[r.name for r in readers]}")
        self.readers = list(readers)
        self.labels = first.labels
        self.temperature = pair_temperature([r.classifier_config for r in readers])

    @classmethod
    def from_pretrained(cls, folders: Sequence[str | Path], device: str | torch.device = "cpu") -> "Classifier":
        return cls([Reader.from_pretrained(f, device) for f in folders])

    def combine(self, log_probs: dict[str, torch.Tensor]) -> Verdict:
        """Each reader's log P(label) (N, K), by name, in the readers' order -> the verdict."""
        return Verdict(self.labels, combine_readers(list(log_probs.values()), self.temperature), dict(log_probs))

    def read(self, src_ids: torch.Tensor, src_mask: torch.Tensor | None = None,
             known: dict[str, torch.Tensor] | None = None) -> Verdict:
        """Source ids (B, S) -> the verdict; `known`: readers' log-probabilities already computed (the
        app's attribution pass gives the first reader's), which are not computed again."""
        known = known or {}
        return self.combine({r.name: known[r.name] if r.name in known else r.read(src_ids, src_mask)
                             for r in self.readers})

    def read_texts(self, texts: Sequence[str], max_tokens: int = DEFAULT_MAX_TOKENS, whole: bool = True) -> Verdict:
        """Raw reviews -> the verdict of each (`Reader.read_texts`; `whole=False`: head + tail alone)."""
        return self.combine({r.name: r.read_texts(texts, max_tokens, whole) for r in self.readers})
