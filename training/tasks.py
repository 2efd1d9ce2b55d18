"""The four tasks `training.run` knows (`TASKS`; their contract is `training.contract`): what data each
reads, what model it builds, how it draws a batch and how it is evaluated.

A task runs in three explicit steps, each taking what the step before returned, so none of them can
silently depend on another having run:

    task = LMTask(splits, TaskOptions(val_size=2500))   # read + validate the rows; task.corpus trains a tokenizer
    data = task.prepare(tokenizer, overrides, train_cfg)  # the model config and the tokenized splits: TaskData
    model = task.build(data)                              # a fresh model of data.config
    task.batch(data, step, rank, world_size)              # training batches, a pure function of the step
    task.evaluate(model, data, "val")                     # {"loss": ..., ...} on every validation row

A new task is one subclass of `Task` registered in `TASKS`.
"""

from dataclasses import replace
from typing import ClassVar

import numpy as np
import torch

from classifier import ClassifierConfig, Reader
from model import (
    DecoderOnlyConfig,
    DecoderOnlyLM,
    EncoderDecoder,
    EncoderDecoderConfig,
    GenerationConfig,
)
from tokenization import BPETokenizer, clean_texts

from . import presets
from .bucketing import BucketSampler
from .calibration import expected_calibration_error, fit_temperature
from .contract import Corpus, ModelCard, Task, TaskData, TaskOptions, pair_tokens
from .data import (
    DataError,
    PairSet,
    TokenStream,
    head_rows,
    label_column,
    require_columns,
    step_generator,
    text_column,
    validation_split,
)
from .errors import UsageError
from .evaluate import classifier_metrics, classify, evaluate_classifier, evaluate_lm
from .evidence import load_evidence
from .heldout import selection_report_split, short_texts
from .pseudo import load_pseudo_labels
from .recipe import Recipe, ShortExamples
from .sample import SAMPLE_SETTINGS, continuation, openings
from .span import SpanTask
from .texts import Texts, require_split
from .training_args import TrainConfig

SENTIMENT_LABELS = ["negative", "positive"]  # label 0 and 1 of IMDB, written out as the decoder's target
# the classifier settings a --set (or a preset's "classifier") may choose; the labels are the task's, the
# temperatures are fitted (`SentimentTask.finalize`, `benchmarks.calibration --store`)
CLASSIFIER_SETTINGS = ("src_keep_tail",)


def split_settings(settings: dict) -> tuple[dict, dict]:
    """A run's model settings (preset, --init-from shape, --set) -> (the architecture's, for config.json;
    the classifier's, for classifier.json)."""
    return ({k: v for k, v in settings.items() if k not in CLASSIFIER_SETTINGS},
            {k: v for k, v in settings.items() if k in CLASSIFIER_SETTINGS})


