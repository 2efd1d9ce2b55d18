"""T5-style span corruption: pretraining that matches how the encoder-decoder is used.

The classifier's encoder reads a review bidirectionally, but a decoder-only LM only ever read text
left to right. Span corruption (Raffel et al. 2020, section 3.1.4) trains the whole EncoderDecoder
(bidirectional encoder, decoder and cross-attention) on unlabeled reviews: about 15% of the
tokens, in spans of mean length 3, are cut out of the source and each span is replaced by its own
sentinel token; the decoder writes the spans back, each after its sentinel:

    original  The movie was far too long and the ending made no sense at all
    source    The movie <S0> long and the ending <S1> sense at all </s>
    target    <S0> was far too <S1> made no </s>

Sentinels are ids above the tokenizer's vocabulary (`tokenizer.vocab_size + k` for the k-th span),
so the shipped tokenizer and LM stay as they are: only the span model's embedding matrix grows by
`N_SENTINELS` rows. Its encoder starts from the LM (`EncoderDecoder.init_from`), whose embedding rows
fill the first rows; a classifier then starts from the whole span model (encoder, decoder and
cross-attention), taking the first rows of its embedding matrix.

Corruption is drawn afresh for every batch from a generator seeded by (seed, step, rank), so the
batches stay a pure function of the step and `--resume` stays bit-exact. The task (`SpanTask`,
`--task span`) is at the end: it reads the language model's documents (`training.texts.Texts`).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch

from model import IGNORE_INDEX, EncoderDecoder, EncoderDecoderConfig
from tokenization import BPETokenizer
from tokenization.batches import length_batches

from . import presets
from .bucketing import BucketSampler
from .contract import ModelCard, Task, TaskData, TaskOptions, pair_tokens
from .data import PairSet
from .texts import Texts
from .training_args import TrainConfig

N_SENTINELS = 100  # as T5; a 1,024-token chunk has about 51 spans
NOISE_DENSITY = 0.15
MEAN_SPAN_LENGTH = 3.0


def span_counts(length: int, density: float = NOISE_DENSITY, mean_span: float = MEAN_SPAN_LENGTH) -> tuple[int, int]:
    """(noise tokens, spans) for a sequence of `length` tokens: round(length x density) tokens (at
    least 1, at most length - 1), in round(noise / mean_span) spans (at least 1)."""
    if length < 2:
        raise ValueError(f"span corruption needs at least 2 tokens, got {length}")
    n_noise = min(max(round(length * density), 1), length - 1)
    n_spans = min(max(round(n_noise / mean_span), 1), length - n_noise)
    return n_noise, n_spans


def _segment(n_items: int, n_segments: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random split of n_items into n_segments positive lengths."""
    cuts = np.sort(rng.choice(n_items - 1, n_segments - 1, replace=False)) + 1
    return np.diff(np.concatenate([[0], cuts, [n_items]]))


def noise_mask(length: int, rng: np.random.Generator, density: float = NOISE_DENSITY,
               mean_span: float = MEAN_SPAN_LENGTH) -> np.ndarray:
    """(length,) bool, True = corrupted: kept and noise runs alternate, starting with a kept run
    (T5's `random_spans_noise_mask`)."""
    n_noise, n_spans = span_counts(length, density, mean_span)
    noise, kept = _segment(n_noise, n_spans, rng), _segment(length - n_noise, n_spans, rng)
    runs = np.stack([kept, noise], axis=1).reshape(-1)  # kept0, noise0, kept1, noise1, ...
    return np.repeat(np.tile([False, True], n_spans), runs)


def corrupt(ids: list[int], sentinel_base: int, rng: np.random.Generator, density: float = NOISE_DENSITY,
            mean_span: float = MEAN_SPAN_LENGTH) -> tuple[list[int], list[int]]:
    """(source, target): each noise span replaced by sentinel_base + k in the source; the target
    is every sentinel followed by the span it stands for."""
    mask = noise_mask(len(ids), rng, density, mean_span)
    source, target, k = [], [], -1
    for i, (token, noisy) in enumerate(zip(ids, mask, strict=True)):
        if noisy:
            if i == 0 or not mask[i - 1]:
                k += 1
                source.append(sentinel_base + k)
                target.append(sentinel_base + k)
            target.append(token)
        else:
            source.append(token)
    if k >= N_SENTINELS:
        raise ValueError(f"{k + 1} spans need more than the {N_SENTINELS} sentinels: use shorter chunks")
    return source, target


def restore(source: list[int], target: list[int], sentinel_base: int) -> list[int]:
    """The original sequence, from a source and target that `corrupt` made."""
    spans: dict[int, list[int]] = {}
    for token in target:
        if token >= sentinel_base:
            current = spans.setdefault(token, [])
        else:
            current.append(token)
    return [t for token in source for t in (spans[token] if token >= sentinel_base else [token])]


def max_target_length(max_src_len: int) -> int:
    """Decoder positions a corrupted chunk of max_src_len - 1 tokens needs: noise + sentinels + <s>."""
    return sum(span_counts(max_src_len - 1)) + 1


