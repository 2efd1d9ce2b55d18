"""The sentiment classifier, one product above `model/`: a `Reader` is one checkpoint reading
reviews (its `ClassifierConfig`, classifier.json: label words, cut, temperatures; batched reading of
raw text), a `Classifier` its readers' verdict (ULMFiT's forward + backward pair). The app,
`training.pseudo` and the benchmarks read reviews here."""

from .config import ClassifierConfig, Reading
from .reader import DEFAULT_MAX_TOKENS, Reader, calibrated
from .verdict import Classifier, Verdict, combine_readers, pair_temperature

__all__ = ["DEFAULT_MAX_TOKENS", "Classifier", "ClassifierConfig", "Reader", "Reading", "Verdict", "calibrated",
           "combine_readers", "pair_temperature"]
