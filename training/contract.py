"""The task contract (`Task`, `TaskData`, `TaskOptions`, `Corpus`, `ModelCard`): what `training.run`,
`training.trainer` and `publishing.report` need of a task. The concrete tasks live in `training.tasks`.

A new task is one subclass of `Task`, registered in `training.tasks.TASKS` under its `name`, with:

- `name` and `model_class`: the `--task` name and the model it trains;
- `presets`: named model + optimisation settings, `{"tiny": {"model": {...}, "train": {...},
  "finetune": {...}}, ...}` (the dicts live in `training.presets`; `finetune` applies with
  `--init-from`); `tiny` is required, the tests train it;
- `card`: the text of its model card (`ModelCard`), which `publishing.report --cards` fills in;
- `__init__`, `prepare`, `batch`, `tokens`, `rows` and `evaluate`, and if needed `build`, `better`,
  `samples`, `periodic_rows` and `finalize` (the last adjusts the kept checkpoint once training is
  over, e.g. a classifier's temperature).

An evaluation reads `limit` *rows* of a split, the same at every evaluation: for a language model
context windows spread evenly over its held-out text (`TokenStream.windows`), otherwise the first
examples, whose order is a fixed-seed shuffle, so that either is a sample of the whole split.
Periodic evaluation reads `periodic_rows`; the final one all rows, or under `--max-minutes` as many
as fit (`training.budget.TimeBudget.final_rows`).

`tests/test_training.py` checks that every registered task defines its own `presets` and `card`.
"""

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from model import IGNORE_INDEX, PreTrainedModel
from tokenization import BPETokenizer

from .bucketing import BucketSampler
from .recipe import ShortExamples
from .training_args import TrainConfig


@dataclass(frozen=True)
class TaskOptions:
    """How a task reads its rows (the `training.run` options of the same names)."""

    val_size: int = 2500  # rows carved out of train for validation (fixed seed)
    seed: int = 1337
    max_examples: int | None = None  # use only this many rows of each split (quick runs, tests)
    source_column: str = "source"  # seq2seq
    target_column: str = "target"  # seq2seq
    data: str | None = None  # `--data FILE`: its one split is that file, which errors name


@dataclass
class Corpus:
    """The texts of one task, split: what the tokenizer and the model may train on, and what not."""

    train_texts: list[str]  # tokenizer training text
    description: dict  # goes into metrics.json


@dataclass(frozen=True)
class TaskData:
    """What `Task.prepare` makes of the rows once the tokenizer exists; the input of every later step."""

    config: Any  # the model config `Task.build` instantiates: the architecture (config.json)
    tokenizer: BPETokenizer
    train_cfg: TrainConfig  # batch size, seed and evaluation size the splits are drawn with
    splits: dict[str, Any]  # "train" (what `batch` draws from), "val", and "test" when the data has one
    description: dict = field(default_factory=dict)  # token counts, for metrics.json
    sampler: BucketSampler | None = None  # length-bucketed batches (--max-tokens, span chunks); None: random rows
    short: ShortExamples | None = None  # short text in place of reviews (--crop-prob, --evidence-prob)
    # a classifier's `classifier.ClassifierConfig` (labels, cut, temperature): saved as classifier.json
    # beside config.json wherever the run saves the model; None for a task that trains no classifier
    classifier: Any = None


@dataclass(frozen=True)
class ModelCard:
    """A task's model-card text; `{params}`, `{context}`, `{labels}`, `{max_src}`, `{head}` and `{tail}`
    in `limitations` are filled in from the checkpoint."""

    pipeline_tag: str  # the Hub's task, e.g. "text-classification"
    task_name: str  # the model-index's task name
    tags: list[str]
    what: str  # what the model is
    intended: str  # intended use
    limitations: list[str]


class Task(ABC):
    """One thing `training.run` can train: the steps of the module docstring."""

    name: ClassVar[str]
    model_class: ClassVar[type[PreTrainedModel]]
    presets: ClassVar[dict[str, dict[str, dict]]]  # preset name -> {"model": {...}, "train": {...}}
    card: ClassVar[ModelCard]
    own_text_card: ClassVar[ModelCard | None] = None  # the card of a model of `--data` text, `{data}` its file name
    snapshots: ClassVar[int] = 0  # weight snapshots a run keeps by default (the app's "watch it learn")
    corpus: Corpus  # set by __init__, which reads and validates the rows

    @abstractmethod
    def __init__(self, splits: dict, options: TaskOptions) -> None: ...

    @abstractmethod
    def prepare(self, tokenizer: BPETokenizer, model_overrides: dict, train_cfg: TrainConfig) -> TaskData:
        """The model config (vocabulary from the tokenizer, shape from `model_overrides`) and the
        splits tokenized as that model reads them."""

    def build(self, data: TaskData) -> PreTrainedModel:
        """A freshly initialised model for the prepared data (seed torch first for a fixed init)."""
        return self.model_class(data.config)

    @abstractmethod
    def batch(self, data: TaskData, step: int, rank: int = 0, world_size: int = 1) -> dict:
        """The model's keyword arguments for optimizer step `step` on process `rank`: a pure function
        of (seed, step, rank), so a resumed run sees exactly the batches of an uninterrupted one."""

    @staticmethod
    @abstractmethod
    def tokens(batch: dict) -> int:
        """Tokens a batch trains on (for throughput and `tokens_seen`)."""

    @abstractmethod
    def rows(self, data: TaskData, split: str) -> int:
        """How many rows an evaluation of the whole split reads."""

    def periodic_rows(self, data: TaskData) -> int:
        """The rows periodic evaluation reads: `eval_batches` batches."""
        return data.train_cfg.eval_batches * data.train_cfg.batch_size

    @abstractmethod
    def evaluate(self, model: PreTrainedModel, data: TaskData, split: str = "val", limit: int | None = None,
                 progress: Callable[[int], object] | None = None) -> dict:
        """Metrics on the first `limit` rows of `data.splits[split]` (all when None), with a `loss`;
        `progress(n)` is called as each batch of n rows is done (the final evaluation's bar)."""

    def better(self, new: dict, old: dict) -> bool:
        """Whether the checkpoint scoring `new` replaces the one scoring `old` (by default: lower loss)."""
        return new["loss"] < old["loss"]

    def samples(self, model: PreTrainedModel, data: TaskData) -> list[str]:
        """A few generated texts for metrics.json, to read what the model does (none by default)."""
        return []

    def finalize(self, model: PreTrainedModel, data: TaskData, limit: int | None = None,
                 progress: Callable[[int], object] | None = None) -> dict:
        """Adjust the kept checkpoint's settings once training is over (a classifier fits its
        temperature on the first `limit` validation rows, into `data.classifier`: classifier.json);
        returns what to add to metrics.json, with the validation metrics (`val_` keys) when the pass
        that adjusted the model scored them too (the final evaluation then does not read the rows
        again). Nothing by default."""
        return {}


def pair_tokens(batch: dict) -> int:
    """`Task.tokens` of an encoder-decoder batch: its sources' and its targets' tokens, padding excluded."""
    return int(batch["src_mask"].sum()) + int((batch["targets"] != IGNORE_INDEX).sum())