class LMTask(Task):
    """Next-token prediction on review text (IMDB train + unsupervised, minus validation)."""

    name = "lm"
    model_class = DecoderOnlyLM
    presets = presets.LM
    snapshots = 8
    card = ModelCard(
        "text-generation", "Language modelling", ["text-generation", "decoder-only", "gpt", "from-scratch"],
        "A small GPT-style decoder-only language model, written and trained from scratch on IMDB movie reviews.",
        "Continuing the start of an English movie review, for teaching, demos and experiments with a "
        "model small enough to read and retrain.",
        ["It writes text in the style of IMDB reviews and nothing else: it knows no facts, follows no "
         "instructions, and drifts off topic after a few sentences.",
         "It is small (about {params} M parameters, a context of {context} tokens): continuations are "
         "fluent locally but not coherent over a paragraph.",
         "It learned from public reviews and may repeat their opinions, biases and crude language."])
    own_text_card = ModelCard(
        "text-generation", "Language modelling", ["text-generation", "decoder-only", "gpt", "from-scratch"],
        "A small GPT-style decoder-only language model, written and trained from scratch on one text, "
        "`{data}` (`training.run --data`), with a tokenizer of its own trained on the same text.",
        "Continuing the start of a text like `{data}`, for teaching, demos and experiments with a model small "
        "enough to read and retrain.",
        ["It writes text in the style of `{data}` and nothing else: it knows no facts beyond it, follows no "
         "instructions, and drifts after a few sentences; a small text is partly memorised.",
         "It is small (about {params} M parameters, a context of {context} tokens): continuations are "
         "fluent locally but not coherent over a paragraph.",
         "It learned from that text only and may repeat its content, opinions and language."])

    def __init__(self, splits: dict, options: TaskOptions):
        self.texts = Texts.read(splits, options)
        self.corpus = self.texts.corpus()

    def prepare(self, tokenizer: BPETokenizer, model_overrides: dict, train_cfg: TrainConfig) -> TaskData:
        config = DecoderOnlyConfig(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_id,
                                   bos_token_id=tokenizer.bos_id, eos_token_id=tokenizer.eos_id, **model_overrides)
        splits = {name: TokenStream.from_texts(texts, tokenizer) for name, texts in self.texts.splits().items()}
        if config.reverse:  # a backward LM (`--set reverse=1`) reads every stream last token first
            splits = {name: stream.reversed() for name, stream in splits.items()}
        if len(splits["val"].ids) <= config.block_size:
            raise DataError(f"the held-out text has {len(splits['val'].ids)} tokens: fewer than one context of "
                            f"{config.block_size}; give more text (a tenth of it is held out) or a smaller "
                            "--set block_size")
        return TaskData(config, tokenizer, train_cfg, splits,
                        {"train_tokens": len(splits["train"].ids), "val_tokens": len(splits["val"].ids)})

    def batch(self, data: TaskData, step: int, rank: int = 0, world_size: int = 1) -> dict:
        cfg = data.train_cfg
        return data.splits["train"].random_batch(cfg.batch_size, data.config.block_size,
                                                 step_generator(cfg.seed, step, rank))

    @staticmethod
    def tokens(batch: dict) -> int:
        return batch["input_ids"].numel()

    def rows(self, data: TaskData, split: str) -> int:
        return data.splits[split].n_windows(data.config.block_size)

    def periodic_rows(self, data: TaskData) -> int:
        return data.train_cfg.eval_batches  # context windows

    def evaluate(self, model: DecoderOnlyLM, data: TaskData, split: str = "val", limit: int | None = None,
                 progress=None) -> dict:
        """A limited evaluation reads windows spread over the whole held-out text, not its start."""
        return evaluate_lm(model, data.splits[split], limit, progress, spread=True)

    def sample_prompts(self) -> list[str]:
        """The openings of the first held-out documents: the corpus's own words, never trained on."""
        return openings(self.texts.val)

    def samples(self, model: DecoderOnlyLM, data: TaskData) -> list[str]:
        """Sampled continuations of `sample_prompts`, to read whether they look like the corpus
        (`training.sample`: the same with any prompt). A backward LM writes the text before a
        prompt, which these prompts (a document's first words) are not made for: none."""
        if model.config.reverse:
            return []
        return [prompt + continuation(model, data.tokenizer, prompt, GenerationConfig(**SAMPLE_SETTINGS, seed=i))
                for i, prompt in enumerate(self.sample_prompts())]


