"""One record per served model: the model, its tokenizer, configs, metrics and what to tell the
visitor about it, loaded from one checkpoint folder (the layout in `storage`).

Loading never raises: a missing, broken, untrained or still-training checkpoint becomes a record
whose `status` and `message` say so, and every tab that needs it answers with that message.
"""

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from classifier import ClassifierConfig, Reading
from demo.serving.errors import DemoError, scrub_paths
from model import DecoderOnlyLM, EncoderDecoder, PreTrainedModel, load_pretrained
from storage import (
    CONFIG_NAME,
    CURVE_NAME,
    IN_PROGRESS_NAME,
    METRICS_NAME,
    TOKENIZER_NAME,
    is_being_written,
    resolve_checkpoint,
    run_marker,
)
from tokenization import BPETokenizer

log = logging.getLogger(__name__)

LM, SENTIMENT = "lm", "sentiment"  # sub-directories of the checkpoints directory
# the sentiment model's second reader: a classifier that reads reviews backwards, whose probabilities
# the verdict averages with the sentiment model's (ULMFiT's forward + backward ensemble); optional
SENTIMENT_BACKWARD = "sentiment-backward"
MODEL_CLASSES: dict[str, type[PreTrainedModel]] = {LM: DecoderOnlyLM, SENTIMENT: EncoderDecoder,
                                                   SENTIMENT_BACKWARD: EncoderDecoder}
MODEL_NAMES = {LM: "language model", SENTIMENT: "sentiment model",
               SENTIMENT_BACKWARD: "backward sentiment reader"}  # as a sentence names them
MAX_CURVE_BYTES = 5_000_000


@dataclass
class Checkpoint:
    """A served model and everything the header, the About tab and the error messages say about it."""

    name: str  # LM or SENTIMENT
    location: str  # relative, for display: never an absolute path
    directory: Path | None = None  # where it was loaded from (its snapshots live there); never displayed
    status: str = "missing"  # "ready", "missing" or "error"
    message: str = ""
    model: PreTrainedModel | None = None
    tokenizer: BPETokenizer | None = None
    config: dict = field(default_factory=dict)  # the architecture (config.json)
    classifier: ClassifierConfig | None = None  # a sentiment model's labels, cut, temperatures (classifier.json)
    metrics: dict = field(default_factory=dict)
    training_curve_png: bytes | None = None

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def trained(self) -> bool:
        """A training run writes metrics.json next to the weights; without it, assume random init."""
        return bool(self.metrics)

    @property
    def parameters(self) -> int | None:
        return self.model.num_parameters() if self.model is not None else None

    @property
    def device(self):
        return next(self.model.parameters()).device if self.model is not None else None

    @property
    def reading(self) -> Reading:
        """How a sentiment model reads a review (`classifier.Reading`: its window, cut and labels)."""
        return Reading(self.model.config, self.classifier)

    def require(self) -> tuple[PreTrainedModel, BPETokenizer]:
        """The model and tokenizer, or the visitor's explanation of why there are none."""
        if self.model is None or self.tokenizer is None:
            raise DemoError(f"The {MODEL_NAMES[self.name]} is not available: {self.message}.")
        return self.model, self.tokenizer


class Scrubber:
    """Error messages name the checkpoints folder by its short display name, never its path."""

    def __init__(self, root: Path):
        self.root = root

    def __call__(self, message: str) -> str:
        prefixes = {str(self.root.resolve()), str(self.root.absolute()), str(self.root)} - {"", "."}
        for prefix in sorted(prefixes, key=len, reverse=True):  # longest spelling first
            message = message.replace(prefix, self.root.name)
        return scrub_paths(message)


def load_tokenizer(directory: Path, scrub: Scrubber) -> tuple[BPETokenizer | None, str]:
    """The folder's tokenizer, or None and why."""
    if not (directory / TOKENIZER_NAME).is_file():
        return None, f"no {TOKENIZER_NAME}"
    try:
        return BPETokenizer.from_file(directory / TOKENIZER_NAME), ""
    except Exception as e:  # a broken file must not stop the app from starting
        log.exception("could not load %s", directory / TOKENIZER_NAME)
        return None, scrub(f"{TOKENIZER_NAME} could not be read: {e}")


def read_metrics(directory: Path) -> dict:
    path = directory / METRICS_NAME
    if not path.is_file():
        return {}
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        log.warning("unreadable %s", path)
        return {}
    return metrics if isinstance(metrics, dict) else {}


def load_checkpoint(root: Path, name: str, device: str, shared_tokenizer: BPETokenizer | None,
                    named: str | None = None) -> Checkpoint:
    """`root/name` as a `Checkpoint`; its own tokenizer.json wins over the shared one. `named`: a run
    folder, checkpoint folder or Hub id given instead (`python -m demo --lm PATH`), whose tokenizer
    must be beside its weights."""
    if named is not None:
        return _load_named(named, name, device)
    ckpt = Checkpoint(name=name, location=f"{root.name}/{name}", directory=root / name)
    if not (root / name / CONFIG_NAME).is_file():
        ckpt.message = f"no checkpoint in `{ckpt.location}/` (train one, see About)"
        return ckpt
    return _load(ckpt, device, shared_tokenizer, Scrubber(root), f", and none shared in `{root.name}/`")


