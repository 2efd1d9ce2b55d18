"""`benchmarks.ensemble`: each classifier's calibrated probabilities on the held-out rows, and
every combination's mean, checked against the per-row probabilities it writes."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from benchmarks import calibration, ensemble
from benchmarks.common import read_classifier
from benchmarks.sentiment_baseline import imdb_split
from classifier import ClassifierConfig
from model import EncoderDecoder, EncoderDecoderConfig
from tokenization import BPETokenizer, clean_texts
from training.calibration import expected_calibration_error
from training.heldout import short_texts
from training.linear_evidence import fit_linear

IMDB = Path(__file__).resolve().parents[2] / "shared" / "data" / "imdb"
pytestmark = pytest.mark.needs_imdb


def test_combinations_are_each_model_then_every_group():
    assert ensemble.combinations(["a", "b", "c"]) == [
        ("a",), ("b",), ("c",), ("a", "b"), ("a", "c"), ("b", "c"), ("a", "b", "c")]


@pytest.fixture(scope="module")
def readers(tmp_path_factory) -> tuple[Path, list[str]]:
    """120 IMDB reviews (a data folder), and two tiny untrained readers of them: a forward one at
    temperature 1 and a backward one at 0.5 (its pair temperature 0.8)."""
    tmp_path = tmp_path_factory.mktemp("readers")
    data = tmp_path / "data"
    data.mkdir()
    pd.read_parquet(IMDB / "train.parquet").sample(120, random_state=5).to_parquet(data / "train.parquet")
    tok = BPETokenizer.train(clean_texts(pd.read_parquet(data / "train.parquet")["text"]), vocab_size=500)
    folders = []
    for seed, reverse, temperature in ((0, False, 1.0), (1, True, 0.5)):
        torch.manual_seed(seed)
        config = EncoderDecoderConfig(vocab_size=tok.vocab_size, n_head=2, d_model=32, d_ff=64, n_encoder_layer=1,
                                      n_decoder_layer=1, max_src_len=64, max_tgt_len=4, causal_encoder=True,
                                      reverse=reverse)
        folder = tmp_path / f"m{seed}"
        EncoderDecoder(config).save_pretrained(folder)
        ClassifierConfig(labels=["negative", "positive"], temperature=temperature,
                         pair_temperature=0.8).save_pretrained(folder)
        tok.save(folder / "tokenizer.json")
        folders.append(str(folder))
    return data, folders


def test_each_model_and_their_mean_on_the_selection_rows(readers, capsys):
    data, folders = readers
    result = ensemble.main(["--checkpoint", folders[0], "--also", folders[1], "--data-dir", str(data),
                            "--val-size", "30", "--rows", "--baseline", "--no-json"])
    assert result["examples"]["full_reviews"] == 12  # the selection 40% of 30
    assert [row["models"] for row in result["table"]] == [[folders[0]], [folders[1]], folders, ["TF-IDF + LR"]]
    printed = capsys.readouterr().out.splitlines()  # each path once, whole, then the groups by number
    printed = printed[[line.startswith("[1] ") for line in printed].index(True) :]
    assert printed[:2] == [f"[1] {folders[0]}", f"[2] {folders[1]}"]
    assert [line.split("  ")[0] for line in printed[3:7]] == ["1", "2", "1 + 2", "TF-IDF + LR"]
    train_texts, train_labels, texts, labels = imdb_split(str(data), 30, 1337, "selection")
    short = short_texts(texts, labels)
    baseline = fit_linear(train_texts, train_labels)
    for check, rows in (("full_reviews", texts), ("short_text", [r.text for r in short])):
        truth = np.array(result["labels"][check])
        p = [np.array(result["p_positive"][f][check]) for f in folders]
        assert len(p[0]) == len(truth) == result["examples"][check] and list(truth) == (
            labels if check == "full_reviews" else [r.label for r in short])
        correct = [(q > 0.5) == truth for q in (p[0], p[1], (p[0] + p[1]) / 2, baseline.predict_proba(rows)[:, 1])]
        assert [row[check]["accuracy"] for row in result["table"]] == pytest.approx([c.mean() for c in correct])
        if check == "short_text":  # each review's first sentence, then (if it has two) its last
            first = np.array([r.position == "first" for r in short])
            assert first.sum() == 12 and 0 < (~first).sum() <= 12  # every review has a first sentence
            for row, c in zip(result["table"], correct, strict=True):
                assert row[check]["by_position"]["first"]["accuracy"] == pytest.approx(c[first].mean())
                assert row[check]["by_position"]["last"]["accuracy"] == pytest.approx(c[~first].mean())


@pytest.mark.parametrize("name", ["sentiment_report", "behaviour", "calibration", "ensemble"])
def test_the_benchmarks_of_the_verdict_take_more_readers(name, tmp_path):
    import importlib

    module = importlib.import_module(f"benchmarks.{name}")
    a, b = str(tmp_path / "a"), str(tmp_path / "b")  # folders that are there: the option checks it
    Path(a).mkdir(), Path(b).mkdir()
    args = module.arguments().parse_args(["--also", a, b])
    assert args.checkpoint == "checkpoints/sentiment" and args.also == [a, b]
    assert module.arguments().parse_args([]).also == []


def test_calibration_measures_the_fitted_temperature_on_the_report_rows_short_texts(readers):
    """`benchmarks.calibration` fits the pair's temperature on the selection rows' full reviews and
    measures it on the report rows' first and last sentences too: checked against the verdict
    computed here from each reader's calibrated probabilities (`read_classifier`)."""
    data, folders = readers
    result = calibration.main(["--checkpoint", folders[0], "--also", folders[1], "--data-dir", str(data),
                               "--val-size", "30", "--no-json"])
    _, _, texts, labels = imdb_split(str(data), 30, 1337, "report")
    short = short_texts(texts, labels)
    truth = np.array([r.label for r in short])
    log_p = [read_classifier([f]).readers[0].read_texts([r.text for r in short]).double().numpy() for f in folders]
    mean = (log_p[0] + log_p[1]) / 2
    figures = result["short_text"]
    assert figures["measured_on"] == f"the report rows' first and last sentences ({len(short)})"
    for name, t in (("before", 1.0), ("after", result["temperature"])):
        z = mean / t
        p = np.exp(z - np.logaddexp.reduce(z, axis=1, keepdims=True))
        right = p.argmax(1) == truth
        got = figures[name]
        assert got["temperature"] == t and got["accuracy"] == pytest.approx(right.mean())
        assert got["mean_confidence"] == pytest.approx(p.max(1).mean(), abs=1e-5)
        assert got["wrong_and_sure"] == pytest.approx(((p.max(1) >= 0.9) & ~right).mean())
        assert got["ece"] == pytest.approx(expected_calibration_error(torch.tensor(p), torch.tensor(truth)), abs=1e-5)
    assert result["after"]["accuracy"] == pytest.approx(result["accuracy"])  # the full reviews', as before
