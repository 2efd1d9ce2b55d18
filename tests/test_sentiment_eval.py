"""Honest sentiment figures: the selection/report split, the short-text check, bootstrap intervals,
length-bucketed classification and the baseline on the same rows."""

import random

import numpy as np
import pandas as pd
import pytest
import torch

from benchmarks.bootstrap import accuracy_with_interval, bootstrap_interval
from benchmarks.sentiment_baseline import imdb_split
from classifier import ClassifierConfig, Reader
from model import EncoderDecoder, EncoderDecoderConfig
from tokenization import BPETokenizer, sentences
from training import evaluate
from training.data import PairSet, validation_rows
from training.evaluate import classify
from training.heldout import held_out_rows, selection_report_split, short_texts

WORDS = "good bad film plot acting great awful boring loved hated the a was it and".split()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """3,000 made-up reviews of one to four sentences: enough for the 2,500 held-out rows."""
    rng = random.Random(0)
    sentence = lambda: " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9))).capitalize() + "."
    rows = [{"text": " ".join(sentence() for _ in range(rng.randint(1, 4))), "label": i % 2, "id": i}
            for i in range(3000)]
    path = tmp_path_factory.mktemp("imdb")
    pd.DataFrame(rows).to_parquet(path / "train.parquet")
    return path


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, data_dir):
    """An untrained tiny classifier: the tests compare ways of scoring, not its accuracy."""
    texts = pd.read_parquet(data_dir / "train.parquet")["text"].tolist()
    tokenizer = BPETokenizer.train(texts[:500], vocab_size=300)
    torch.manual_seed(0)
    model = EncoderDecoder(EncoderDecoderConfig(vocab_size=tokenizer.vocab_size, n_encoder_layer=1, n_decoder_layer=1,
                                                n_head=2, d_model=32, d_ff=64, max_src_len=64, max_tgt_len=8,
                                                dropout=0.0))
    path = tmp_path_factory.mktemp("ckpt")
    model.save_pretrained(path)
    ClassifierConfig(labels=["negative", "positive"]).save_pretrained(path)
    tokenizer.save(path)
    return path


def test_selection_and_report_split_the_held_out_rows_disjointly_by_the_seed(data_dir):
    ids = lambda part, seed=1337: list(held_out_rows(str(data_dir), 2500, seed, part)["id"])
    selection, report = ids("selection"), ids("report")
    assert (len(selection), len(report)) == (1000, 1500)
    assert not set(selection) & set(report)
    assert selection + report == list(validation_rows(str(data_dir), 2500, 1337)["id"])  # all of them, in order
    assert ids("report") == report and ids("report", seed=7) != report  # fixed by the seed
    _, _, baseline_rows, _ = imdb_split(str(data_dir), 2500, 1337, "report")
    assert baseline_rows == list(held_out_rows(str(data_dir), 2500, 1337, "report")["text"])  # the same rows
    assert [len(part) for part in selection_report_split(np.arange(40))] == [16, 24]
    with pytest.raises(ValueError, match="cannot split"):
        selection_report_split(np.arange(1))


def test_sentences_and_short_texts_by_hand():
    review = 'What a film! I "loved" every minute of it. Ok.\nThe acting was superb... Worth it? Yes, worth seeing it.'
    assert sentences(review) == ['I "loved" every minute of it.', "The acting was superb...",
                                 "Yes, worth seeing it."]
    rows = short_texts([review, "Too short.", "Only one sentence here, friends."], [1, 0, 0])
    assert [(r.text, r.label, r.review, r.position) for r in rows] == [
        ('I "loved" every minute of it.', 1, 0, "first"), ("Yes, worth seeing it.", 1, 0, "last"),
        ("Only one sentence here, friends.", 0, 2, "first")]


def test_bootstrap_interval_matches_the_normal_approximation():
    correct = np.array([1] * 900 + [0] * 100)
    low, high = bootstrap_interval(correct)
    half = 1.96 * np.sqrt(0.9 * 0.1 / 1000)  # 0.0186
    assert low == pytest.approx(0.9 - half, abs=0.003) and high == pytest.approx(0.9 + half, abs=0.003)
    assert bootstrap_interval(correct) == (low, high)  # fixed seed
    assert bootstrap_interval(np.ones(50)) == (1.0, 1.0)
    figure = accuracy_with_interval(correct)
    assert figure["accuracy"] == 0.9 and figure["examples"] == 1000 and figure["ci95"] == [low, high]


def test_bucketed_classification_gives_each_review_its_own_score(checkpoint, data_dir):
    reader = Reader.from_pretrained(checkpoint)
    model, tokenizer = reader.model, reader.tokenizer
    texts = pd.read_parquet(data_dir / "train.parquet")["text"].tolist()[:40]
    pairs = PairSet.from_texts(texts, ["positive"] * 40, tokenizer, model.config)
    scores = classify(reader, pairs, max_tokens=64)  # a budget of one longest review: many batches
    candidates = [tokenizer.encode(w) for w in reader.labels]
    alone = torch.cat([model.candidate_scores(model.encode(torch.tensor([s]))[0], candidates)[0]
                       for s in pairs.sources])
    torch.testing.assert_close(scores, alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(classify(reader, pairs, max_tokens=64, limit=7), alone[:7], atol=1e-5,
                               rtol=1e-5)


def test_evaluate_cli_scores_the_report_rows_and_their_short_texts(checkpoint, data_dir):
    reader = Reader.from_pretrained(checkpoint)
    model, tokenizer = reader.model, reader.tokenizer
    rows = held_out_rows(str(data_dir), 2500, 1337, "report")
    for short in (False, True):
        texts, labels = rows["text"], rows["label"]
        if short:
            found = short_texts(texts, labels)
            texts, labels = [r.text for r in found], [r.label for r in found]
        result = evaluate.main(["--checkpoint", str(checkpoint), "--data-dir", str(data_dir), "--split", "report",
                                "--max-tokens", "512", *["--short-text"] * short])
        pairs = PairSet.from_texts(texts, ["negative"] * len(texts), tokenizer, model.config)
        predicted = classify(reader, pairs, 4096).argmax(-1)
        assert result["examples"] == len(texts) > 1500 * short
        assert result["accuracy"] == pytest.approx((predicted == torch.tensor(labels)).float().mean().item())
        assert sum(map(sum, result["confusion"])) == len(texts)
