"""The three tasks `training.run` knows: what data each reads, what model it builds, how it draws a
batch and how it is evaluated."""

import random
from dataclasses import dataclass

import torch

from model import DecoderOnlyConfig, DecoderOnlyLM, EncoderDecoder, EncoderDecoderConfig, GenerationConfig
from tokenization import BPETokenizer, clean_text

from .data import DataError, PairSet, TokenStream, require_columns, step_generator, validation_split
from .evaluate import evaluate_classifier, evaluate_lm

SENTIMENT_LABELS = ["negative", "positive"]  # label 0 and 1 of IMDB, written out as the decoder's target


@dataclass
class Corpus:
    """The texts of one task, split: what the tokenizer and the model may train on, and what not."""

    train_texts: list[str]  # tokenizer training text
    description: dict  # goes into metrics.json


class LMTask:
    """Next-token prediction on review text (IMDB train + unsupervised, minus validation)."""

    name = "lm"
    model_class = DecoderOnlyLM

    def __init__(self, splits: dict, val_size: int, seed: int, max_examples: int | None):
        train = _split(splits, "train")
        require_columns(train, ["text"], "the train split")
        texts = [clean_text(t) for t in _head(train, max_examples)["text"]]
        train_idx, val_idx = validation_split(len(texts), val_size, seed)
        self.val_texts = [texts[i] for i in val_idx]
        self.train_texts = [texts[i] for i in train_idx]
        if "unsupervised" in splits:
            self.train_texts += [clean_text(t) for t in _head(splits["unsupervised"], max_examples)["text"]]
        self.test_texts = ([clean_text(t) for t in _head(splits["test"], max_examples)["text"]]
                           if "test" in splits else None)
        self.corpus = Corpus(self.train_texts, {"train_texts": len(self.train_texts),
                                                "val_texts": len(self.val_texts)})

    def build(self, tokenizer: BPETokenizer, model_overrides: dict, train_cfg) -> DecoderOnlyLM:
        config = DecoderOnlyConfig(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_id,
                                   bos_token_id=tokenizer.bos_id, eos_token_id=tokenizer.eos_id, **model_overrides)
        self.train_stream = TokenStream.from_texts(self.train_texts, tokenizer)
        self.val_stream = TokenStream.from_texts(self.val_texts, tokenizer)
        self.block_size, self.batch_size, self.seed = config.block_size, train_cfg.batch_size, train_cfg.seed
        self.eval_batches = train_cfg.eval_batches
        if len(self.val_stream.ids) <= config.block_size:
            raise DataError(f"validation text has {len(self.val_stream.ids)} tokens: fewer than one "
                            f"context of {config.block_size}; use more data or a smaller block_size")
        self.corpus.description.update(train_tokens=len(self.train_stream.ids), val_tokens=len(self.val_stream.ids))
        return DecoderOnlyLM(config)

    def batch(self, step: int, rank: int) -> dict:
        return self.train_stream.random_batch(self.batch_size, self.block_size, step_generator(self.seed, step, rank))

    @staticmethod
    def tokens(batch: dict) -> int:
        return batch["input_ids"].numel()

    def evaluate(self, model, full: bool) -> dict:
        return evaluate_lm(model, self.val_stream, None if full else self.eval_batches)

    def test(self, model, tokenizer) -> dict | None:
        return evaluate_lm(model, TokenStream.from_texts(self.test_texts, tokenizer)) if self.test_texts else None

    @staticmethod
    def better(new: dict, old: dict) -> bool:
        return new["loss"] < old["loss"]

    def samples(self, model, tokenizer, prompts=("This movie was", "I have to say that")) -> list[str]:
        """A few sampled continuations for metrics.json, to read whether they look like reviews."""
        out = []
        for i, prompt in enumerate(prompts):
            ids = torch.tensor([[tokenizer.bos_id, *tokenizer.encode(prompt)]], device=next(model.parameters()).device)
            cfg = GenerationConfig(max_new_tokens=60, temperature=0.8, top_k=50, seed=i, eos_token_id=tokenizer.eos_id)
            out.append(prompt + tokenizer.decode(model.generate(ids, cfg)))
        return out


