"""A classifier's own settings: `classifier.json`, beside the architecture's `config.json`.

A sentiment checkpoint is an `EncoderDecoder` (`model/`) used as a classifier. What the network is,
the shape its weights need and how it computes, is the architecture: `config.json`, which
`model.from_pretrained` builds it from. How the product *uses* that network is not: which label words
it scores, how a long review is cut, the temperatures that make its probabilities calibrated. Those
are fitted or chosen after (or apart from) training the weights, and change without them (a
temperature refitted by `benchmarks.calibration --store` rewrites a few bytes, never the weights).
They live here, in `ClassifierConfig`, stored as `classifier.json` (Hugging Face keeps
`config.json` for the architecture and a task's settings beside it, as `generation_config.json`):

    checkpoints/sentiment/
        config.json          the architecture: vocabulary, sizes, layers, max_src_len, causal_encoder, reverse
        classifier.json      ClassifierConfig: labels, src_keep_tail, temperature, pair_temperature
        model.safetensors    the weights

A checkpoint written before the split kept these fields in config.json. It still loads: the model
ignores them there (`EncoderDecoderConfig.moved_to_classifier`) and `ClassifierConfig.from_pretrained`
reads them from there when there is no classifier.json. `split_folder` rewrites such a folder into
this layout, leaving model.safetensors as it is (the shipped checkpoints were rewritten so).

What reads a review needs both halves: the encoder's window (`max_src_len`, architecture: its
positions) and the cut and labels (here). `Reading` puts the two side by side for
`tokenization.review`, each field still read from its one owner.
"""

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from model import EncoderDecoderConfig
from model.config import _check_type, bounded
from model.pretrained import read_config, read_json_object
from storage import CLASSIFIER_NAME, CONFIG_NAME, atomic_write_text

MIN_TEMPERATURE, MAX_TEMPERATURE = 1e-2, 100.0  # the range `training.calibration.fit_temperature` searches


@dataclass
class ClassifierConfig:
    """How a text-to-text encoder-decoder is used as a classifier (classifier.json)."""

    # the label words, in label order: the decoder scores each one's tokens given the review, and the
    # most likely wins (text-to-text, as T5 classifies). Label i of the data is `labels[i]`.
    labels: list[str]
    # a review longer than the encoder's window (`max_src_len`) is read as its head and these last
    # tokens (`tokenization.cut_source`): the end of a review often holds its verdict. A reading rule
    # chosen for training and kept so that evaluation, the benchmarks and the app cut reviews the same way
    src_keep_tail: int = bounded(0, 0)
    # the softmax temperature over the label scores (temperature scaling, Guo et al. 2017): fitted on
    # the selection rows at the end of a sentiment run so that the probabilities are calibrated; the
    # label (the argmax) is the same at any temperature
    temperature: float = bounded(1.0, MIN_TEMPERATURE, MAX_TEMPERATURE)
    # the temperature of the verdict this reader gives together with the reader it is paired with
    # (`classifier.Classifier`, ULMFiT's forward + backward pair), kept by the pair's last reader and
    # fitted on the selection rows as `temperature` is (`benchmarks.calibration --also ... --store`)
    pair_temperature: float = bounded(1.0, MIN_TEMPERATURE, MAX_TEMPERATURE)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            _check_type(f.name, value, f.type)
            low, high = f.metadata.get("range", (None, None))
            if low is not None and value < low or high is not None and value > high:
                bounds = f">= {low}" if high is None else f"between {low} and {high}"
                raise ValueError(f"{f.name} must be {bounds}, got {value!r}")
        if len(self.labels) < 2 or len(set(self.labels)) != len(self.labels) or not all(self.labels):
            raise ValueError(f"labels must be two or more distinct non-empty words, got {self.labels!r}")

    def check(self, model_config: EncoderDecoderConfig) -> None:
        """A `ValueError` unless this can drive a model of `model_config` (its cut fits the window)."""
        if self.src_keep_tail > model_config.max_src_len:
            raise ValueError(f"src_keep_tail ({self.src_keep_tail}) must be at most max_src_len "
                             f"({model_config.max_src_len})")

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """Write classifier.json into `directory` (atomically, as every checkpoint file)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(directory / CLASSIFIER_NAME, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike) -> "ClassifierConfig | None":
        """The classifier settings of a checkpoint folder: its classifier.json, else (a folder written
        before the split) the same fields in its config.json; None when it has neither (not a
        classifier: a language model, a span or seq2seq model)."""
        directory = Path(directory)
        path = directory / CLASSIFIER_NAME
        if path.is_file():
            raw = read_json_object(path)
        else:
            path = directory / CONFIG_NAME
            raw = {k: v for k, v in read_config(directory).items() if k in EncoderDecoderConfig.moved_to_classifier}
            if raw.get("labels") is None:
                return None
        unknown = sorted(set(raw) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"{path} has unknown fields {unknown}")
        try:
            return cls(**raw)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}: {e}") from None


@dataclass(frozen=True)
class Reading:
    """What `tokenization.review` reads a review with (its `SourceConfig`): the encoder's window from
    the architecture, the cut and the labels from the classifier's settings (None: a model that is
    no classifier reads its whole window, and has no labels). Each field is read from its owner."""

    model: EncoderDecoderConfig
    classifier: ClassifierConfig | None = None

    @property
    def max_src_len(self) -> int:
        return self.model.max_src_len

    @property
    def src_keep_tail(self) -> int:
        return self.classifier.src_keep_tail if self.classifier is not None else 0

    @property
    def labels(self) -> list[str] | None:
        return self.classifier.labels if self.classifier is not None else None


def split_folder(directory: str | os.PathLike) -> bool:
    """Rewrite a classifier folder written before the split into the new layout: config.json without
    the classifier's fields, which go to classifier.json. model.safetensors is not touched. Returns
    whether anything was rewritten (False: already split, or not a classifier)."""
    directory = Path(directory)
    raw = read_config(directory)
    moved = set(raw) & set(EncoderDecoderConfig.moved_to_classifier)
    if not moved:
        return False
    settings = ClassifierConfig.from_pretrained(directory)
    if settings is not None and not (directory / CLASSIFIER_NAME).is_file():
        settings.save_pretrained(directory)
    kept = {k: v for k, v in raw.items() if k not in moved}
    atomic_write_text(directory / CONFIG_NAME, json.dumps(kept, indent=2) + "\n")
    return True

