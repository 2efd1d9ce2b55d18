"""The sentiment classifier, one product above `model/`: a `Reader` is one checkpoint reading
reviews (label words, temperature, batched reading of raw text), a `Classifier` its readers' verdict
(ULMFiT's forward + backward pair). The app, `training.pseudo` and the benchmarks read reviews here."""

from .reader import DEFAULT_MAX_TOKENS, Reader, calibrated
from .verdict import Classifier, Verdict, combine_readers, pair_temperature

__all__ = ["DEFAULT_MAX_TOKENS", "Classifier", "Reader", "Verdict", "calibrated", "combine_readers",
           "pair_temperature"]