def _load_named(named: str, name: str, device: str) -> Checkpoint:
    """A model named on the command line: a missing or unusable one is an error, never "missing"."""
    path = Path(named)
    ckpt = Checkpoint(name=name, location=f"{path.parent.name}/{path.name}".lstrip("/"))
    try:
        ckpt.directory = resolve_checkpoint(named)  # a folder, else the local copy of a Hub repo
    except OSError as e:
        ckpt.status, ckpt.message = "error", scrub_paths(str(e))
        return ckpt
    if not (ckpt.directory / CONFIG_NAME).is_file() and not is_being_written(ckpt.directory):
        ckpt.status = "error"
        ckpt.message = f"`{ckpt.location}` holds no model (no {CONFIG_NAME}: a run writes it at its first evaluation)"
        return ckpt
    return _load(ckpt, device, None, Scrubber(ckpt.directory.parent), ": it must be beside the weights")


def _load(ckpt: Checkpoint, device: str, shared_tokenizer: BPETokenizer | None, scrub: Scrubber,
          elsewhere: str) -> Checkpoint:
    """The model of `ckpt.directory`, once the folder is known to hold a config or a run's in-progress
    mark; `elsewhere` says where else a tokenizer was looked for."""
    directory, name = ckpt.directory, ckpt.name
    if is_being_written(directory):
        ckpt.status = "error"
        stopped = run_marker(directory).get("interrupted")
        ckpt.message = (f"`{ckpt.location}/` holds a run stopped at step {stopped['step']}: finish it with "
                        f"`{scrub(stopped['resume'])}`, or serve a finished run" if stopped else
                        f"`{ckpt.location}/` is still being written by a training run (it holds "
                        f"{IN_PROGRESS_NAME}); serve it once the run has finished, or serve a finished run")
        return ckpt
    ckpt.metrics = read_metrics(directory)
    curve = directory / CURVE_NAME
    if curve.is_file() and curve.stat().st_size <= MAX_CURVE_BYTES:
        ckpt.training_curve_png = curve.read_bytes()
    tokenizer, why = load_tokenizer(directory, scrub)
    tokenizer = tokenizer or shared_tokenizer
    cls = MODEL_CLASSES[name]
    try:
        if tokenizer is None:
            raise DemoError(f"no tokenizer ({why}{elsewhere})")
        model = load_pretrained(directory, device)
        classifier = ClassifierConfig.from_pretrained(directory) if cls is EncoderDecoder else None
        if classifier is not None:
            classifier.check(model.config)
        if not isinstance(model, cls):
            raise DemoError(f"`{ckpt.location}` holds a {model.model_type!r} model, expected {cls.model_type!r}")
        if tokenizer.vocab_size > model.config.vocab_size:
            raise DemoError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model "
                            f"only {model.config.vocab_size}: they were not trained together")
    except Exception as e:
        if not isinstance(e, DemoError):
            log.exception("could not load checkpoint %s", directory)
        ckpt.status, ckpt.message = "error", scrub(str(e))
        return ckpt
    ckpt.status, ckpt.model, ckpt.tokenizer, ckpt.classifier = "ready", model, tokenizer, classifier
    ckpt.config = dict(vars(model.config))
    if not ckpt.trained:
        ckpt.message = f"no {METRICS_NAME}: probably untrained (random weights), expect gibberish"
    return ckpt


def pair_readers(forward: Checkpoint, backward: Checkpoint) -> Checkpoint:
    """`backward` as the sentiment model's second reader, or turned into an "error" record saying why
    it cannot be one. Averaging two classifiers' probabilities means something only when they read
    the same review the same way: the same tokenizer, the same cut (max_src_len, src_keep_tail) and
    the same labels, one reading forwards and the other backwards."""
    if not (forward.ready and backward.ready):
        return backward
    f, b = forward.reading, backward.reading
    why = ("it does not read backwards (reverse is false)"
           if not b.model.reverse or f.model.reverse
           else f"its labels are {b.labels}, the sentiment model's {f.labels}" if b.labels != f.labels
           else "it cuts reviews differently (max_src_len, src_keep_tail)"
           if (b.max_src_len, b.src_keep_tail) != (f.max_src_len, f.src_keep_tail)
           else "its tokenizer is not the sentiment model's"
           if backward.tokenizer.tokenizer.to_str() != forward.tokenizer.tokenizer.to_str() else "")
    if why:
        backward.status, backward.model, backward.message = "error", None, f"not paired with the sentiment model: {why}"
    return backward