@dataclass
class SpanSet:
    """Token chunks of review text, corrupted into (source, target) batches on the fly."""

    chunks: list[list[int]]  # each at most max_src_len - 1 tokens (the source's </s> takes one slot)
    sentinel_base: int  # = the tokenizer's vocabulary size
    pad_id: int
    bos_id: int
    eos_id: int

    @classmethod
    def from_texts(cls, texts: list[str], tokenizer, max_src_len: int) -> "SpanSet":
        """Each review cut into consecutive chunks of max_src_len - 1 tokens (a last piece under 2
        tokens is dropped: nothing to corrupt)."""
        size = max_src_len - 1
        ids = tokenizer.encode_batch(texts, padding=False, return_tensors=False).input_ids
        chunks = [doc[i : i + size] for doc in ids for i in range(0, len(doc), size) if len(doc[i : i + size]) >= 2]
        return cls(chunks, tokenizer.vocab_size, tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)

    def __len__(self) -> int:
        return len(self.chunks)

    def batch(self, indices: list[int], rng: np.random.Generator) -> dict:
        """Model kwargs for the chunks at `indices`, corrupted with `rng`: right-padded, -100 =
        ignored target position."""
        pairs = [corrupt(self.chunks[i], self.sentinel_base, rng) for i in indices]
        src, tgt = [[*s, self.eos_id] for s, _ in pairs], [t for _, t in pairs]
        return PairSet(src, tgt).batch(range(len(src)), pad_id=self.pad_id, bos_id=self.bos_id, eos_id=self.eos_id)

    def sampler(self, max_tokens: int, seed: int) -> BucketSampler:
        """Training batches of similar-length chunks within `max_tokens` padded source tokens."""
        return BucketSampler([len(c) + 1 for c in self.chunks], max_tokens, seed)


@torch.inference_mode()
def evaluate_spans(model: EncoderDecoder, spans: SpanSet, max_tokens: int, seed: int, limit: int | None = None,
                   progress: Callable[[int], object] | None = None) -> dict:
    """Loss per target token and teacher-forced token accuracy on the first `limit` chunks, each
    corrupted the same way at every evaluation (a generator seeded by `seed`); `progress(n)` after
    each batch of n chunks."""
    model.eval()
    device = next(model.parameters()).device
    n = len(spans) if limit is None else min(limit, len(spans))
    rng = np.random.default_rng([seed, 0xE7A1])
    loss_sum, correct, n_tokens = 0.0, 0, 0
    for idx in length_batches([len(c) + 1 for c in spans.chunks[:n]], max_tokens):
        batch = {k: v.to(device) for k, v in spans.batch(idx, rng).items()}
        logits = model(batch["src_ids"], batch["tgt_ids"], batch["src_mask"]).logits
        keep = batch["targets"] != IGNORE_INDEX
        loss_sum += torch.nn.functional.cross_entropy(logits[keep].float(), batch["targets"][keep],
                                                      reduction="sum").item()
        correct += (logits[keep].argmax(-1) == batch["targets"][keep]).sum().item()
        n_tokens += int(keep.sum())
        if progress:
            progress(len(idx))
    loss = loss_sum / n_tokens
    return {"loss": loss, "ppl": math.exp(loss), "token_accuracy": correct / n_tokens, "tokens": n_tokens}


class SpanTask(Task):
    """T5-style span corruption (`training.span`) of review text (IMDB train + unsupervised, minus
    the held-out reviews): pretrains the whole encoder-decoder, whose vocabulary is the tokenizer's
    plus N_SENTINELS sentinel ids. `--init-from` an LM starts its encoder; a classifier then starts
    from it with `--init-from`."""

    name = "span"
    model_class = EncoderDecoder
    presets = presets.SPAN
    card = ModelCard(
        "text2text-generation", "Span corruption", ["text2text-generation", "encoder-decoder", "t5", "from-scratch"],
        "A small encoder-decoder Transformer pretrained from scratch on IMDB movie reviews by T5's span "
        "corruption: the encoder reads a review with spans replaced by sentinels, the decoder writes the spans.",
        "A starting point for a classifier of this project (`--init-from`), and experiments with pretraining.",
        ["It fills in masked spans of review-like text and does nothing else on its own.",
         "It is small (about {params} M parameters) and learned only from IMDB reviews."])

    def __init__(self, splits: dict, options: TaskOptions):
        self.texts = Texts.read(splits, options)  # the LM's documents
        self.corpus = self.texts.corpus()

    def prepare(self, tokenizer: BPETokenizer, model_overrides: dict, train_cfg: TrainConfig) -> TaskData:
        config = EncoderDecoderConfig(vocab_size=tokenizer.vocab_size + N_SENTINELS, pad_token_id=tokenizer.pad_id,
                                      bos_token_id=tokenizer.bos_id, eos_token_id=tokenizer.eos_id, **model_overrides)
        config = replace(config, max_tgt_len=max(config.max_tgt_len, max_target_length(config.max_src_len)))
        splits = {name: SpanSet.from_texts(texts, tokenizer, config.max_src_len)
                  for name, texts in self.texts.splits().items()}
        data = TaskData(config, tokenizer, train_cfg, splits,
                        {"train_chunks": len(splits["train"]), "train_tokens": sum(map(len, splits["train"].chunks)),
                         "val_chunks": len(splits["val"])})
        return replace(data, sampler=splits["train"].sampler(self._budget(data), train_cfg.seed))  # (seed, step)

    @staticmethod
    def _budget(data: TaskData) -> int:
        return data.train_cfg.max_tokens or data.train_cfg.batch_size * data.config.max_src_len

    def batch(self, data: TaskData, step: int, rank: int = 0, world_size: int = 1) -> dict:
        """Length-bucketed chunks (each once per epoch), corrupted afresh at every step."""
        rng = np.random.default_rng([data.train_cfg.seed, step, rank])
        return data.splits["train"].batch(data.sampler.batch(step, rank, world_size), rng)

    tokens = staticmethod(pair_tokens)

    def rows(self, data: TaskData, split: str) -> int:
        return len(data.splits[split])  # chunks

    def evaluate(self, model: EncoderDecoder, data: TaskData, split: str = "val", limit: int | None = None,
                 progress=None) -> dict:
        return evaluate_spans(model, data.splits[split], self._budget(data), data.train_cfg.seed, limit, progress)