class Seq2SeqTask(Task):
    """(source text -> target text) with an encoder-decoder. A `validation` split in the data is used
    as it is; without one, `val_size` train rows are held out."""

    name = "seq2seq"
    model_class = EncoderDecoder
    presets = presets.SEQ2SEQ
    card = ModelCard(
        "text2text-generation", "Sequence to sequence", ["text2text-generation", "encoder-decoder", "from-scratch"],
        "A small encoder-decoder Transformer (the original Transformer's shape), written and trained from "
        "scratch on the (source, target) pairs of its data.",
        "Teaching, demos and experiments on the task its data defines.",
        ["It knows only the mapping of its training pairs; inputs unlike them are out of its distribution.",
         "It is small (about {params} M parameters): long or unusual inputs are often written wrongly."])
    labels: ClassVar[list[str] | None] = None  # classification tasks: the target words, in label order
    validation_from_data: ClassVar[bool] = True
    select_on_selection_rows: ClassVar[bool] = False  # validate on the held-out rows' selection part only

    def __init__(self, splits: dict, options: TaskOptions):
        self.options = options
        self.train_rows = self._rows(splits, "train")
        if self.validation_from_data and "validation" in splits:
            self.val_rows = self._rows(splits, "validation")
        else:
            tr, va = validation_split(len(self.train_rows[0]), options.val_size, options.seed)
            if self.select_on_selection_rows:  # the report rows (training.heldout) are never seen
                va, _ = selection_report_split(va)
            self.val_rows = tuple([column[i] for i in va] for column in self.train_rows)
            self.train_rows = tuple([column[i] for i in tr] for column in self.train_rows)
        self.test_rows = self._rows(splits, "test") if "test" in splits else None
        tokenizer_texts = self.train_rows[0] + ([] if self.labels else self.train_rows[1])  # not the label words
        self.corpus = Corpus(tokenizer_texts, {"train_pairs": len(self.train_rows[0]),
                                               "val_pairs": len(self.val_rows[0])})

    def _rows(self, splits: dict, split: str) -> tuple[list[str], list[str]]:
        """(cleaned sources, targets) of one split: all of it validated (so an error names the row of
        the file), then `max_examples` of it kept."""
        sources, targets = self._read(require_split(splits, split), split)
        keep = head_rows(len(sources), self.options.max_examples)
        return clean_texts(sources[i] for i in keep), [targets[i] for i in keep]

    def _where(self, split: str) -> str:
        """The split as errors name it: `--data`'s file for its one split, else the split's name."""
        return self.options.data if self.options.data and split == "train" else split

    def _read(self, ds, split: str) -> tuple[list[str], list[str]]:
        """(sources, targets) of one split, validated."""
        source, target, where = self.options.source_column, self.options.target_column, self._where(split)
        require_columns(ds, [source, target], where if self.options.data else f"the {split} split")
        return text_column(ds, source, where), text_column(ds, target, where)

    def prepare(self, tokenizer: BPETokenizer, model_overrides: dict, train_cfg: TrainConfig,
                train_rows: tuple[list[str], list[str]] | None = None) -> TaskData:
        """The encoded splits; `train_rows` (sources, targets) in place of the task's training rows. A
        task with labels trains a classifier: its settings (`ClassifierConfig`) go beside the model's."""
        architecture, settings = split_settings(model_overrides)
        if settings and not self.labels:
            raise ValueError(f"{', '.join(settings)}: a classifier's setting, and the {self.name} task trains none")
        config = EncoderDecoderConfig(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_id,
                                      bos_token_id=tokenizer.bos_id, eos_token_id=tokenizer.eos_id, **architecture)
        classifier = ClassifierConfig(labels=list(self.labels), **settings) if self.labels else None
        if classifier is not None:
            classifier.check(config)
        rows = {"train": train_rows or self.train_rows, "val": self.val_rows}
        rows |= {"test": self.test_rows} if self.test_rows else {}
        splits = {name: PairSet.from_texts(sources, targets, tokenizer, config, self._label_ids(targets), classifier)
                  for name, (sources, targets) in rows.items()}
        sampler = None
        if train_cfg.max_tokens is not None:  # length-bucketed batches; their plan is a pure function of (seed, step)
            pairs = splits["train"]
            lengths = [len(s) + len(t) + 1 for s, t in zip(pairs.sources, pairs.targets, strict=True)]
            sampler = BucketSampler(lengths, train_cfg.max_tokens, train_cfg.seed)
        return TaskData(config, tokenizer, train_cfg, splits, sampler=sampler, classifier=classifier)

    def _label_ids(self, targets: list[str]) -> list[int] | None:
        return [self.labels.index(t) for t in targets] if self.labels else None

    def batch(self, data: TaskData, step: int, rank: int = 0, world_size: int = 1) -> dict:
        return data.splits["train"].batch(self._indices(data, step, rank, world_size), **_special_ids(data.tokenizer))

    def _indices(self, data: TaskData, step: int, rank: int, world_size: int) -> list[int]:
        """The training examples of a step: batch_size drawn at random, or with --max-tokens a
        length-bucketed batch of that many padded tokens (each example once per epoch)."""
        if data.sampler is not None:
            return data.sampler.batch(step, rank, world_size)
        cfg = data.train_cfg
        gen = step_generator(cfg.seed, step, rank)
        return torch.randint(0, len(data.splits["train"]), (cfg.batch_size,), generator=gen).tolist()

    tokens = staticmethod(pair_tokens)

    def rows(self, data: TaskData, split: str) -> int:
        return len(data.splits[split])

    def evaluate(self, model: EncoderDecoder, data: TaskData, split: str = "val", limit: int | None = None,
                 progress=None) -> dict:
        """Mean target loss, and exact-match accuracy of greedy decoding (of 200 rows when all are read,
        else of 32)."""
        pairs, batch_size, ids = data.splits[split], data.train_cfg.batch_size, _special_ids(data.tokenizer)
        model.eval()
        loss_sum, n, exact = 0.0, 0, 0
        device = next(model.parameters()).device
        with torch.inference_mode():
            for idx, batch in pairs.batches(batch_size, limit, **ids):
                loss_sum += model(**{k: v.to(device) for k, v in batch.items()}).loss.item() * len(idx)
                n += len(idx)
                if progress:
                    progress(len(idx))
            n_generated = min(n, 200 if limit is None else 32)
            for i in range(n_generated):
                src = torch.tensor([pairs.sources[i]], device=device)
                cfg = GenerationConfig(max_new_tokens=model.config.max_tgt_len, temperature=0,
                                       eos_token_id=ids["eos_id"])
                out = model.generate(torch.tensor([[ids["bos_id"]]], device=device), cfg, src_ids=src)
                exact += [t for t in out if t != ids["eos_id"]] == pairs.targets[i]
        return {"loss": loss_sum / n, "exact_match": exact / n_generated}


