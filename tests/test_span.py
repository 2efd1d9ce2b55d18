"""T5-style span corruption: coverage, sentinels, exact reconstruction, batches and initialisation."""

import math
import random

import numpy as np
import pandas as pd
import pytest
import torch

from model import DecoderOnlyConfig, DecoderOnlyLM, EncoderDecoder, EncoderDecoderConfig
from tokenization import BPETokenizer
from training import run
from training.span import (
    N_SENTINELS,
    SpanSet,
    corrupt,
    max_target_length,
    noise_mask,
    restore,
    span_counts,
)
from training.transfer import init_from, shape_from

BASE = 1000  # sentinel ids start here: above every token id below


def runs(mask: np.ndarray) -> list[int]:
    """Lengths of the runs of True."""
    padded = np.concatenate([[False], mask, [False]]).astype(int)
    starts, ends = np.flatnonzero(np.diff(padded) == 1), np.flatnonzero(np.diff(padded) == -1)
    return (ends - starts).tolist()


@pytest.mark.parametrize("length", [2, 7, 20, 100, 1023])
def test_spans_cover_the_requested_fraction(length):
    rng = np.random.default_rng(0)
    n_noise, n_spans = span_counts(length)
    assert n_noise == min(max(round(0.15 * length), 1), length - 1)
    for _ in range(20):
        mask = noise_mask(length, rng)
        assert mask.shape == (length,) and mask.sum() == n_noise and len(runs(mask)) == n_spans
        assert not mask[0]  # a kept run comes first


def test_mean_span_length_is_three():
    rng = np.random.default_rng(1)
    lengths = [n for _ in range(200) for n in runs(noise_mask(500, rng))]
    assert np.mean(lengths) == pytest.approx(75 / 25)  # 75 noise tokens in 25 spans, every time
    assert max(lengths) > 3 and min(lengths) == 1  # the lengths vary


def test_sentinels_are_unique_per_span_and_source_plus_target_restore_the_original():
    rng = np.random.default_rng(2)
    for length in (2, 3, 17, 300, 1023):
        ids = rng.integers(4, BASE, length).tolist()
        source, target = corrupt(ids, BASE, rng)
        sentinels = [t for t in source if t >= BASE]
        assert sentinels == list(range(BASE, BASE + span_counts(length)[1]))  # one per span, in order
        assert [t for t in target if t >= BASE] == sentinels
        assert target[0] == BASE and len(source) + len(target) == length + 2 * len(sentinels)
        assert restore(source, target, BASE) == ids


def test_corrupt_by_hand():
    class Fixed:  # 3 noise tokens in 2 spans cut after the 1st; 5 kept tokens in 2 runs cut after the 2nd
        @staticmethod
        def choice(n, k, replace):
            return {(2, 1): np.array([0]), (4, 1): np.array([1])}[(n, k)]

    source, target = corrupt([10, 11, 12, 13, 14, 15, 16, 17], BASE, Fixed, density=3 / 8, mean_span=1.5)
    # noise runs [1, 2], kept runs [2, 3]: kept 10 11 | noise 12 | kept 13 14 15 | noise 16 17
    assert source == [10, 11, BASE, 13, 14, 15, BASE + 1]
    assert target == [BASE, 12, BASE + 1, 16, 17]


def test_span_batches_fit_the_model_and_are_a_function_of_the_generator():
    chunks = [list(range(4, 4 + n)) for n in (5, 63, 30)]
    spans = SpanSet(chunks, sentinel_base=BASE, pad_id=0, bos_id=1, eos_id=2)
    a = spans.batch([0, 1, 2], np.random.default_rng(5))
    b = spans.batch([0, 1, 2], np.random.default_rng(5))
    assert all(torch.equal(a[k], b[k]) for k in a)
    row = a["src_ids"][1][a["src_mask"][1].bool()].tolist()
    assert row[-1] == 2 and len(row) == 63 - span_counts(63)[0] + span_counts(63)[1] + 1
    target = a["targets"][1][a["targets"][1] != -100].tolist()
    assert target[-1] == 2 and a["tgt_ids"][1, 0] == 1 and a["tgt_ids"][1, 1:len(target)].tolist() == target[:-1]
    assert restore(row[:-1], target[:-1], BASE) == chunks[1]
    assert a["tgt_ids"].shape[1] <= max_target_length(64)  # what the span model's positions must cover


