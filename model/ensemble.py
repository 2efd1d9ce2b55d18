"""One verdict from several classifiers of the same labels: ULMFiT's forward + backward ensemble
(Howard & Ruder 2018) averages a classifier that reads a review forwards and one that reads it
backwards (`EncoderDecoderConfig.reverse_source`). Two readers that see the text in opposite
orders make different mistakes, so their verdict is right more often than either's.

How to average: the readers' calibrated log-probabilities, then a softmax at the pair's own
temperature (a geometric mean of the probabilities, renormalised and tempered). With two labels it
picks the same label as the mean of the probabilities, at any temperature. The pair needs a
temperature of its own: it is right more often than either reader but no surer, so each reader's
calibration leaves it underconfident. Measured on the 1,500 report rows, the two shipped readers
at their own temperatures gave an ECE of 0.029, at the pair's 0.87 (fitted on the selection rows,
as each reader's was, by `benchmarks.calibration --also ... --store`) 0.020. It is kept in the last
reader's config (`EncoderDecoderConfig.pair_temperature`).
"""

from collections.abc import Sequence

import torch


def combine_readers(log_probs: Sequence[torch.Tensor], temperature: float = 1.0) -> torch.Tensor:
    """Each reader's calibrated log P(label) (..., K) -> the verdict's log P(label) (..., K): the
    mean over readers, divided by the pair's `temperature`, renormalised. One reader at temperature 1
    gives back its own."""
    return (torch.stack(list(log_probs)).mean(0) / temperature).log_softmax(-1)


def pair_temperature(configs: Sequence) -> float:
    """The temperature of the verdict of readers with these configs, in the order they are combined:
    the last one's `pair_temperature` when there are several, else 1."""
    return configs[-1].pair_temperature if len(configs) > 1 else 1.0
