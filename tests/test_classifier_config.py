"""A classifier's own settings (`classifier.ClassifierConfig`, classifier.json) beside the architecture
(config.json): round trips, their checks, and a checkpoint written before the split (those fields
in config.json) loading the same, with no warning, until `split_folder` rewrites it."""

import hashlib
import json
import shutil
import warnings
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from classifier import ClassifierConfig, Reader, Reading
from classifier.config import split_folder
from model import EncoderDecoder, EncoderDecoderConfig, load_pretrained
from storage import CLASSIFIER_NAME, CONFIG_NAME, WEIGHTS_NAME
from tokenization import BPETokenizer, cut_source

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ["sentiment", "sentiment-backward"]
MOVED = set(EncoderDecoderConfig.moved_to_classifier)
SETTINGS = ClassifierConfig(labels=["negative", "positive"], src_keep_tail=4, temperature=0.8, pair_temperature=1.3)


def tiny(folder: Path) -> EncoderDecoder:
    """A tiny classifier saved in `folder` in the new layout, with the shipped tokenizer."""
    torch.manual_seed(0)
    model = EncoderDecoder(EncoderDecoderConfig(vocab_size=8192, max_src_len=16, max_tgt_len=4, n_encoder_layer=1,
                                                n_decoder_layer=1, n_head=2, d_model=16, d_ff=32,
                                                dropout=0.0)).eval()
    model.save_pretrained(folder)
    SETTINGS.save_pretrained(folder)
    shutil.copy(ROOT / "checkpoints" / "tokenizer.json", folder / "tokenizer.json")
    return model


def to_old_layout(folder: Path) -> None:
    """The folder as a run before the split wrote it: the classifier's fields inside config.json."""
    raw = json.loads((folder / CONFIG_NAME).read_text())
    settings = json.loads((folder / CLASSIFIER_NAME).read_text())
    (folder / CONFIG_NAME).write_text(json.dumps({**raw, **settings}))
    (folder / CLASSIFIER_NAME).unlink()


def test_classifier_json_round_trips_and_config_json_holds_the_architecture_only(tmp_path):
    model = tiny(tmp_path)
    assert json.loads((tmp_path / CLASSIFIER_NAME).read_text()) == asdict(SETTINGS)
    assert not set(json.loads((tmp_path / CONFIG_NAME).read_text())) & MOVED
    assert not {f for f in vars(model.config)} & MOVED  # no run policy in the architecture's dataclass
    assert ClassifierConfig.from_pretrained(tmp_path) == SETTINGS
    reader = Reader.from_pretrained(tmp_path)
    assert reader.classifier_config == SETTINGS and reader.labels == SETTINGS.labels and reader.temperature == 0.8
    assert (reader.reading.max_src_len, reader.reading.src_keep_tail) == (16, 4)  # each from its owner


@pytest.mark.parametrize("changes, message", [
    ({"labels": ["negative", 1]}, r"labels must be a list of str, got \['negative', 1\]"),
    ({"labels": ["yes", "yes"]}, "labels must be two or more distinct non-empty words"),
    ({"labels": ["yes"]}, "labels must be two or more distinct non-empty words"),
    ({"src_keep_tail": -1}, "src_keep_tail must be >= 0, got -1"),
    ({"temperature": 0.0}, "temperature must be between 0.01 and 100.0, got 0.0"),
    ({"pair_temperature": float("nan")}, "pair_temperature must be a finite float, got nan"),
    ({"bias": 1}, r"unknown fields \['bias'\]"),
])
def test_classifier_json_is_checked_naming_the_file(tmp_path, changes, message):
    tiny(tmp_path)
    (tmp_path / CLASSIFIER_NAME).write_text(json.dumps({**asdict(SETTINGS), **changes}))
    with pytest.raises(ValueError, match=rf"classifier\.json.*{message}"):
        ClassifierConfig.from_pretrained(tmp_path)


def test_the_cut_must_fit_the_encoders_window(tmp_path):
    tiny(tmp_path)
    (tmp_path / CLASSIFIER_NAME).write_text(json.dumps({**asdict(SETTINGS), "src_keep_tail": 17}))
    with pytest.raises(ValueError, match=r"src_keep_tail \(17\) must be at most max_src_len \(16\)"):
        Reader.from_pretrained(tmp_path)


def test_reading_gives_the_cut_of_both_owners():
    arch = EncoderDecoderConfig(vocab_size=300, max_src_len=8)
    assert cut_source(list(range(20)), Reading(arch, SETTINGS)) == [0, 1, 2, 16, 17, 18, 19]  # 3 + the last 4
    assert cut_source(list(range(20)), Reading(arch)) == list(range(7))  # no classifier: the head alone
    assert Reading(arch).labels is None


def test_an_old_layout_loads_as_the_new_one_without_a_warning(tmp_path):
    """One path: the model ignores the moved fields, the classifier reads them from config.json."""
    new, old = tmp_path / "new", tmp_path / "old"
    model = tiny(new)
    shutil.copytree(new, old)
    to_old_layout(old)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say: the old file is read as it is
        loaded = load_pretrained(old)
        reader, reference = Reader.from_pretrained(old), Reader.from_pretrained(new)
    assert loaded.config == model.config and reader.classifier_config == SETTINGS
    texts = ["A wonderful film.", "Dull, long and badly acted: " * 5]
    torch.testing.assert_close(reader.read_texts(texts), reference.read_texts(texts), rtol=0, atol=0)


def test_split_folder_rewrites_the_configs_and_never_the_weights(tmp_path):
    tiny(tmp_path)
    to_old_layout(tmp_path)
    weights = hashlib.sha256((tmp_path / WEIGHTS_NAME).read_bytes()).hexdigest()
    before = Reader.from_pretrained(tmp_path).read_texts(["Not good at all."])
    assert split_folder(tmp_path) and not split_folder(tmp_path)  # done once; the second finds nothing to move
    assert not set(json.loads((tmp_path / CONFIG_NAME).read_text())) & MOVED
    assert ClassifierConfig.from_pretrained(tmp_path) == SETTINGS
    assert hashlib.sha256((tmp_path / WEIGHTS_NAME).read_bytes()).hexdigest() == weights
    torch.testing.assert_close(Reader.from_pretrained(tmp_path).read_texts(["Not good at all."]), before)


def test_a_model_that_is_no_classifier_has_no_classifier_config(tmp_path):
    """A span or seq2seq model written before the split held `labels: null` and default temperatures."""
    model = tiny(tmp_path)
    (tmp_path / CLASSIFIER_NAME).unlink()
    raw = json.loads((tmp_path / CONFIG_NAME).read_text())
    (tmp_path / CONFIG_NAME).write_text(json.dumps({**raw, "labels": None, "src_keep_tail": 0, "temperature": 1.0}))
    assert ClassifierConfig.from_pretrained(tmp_path) is None and load_pretrained(tmp_path).config == model.config
    with pytest.raises(ValueError, match="not a classifier"):
        Reader.from_pretrained(tmp_path)


@pytest.mark.parametrize("name", SHIPPED)
def test_the_shipped_classifiers_are_in_the_new_layout(name):
    folder = ROOT / "checkpoints" / name
    if not (folder / WEIGHTS_NAME).is_file():
        pytest.skip(f"no shipped {name} checkpoint")
    assert not set(json.loads((folder / CONFIG_NAME).read_text())) & MOVED
    settings = ClassifierConfig.from_pretrained(folder)
    assert settings is not None and settings.labels == ["negative", "positive"] and settings.src_keep_tail == 384
    assert isinstance(BPETokenizer.from_file(folder), BPETokenizer)