class Seq2SeqTask:
    """(source text -> target text) with an encoder-decoder. Sentiment is the special case whose
    targets are the label words; its evaluation is classification accuracy over those words."""

    name = "seq2seq"
    model_class = EncoderDecoder

    def __init__(self, splits: dict, val_size: int, seed: int, max_examples: int | None,
                 source_column: str = "source", target_column: str = "target"):
        train = _head(_split(splits, "train"), max_examples)
        require_columns(train, [source_column, target_column], "the train split")
        self.source_column, self.target_column = source_column, target_column
        sources, targets = self._read(train)
        if "validation" in splits:
            val = _head(splits["validation"], max_examples)
            require_columns(val, [source_column, target_column], "the validation split")
            self.train_rows, (self.val_src, self.val_tgt) = (sources, targets), self._read(val)
        else:
            tr, va = validation_split(len(sources), val_size, seed)
            self.train_rows = ([sources[i] for i in tr], [targets[i] for i in tr])
            self.val_src, self.val_tgt = [sources[i] for i in va], [targets[i] for i in va]
        self.test_rows = self._read(_head(splits["test"], max_examples)) if "test" in splits else None
        self.corpus = Corpus(self.train_rows[0] + self.train_rows[1],
                             {"train_pairs": len(self.train_rows[0]), "val_pairs": len(self.val_src)})
        self.labels = None

    def _read(self, ds) -> tuple[list, list]:
        return [clean_text(str(t)) for t in ds[self.source_column]], [str(t) for t in ds[self.target_column]]

    def build(self, tokenizer: BPETokenizer, model_overrides: dict, train_cfg) -> EncoderDecoder:
        config = EncoderDecoderConfig(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_id,
                                      bos_token_id=tokenizer.bos_id, eos_token_id=tokenizer.eos_id,
                                      labels=self.labels, **model_overrides)
        pairs = lambda src, tgt: PairSet.from_texts(src, tgt, tokenizer, config)
        self.train_pairs, self.val_pairs = pairs(*self.train_rows), pairs(self.val_src, self.val_tgt)
        self.test_pairs = pairs(*self.test_rows) if self.test_rows else None
        self.tokenizer, self.batch_size, self.seed = tokenizer, train_cfg.batch_size, train_cfg.seed
        self.eval_batches = train_cfg.eval_batches
        self.ids = {"pad_id": tokenizer.pad_id, "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id}
        return EncoderDecoder(config)

    def batch(self, step: int, rank: int) -> dict:
        return self.train_pairs.random_batch(self.batch_size, step_generator(self.seed, step, rank), **self.ids)

    @staticmethod
    def tokens(batch: dict) -> int:
        return int(batch["src_mask"].sum()) + int((batch["targets"] != -100).sum())

    def evaluate(self, model, full: bool, pairs: PairSet | None = None) -> dict:
        """Mean target loss, and exact-match accuracy of greedy decoding (on a sample when not full)."""
        pairs = pairs or self.val_pairs
        limit = None if full else self.eval_batches * self.batch_size
        model.eval()
        loss_sum, n, exact = 0.0, 0, 0
        device = next(model.parameters()).device
        with torch.inference_mode():
            for idx, batch in pairs.batches(self.batch_size, limit, **self.ids):
                loss_sum += model(**{k: v.to(device) for k, v in batch.items()}).loss.item() * len(idx)
                n += len(idx)
            n_generated = min(n, 200 if full else 32)
            for i in range(n_generated):
                src = torch.tensor([pairs.sources[i]], device=device)
                cfg = GenerationConfig(max_new_tokens=model.config.max_tgt_len, temperature=0,
                                       eos_token_id=self.ids["eos_id"])
                out = model.generate(torch.tensor([[self.ids["bos_id"]]], device=device), cfg, src_ids=src)
                exact += [t for t in out if t != self.ids["eos_id"]] == pairs.targets[i]
        return {"loss": loss_sum / n, "exact_match": exact / n_generated}

    def test(self, model, tokenizer) -> dict | None:
        return self.evaluate(model, True, self.test_pairs) if self.test_pairs else None

    @staticmethod
    def better(new: dict, old: dict) -> bool:
        return new["loss"] < old["loss"]


class SentimentTask(Seq2SeqTask):
    """IMDB reviews -> "positive" / "negative", trained text-to-text (as T5 does)."""

    name = "sentiment"

    def __init__(self, splits: dict, val_size: int, seed: int, max_examples: int | None):
        train = _head(_split(splits, "train"), max_examples)
        require_columns(train, ["text", "label"], "the train split")
        bad = sorted(set(train["label"]) - {0, 1})
        if bad:
            raise DataError(f"the train split has labels {bad}; sentiment needs 0 (negative) and 1 (positive)")
        rows = {name: _with_label_words(ds) for name, ds in splits.items() if name in ("train", "test")}
        super().__init__(rows, val_size, seed, max_examples, "text", "target")
        self.val_labels = [SENTIMENT_LABELS.index(t) for t in self.val_tgt]
        self.test_labels = [SENTIMENT_LABELS.index(t) for t in self.test_rows[1]] if self.test_rows else None
        self.labels = SENTIMENT_LABELS
        self.corpus.train_texts = self.train_rows[0]

    def evaluate(self, model, full: bool, pairs=None, labels=None) -> dict:
        limit = None if full else self.eval_batches * self.batch_size
        return evaluate_classifier(model, pairs or self.val_pairs, labels or self.val_labels, self.tokenizer,
                                   self.batch_size, limit)

    def test(self, model, tokenizer) -> dict | None:
        return self.evaluate(model, True, self.test_pairs, self.test_labels) if self.test_pairs else None

    @staticmethod
    def better(new: dict, old: dict) -> bool:
        return (new["accuracy"], -new["loss"]) > (old["accuracy"], -old["loss"])


def _with_label_words(ds):
    return ds.map(lambda row: {"target": SENTIMENT_LABELS[row["label"]]})


def _head(ds, n: int | None):
    """The first n rows, after a fixed shuffle when n is set (IMDB's files are sorted by label)."""
    if n is None or n >= len(ds):
        return ds
    return ds.select(sorted(random.Random(0).sample(range(len(ds)), n)))


def _split(splits: dict, name: str):
    if name not in splits:
        raise DataError(f"the data has no {name!r} split (it has {sorted(splits)})")
    return splits[name]


TASKS = {"lm": LMTask, "sentiment": SentimentTask, "seq2seq": Seq2SeqTask}