class SentimentTask(Seq2SeqTask):
    """IMDB reviews -> "positive" / "negative", trained text-to-text (as T5 does). Validation is
    always held out of train (as `training.evaluate --data-dir` re-creates it)."""

    name = "sentiment"
    labels = SENTIMENT_LABELS
    presets = presets.SENTIMENT
    card = ModelCard(
        "text-classification", "Sentiment classification",
        ["text-classification", "sentiment-analysis", "encoder-decoder", "text-to-text", "from-scratch"],
        "A small encoder-decoder Transformer, written and trained from scratch, that classifies English "
        "movie reviews as positive or negative: the encoder reads the review and the decoder scores each "
        "label word (text-to-text, as T5 does). Its encoder starts from the language model of this "
        "project, pretrained on the same reviews.",
        "Telling whether an English movie review is positive or negative, for teaching, demos and "
        "experiments.",
        ["It knows two labels only ({labels}); a neutral, mixed or off-topic text still gets one of them.",
         "It was trained and measured on IMDB movie reviews only; other domains (products, tweets) and "
         "other languages are out of its distribution, and its accuracy there is unknown.",
         "It trained on a review longer than {max_src} tokens as its first {head} and its last {tail} tokens; "
         "`classifier.Reader` and the app read such a review whole, that cut first and the middle it leaves "
         "out in windows of their own, the windows' scores averaged (`tokenization.windows`).",
         "Links, @handles, emoji and markup are set aside, SHOUTING, Headline Case and stretched letters "
         "respelled, and a one-line text read as a sentence inside a review (a space before it, so that a word "
         "alone has the token it has mid-review) before it reads a text (`tokenization.normalise`); negation "
         "in a short text (\"not bad\") is still often misread (`python -m benchmarks.behaviour` measures how "
         "often).",
         "Its probabilities are softmaxed at a temperature of {temperature:.2f}, fitted on the selection rows' "
         "full reviews (temperature scaling); `python -m benchmarks.calibration` measures how well that holds on "
         "the report rows, full reviews and one-line texts (their first and last sentences)."])
    validation_from_data = False
    select_on_selection_rows = True

    def __init__(self, splits: dict, options: TaskOptions):
        super().__init__(splits, options)
        self.unlabeled = splits.get("unsupervised")  # what --pseudo-labels rows come from

    def prepare(self, tokenizer: BPETokenizer, model_overrides: dict, train_cfg: TrainConfig) -> TaskData:
        recipe = train_cfg.recipe
        evidence = self.read_evidence(recipe)
        rows, added = self.with_added_rows(recipe, evidence)
        data = super().prepare(tokenizer, model_overrides, train_cfg, rows)
        if added:
            data = replace(data, description={**data.description, **added})
        if not (recipe.crop_prob or recipe.evidence_prob):
            return data
        texts, labels, counts = evidence if recipe.evidence_prob else ([], [], {})
        short = ShortExamples(rows[0], tokenizer, data.config.max_src_len, recipe.crop_prob,
                              (texts, labels), recipe.evidence_prob,
                              PairSet.target_ids(self.labels, tokenizer, data.config), recipe.shout_prob)
        description = {**data.description, **({"evidence_snippets": counts} if counts else {})}
        return replace(data, short=short, description=description)

    def read_evidence(self, recipe: Recipe) -> tuple[list[str], list[int], dict] | None:
        """The snippets of --evidence (`training.evidence.load_evidence`: texts, labels, counts by kind),
        read once for --evidence-prob and --evidence-copies alike; None without a cache."""
        if not recipe.evidence:
            return None
        if self.options.max_examples is not None:
            raise UsageError("--evidence does not combine with --max-examples: the held-out rows are then "
                             "other reviews, which the evidence may come from")
        return load_evidence(recipe.evidence, self.options.val_size, self.options.seed)

    def with_added_rows(self, recipe: Recipe, evidence: tuple[list[str], list[int], dict] | None
                        ) -> tuple[tuple[list[str], list[str]], dict]:
        """The training rows, then (with --sentence-copies N) each review's first and last sentence
        with the review's label, N times over: the short-text check's kind of text
        (`training.heldout.short_texts`), made of training reviews only; then (with --pseudo-labels)
        the unlabeled reviews the teacher was confident of, with its verdict (`training.pseudo`); then
        (with --evidence-copies N) each distinct snippet of `evidence` (`read_evidence`) N times, with
        its label. Also how many rows of each kind were added, for metrics.json."""
        texts, targets = self.train_rows
        added = {}
        if recipe.sentence_copies:
            short = short_texts(texts, targets) * recipe.sentence_copies
            texts, targets = texts + [r.text for r in short], targets + [r.label for r in short]
            added["sentence_rows"] = len(short)
        if recipe.pseudo_labels:
            if self.options.max_examples is not None:
                raise UsageError("--pseudo-labels does not combine with --max-examples: the held-out rows are then "
                                 "other reviews, which the labelled ones may repeat")
            more, labels = load_pseudo_labels(recipe.pseudo_labels, self.unlabeled, self.options.val_size,
                                              self.options.seed, recipe.pseudo_confidence, self.labels)
            texts, targets = texts + more, targets + labels
            added["pseudo_rows"] = len(more)
        if recipe.evidence_copies:
            distinct = list(dict.fromkeys(zip(evidence[0], evidence[1], strict=True)))  # once, however many gave it
            texts = texts + [t for t, _ in distinct] * recipe.evidence_copies
            targets = targets + [SENTIMENT_LABELS[y] for _, y in distinct] * recipe.evidence_copies
            added["evidence_rows"] = len(distinct) * recipe.evidence_copies
        return (texts, targets), added

    def batch(self, data: TaskData, step: int, rank: int = 0, world_size: int = 1) -> dict:
        """With --crop-prob and --evidence-prob, those fractions of the reviews are replaced by 1-3 of
        their sentences and by evidence snippets (`ShortExamples`)."""
        indices, cfg, pairs = self._indices(data, step, rank, world_size), data.train_cfg, data.splits["train"]
        if data.short is not None:
            pairs = data.short.replace(pairs, indices, np.random.default_rng([cfg.seed, step, rank, 1]))
            indices = range(len(indices))
        return pairs.batch(indices, **_special_ids(data.tokenizer))

    def _read(self, ds, split: str) -> tuple[list[str], list[str]]:
        where = self._where(split)
        require_columns(ds, ["text", "label"], where if self.options.data else f"the {split} split")
        words = [SENTIMENT_LABELS[y] for y in label_column(ds, "label", where, SENTIMENT_LABELS)]
        return text_column(ds, "text", where), words

    def evaluate(self, model: EncoderDecoder, data: TaskData, split: str = "val", limit: int | None = None,
                 progress=None) -> dict:
        pairs = data.splits[split]
        return evaluate_classifier(self.reader(model, data), pairs, pairs.labels, data.train_cfg.batch_size, limit,
                                   progress=progress)

    @staticmethod
    def reader(model: EncoderDecoder, data: TaskData) -> Reader:
        """The model being trained as the classifier it is becoming (`data.classifier`'s labels and temperature)."""
        return Reader(model, data.tokenizer, classifier_config=data.classifier)

    def better(self, new: dict, old: dict) -> bool:
        return (new["accuracy"], -new["loss"]) > (old["accuracy"], -old["loss"])

    def finalize(self, model: EncoderDecoder, data: TaskData, limit: int | None = None, progress=None) -> dict:
        """Temperature scaling (`training.calibration`) fitted on the validation (selection) rows; the
        same pass scores them (the val_ metrics), so the final evaluation reads them once."""
        pairs, reader = data.splits["val"], self.reader(model, data)
        scores = classify(reader, pairs, data.train_cfg.batch_size * model.config.max_src_len, limit, progress)
        labels = torch.tensor(pairs.labels[: len(scores)])
        before = expected_calibration_error(scores.softmax(-1), labels)
        data.classifier.temperature = fit_temperature(scores, labels)  # saved to classifier.json by the trainer
        metrics = classifier_metrics(reader, scores, pairs.labels)  # ECE at the fitted temperature
        return {"temperature": data.classifier.temperature, "val_ece_at_temperature_1": before,
                **{f"val_{k}": v for k, v in metrics.items()}}


def _special_ids(tokenizer: BPETokenizer) -> dict:
    return {"pad_id": tokenizer.pad_id, "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id}


TASKS: dict[str, type[Task]] = {"lm": LMTask, "sentiment": SentimentTask, "seq2seq": Seq2SeqTask, "span": SpanTask}