def tiny_ed(vocab: int, **kw) -> EncoderDecoder:
    return EncoderDecoder(EncoderDecoderConfig(vocab_size=vocab, n_encoder_layer=2, n_decoder_layer=1, n_head=2,
                                               d_model=16, d_ff=32, max_src_len=32, norm_first=True, **kw))


def test_init_from_a_span_model_takes_everything_and_the_first_embedding_rows():
    torch.manual_seed(0)
    span_model, classifier = tiny_ed(50 + N_SENTINELS), tiny_ed(50)
    init_from(classifier, span_model)
    theirs = span_model.state_dict()
    for name, value in classifier.state_dict().items():
        expected = theirs[name][:50] if name == "embed.lut.weight" else theirs[name]
        assert torch.equal(value, expected), name
    with pytest.raises(ValueError, match="n_decoder_layer"):
        init_from(classifier, EncoderDecoder(EncoderDecoderConfig(
            vocab_size=150, n_encoder_layer=2, n_decoder_layer=2, n_head=2, d_model=16, d_ff=32, max_src_len=32,
            norm_first=True)))


def test_init_from_the_lm_fills_the_first_rows_of_a_larger_vocabulary():
    torch.manual_seed(0)
    lm = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=50, n_layer=2, n_head=2, d_model=16, d_ff=32, block_size=32))
    span_model = tiny_ed(50 + N_SENTINELS)
    sentinel_rows = span_model.embed.lut.weight[50:].clone()
    assert shape_from(EncoderDecoder, lm, 50) == dict(d_model=16, n_head=2, d_ff=32, norm_first=True, n_encoder_layer=2,
                                                     reverse=False)
    assert shape_from(EncoderDecoder, lm, 51) is None  # another tokenizer's LM
    init_from(span_model, lm)
    assert torch.equal(span_model.embed.lut.weight[:50], lm.embed.lut.weight)
    assert torch.equal(span_model.embed.lut.weight[50:], sentinel_rows)
    for mine, theirs in zip(span_model.encoder.layers, lm.decoder.layers, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(mine.state_dict().values(), theirs.state_dict().values(),
                                                     strict=True))


def test_span_pretraining_then_fine_tuning_learns_a_separable_toy_task(tmp_path):
    """Reviews made of filler words plus one class's words: span pretraining (whole model, vocabulary
    grown by the sentinels) lowers its loss, and a classifier started from it separates the classes."""
    rng = random.Random(0)
    filler, good, bad = "the a film plot it was and of".split(), "great superb loved wonderful".split(), \
        "awful boring hated terrible".split()
    review = lambda label: " ".join(rng.choice(filler + (good if label else bad)) for _ in range(rng.randint(8, 30)))
    data = tmp_path / "data"
    data.mkdir()
    pd.DataFrame([{"text": review(i % 2), "label": i % 2} for i in range(400)]).to_parquet(data / "train.parquet")
    pd.DataFrame([{"text": review(i % 2), "label": -1} for i in range(400)]).to_parquet(data / "unsupervised.parquet")
    tokenizer = tmp_path / "tokenizer.json"
    common = ["--preset", "tiny", "--data-dir", str(data), "--tokenizer", str(tokenizer), "--vocab-size", "300",
              "--val-size", "100"]
    span = run.main(["--task", "span", "--out", str(tmp_path / "span"), *common, "--max-steps", "80",
                     "--eval-every", "20", "--lr", "3e-3"])
    vocab = span["model_config"]["vocab_size"]
    assert vocab == BPETokenizer.from_file(tokenizer).vocab_size + N_SENTINELS
    losses = [point["val_loss"] for point in span["history"]]
    assert losses == sorted(losses, reverse=True) and losses[-1] < 0.5 * math.log(vocab)  # ln V: a uniform guess
    sentiment = run.main(["--task", "sentiment", "--out", str(tmp_path / "sentiment"), *common, "--max-steps", "300",
                          "--eval-every", "100", "--init-from", str(tmp_path / "span"), "--max-tokens", "512"])
    assert sentiment["model_config"]["vocab_size"] == BPETokenizer.from_file(tokenizer).vocab_size
    assert sentiment["data"]["val_pairs"] == 40  # the selection rows of the 100 held out
    assert sentiment["val_accuracy"] >= 0.9
