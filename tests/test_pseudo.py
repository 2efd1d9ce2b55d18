"""Self-training's labels (`training.pseudo`): the verdict of several readers on the unlabeled
reviews, held-out texts never read, the file resuming; and its confident rows in training
(`--pseudo-labels`, `--pseudo-confidence`)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from datasets import Dataset

from classifier import ClassifierConfig, Reading
from demo.tiny import shared_tiny_checkpoints
from model import load_pretrained
from storage import STATE_NAME
from tokenization import BPETokenizer, label_candidates, source_ids
from training import pseudo, run
from training.data import validation_split
from training.recipe import Recipe
from training.tasks import TASKS
from training.trainer import STOPS, Trainer
from training.training_args import TrainConfig

VAL_SIZE, SEED = 10, 3
UNLABELED = [f"Unlabeled {i}: {'a good film with a fine cast' if i % 2 else 'a dull film, badly cast'}. I {i}."
             for i in range(7)]


@pytest.fixture(scope="module")
def teachers(tmp_path_factory) -> list[Path]:
    """The tiny classifier and a copy of it at other temperatures: two readers whose calibrated
    probabilities differ, and a pair temperature that is not 1."""
    first = shared_tiny_checkpoints() / "sentiment"
    second = tmp_path_factory.mktemp("teachers") / "second"
    shutil.copytree(first, second)
    config = json.loads((second / "classifier.json").read_text())
    config.update(temperature=0.3, pair_temperature=0.5)
    (second / "classifier.json").write_text(json.dumps(config))
    return [first, second]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """30 training reviews (10 held out, seed 3) and 8 unlabeled ones, the last repeating a held-out
    review's text, as IMDB does."""
    folder = tmp_path_factory.mktemp("imdb")
    texts = [f"Review {i} was a good film. I liked it a lot!" for i in range(30)]
    _, held_out = validation_split(30, VAL_SIZE, SEED)
    for i in held_out:
        texts[i] = f"HELDOUT {i} was a fine film."
    pd.DataFrame({"text": texts, "label": [i % 2 for i in range(30)]}).to_parquet(folder / "train.parquet")
    unlabeled = [*UNLABELED, texts[held_out[2]]]
    pd.DataFrame({"text": unlabeled, "label": [-1] * 8}).to_parquet(folder / "unsupervised.parquet")
    return folder


def build(teachers: list[Path], data: Path, out: Path, *extra: str) -> list[dict]:
    pseudo.main(["--teacher", *map(str, teachers), "--data-dir", str(data), "--out", str(out), "--val-size",
                 str(VAL_SIZE), "--seed", str(SEED), "--precision", "fp32", *extra])
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def calibrated_log_probs(teacher: Path, text: str) -> np.ndarray:
    """One reader's log P(label) of one text, computed here: its label scores at its temperature."""
    model, tokenizer = load_pretrained(teacher).eval(), BPETokenizer.from_file(teacher)
    reading = Reading(model.config, ClassifierConfig.from_pretrained(teacher))
    ids = torch.tensor(source_ids([text], tokenizer, reading))
    with torch.no_grad():
        mask = torch.ones_like(ids)
        scores = model.candidate_scores(model.encode(ids, mask)[0], label_candidates(tokenizer, reading), mask)[0][0]
    z = scores.double().numpy() / reading.classifier.temperature
    return z - np.logaddexp.reduce(z)


def test_each_unlabeled_review_gets_the_readers_averaged_verdict_and_held_out_texts_none(teachers, data_dir, tmp_path):
    header, *lines = build(teachers, data_dir, tmp_path / "pair.jsonl")
    assert header["teacher"] == [str(t) for t in teachers] and header["split_rows"] == 8
    assert (header["val_size"], header["seed"]) == (VAL_SIZE, SEED) and len(header["teacher_sha"]) == 2
    assert [line["review"] for line in lines] == list(range(7))  # not row 7: a held-out review's text
    for line, text in zip(lines, UNLABELED, strict=True):
        mean = (calibrated_log_probs(teachers[0], text) + calibrated_log_probs(teachers[1], text)) / 2
        verdict = np.exp(mean / 0.5 - np.logaddexp.reduce(mean / 0.5))  # the second reader's pair temperature
        assert line["label"] == int(verdict.argmax()) and line["p"] == pytest.approx(verdict.max(), abs=1e-4)
    one = build(teachers[:1], data_dir, tmp_path / "one.jsonl")[1:]  # one reader: its own calibrated verdict
    assert [r["p"] for r in one] == pytest.approx([np.exp(calibrated_log_probs(teachers[0], t)).max()
                                                   for t in UNLABELED], abs=1e-4)
    assert len({r["p"] for r in lines}) > 1 and {r["label"] for r in lines} <= {0, 1}
    found = pseudo.main(["--out", str(tmp_path / "pair.jsonl"), "--summary"])  # what the file holds
    sure = [r for r in lines if r["p"] >= 0.9]
    assert found["reviews"] == 7 and found["of"] == 8 and found["teacher"] == header["teacher"]
    assert found["verdicts"] == {str(y): sum(r["label"] == y for r in lines) for y in {r["label"] for r in lines}}
    counts = [sum(r["label"] == y for r in sure) for y in (0, 1)]
    assert sum(found["confident"]["0.9"]["by_label"].values()) == len(sure)
    assert found["confident"]["0.9"]["training_rows"] == 2 * min(counts)


def test_the_file_resumes_and_refuses_other_teachers(teachers, data_dir, tmp_path, capsys):
    out = tmp_path / "pair.jsonl"
    first = build(teachers, data_dir, out, "--limit", "3")
    assert [r["review"] for r in first[1:]] == [0, 1, 2]
    before = out.read_bytes()
    build(teachers, data_dir, out, "--limit", "3")  # the same call again: nothing to do
    assert out.read_bytes() == before
    with open(out, "a", encoding="utf-8") as f:
        f.write('{"review": 3, "la')  # a build killed while writing
    more = build(teachers, data_dir, out, "--start", "2", "--limit", "3")  # overlaps: continues after the torn line
    assert more[:4] == first and [r["review"] for r in more[1:]] == [0, 1, 2, 3, 4]
    with pytest.raises(SystemExit) as exc:
        build(teachers[:1], data_dir, out, "--limit", "1")
    assert exc.value.code == 2 and "teacher_sha" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        pseudo.main(["--out", str(tmp_path / "none.jsonl"), "--summary"])
    assert exc.value.code == 2 and "no labels file there yet" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        build([tmp_path], data_dir, tmp_path / "other.jsonl")
    assert exc.value.code == 2 and f"--teacher {tmp_path}: no model.safetensors there" in capsys.readouterr().err


def write_labels(path: Path, verdicts: list[tuple[int, int, float]], seed: int = SEED, rows: int = 8) -> str:
    header = {"format": pseudo.FORMAT, "val_size": VAL_SIZE, "seed": seed, "split_rows": rows}
    lines = [header] + [{"review": r, "label": y, "p": p} for r, y, p in verdicts]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def test_training_adds_the_confident_reviews_with_their_verdict(teachers, data_dir, tmp_path):
    labels = write_labels(tmp_path / "labels.jsonl", [(0, 1, 0.95), (1, 0, 0.6), (2, 1, 0.91), (4, 0, 0.99),
                                                      (5, 1, 0.97), (6, 0, 0.9)])
    splits = {name: pd.read_parquet(data_dir / f"{name}.parquet") for name in ("train", "unsupervised")}
    task = TASKS["sentiment"]({k: Dataset.from_pandas(v) for k, v in splits.items()},
                              run.TaskOptions(val_size=VAL_SIZE, seed=SEED))
    tokenizer = BPETokenizer.from_file(teachers[0])
    overrides = dict(n_encoder_layer=1, n_decoder_layer=1, n_head=2, d_model=16, d_ff=32, max_src_len=64, max_tgt_len=8)
    plain = task.prepare(tokenizer, overrides, TrainConfig(batch_size=8))
    data = task.prepare(tokenizer, overrides, TrainConfig(batch_size=8, recipe=Recipe(pseudo_labels=labels)))
    train = data.splits["train"]
    # 0.6 is below the default 0.9; of the three confident positives the two most confident, as there
    # are two confident negatives; in the file's order
    assert data.description["pseudo_rows"] == 4 and len(train) == 20 + 4
    assert train.sources[:20] == plain.splits["train"].sources
    kept = [UNLABELED[0], UNLABELED[4], UNLABELED[5], UNLABELED[6]]
    assert train.sources[20:] == source_ids(kept, tokenizer, Reading(data.config, data.classifier))
    assert train.labels[20:] == [1, 0, 1, 0] and data.splits["val"].sources == plain.splits["val"].sources
    strict = task.prepare(tokenizer, overrides, TrainConfig(batch_size=8, recipe=Recipe(pseudo_labels=labels,
                                                                                         pseudo_confidence=0.96)))
    assert strict.description["pseudo_rows"] == 2 and strict.splits["train"].labels[20:] == [0, 1]
    one_sided = write_labels(tmp_path / "positive.jsonl", [(0, 1, 0.95), (2, 1, 0.91)])
    none = task.prepare(tokenizer, overrides, TrainConfig(batch_size=8, recipe=Recipe(pseudo_labels=one_sided)))
    assert none.description["pseudo_rows"] == 0 and len(none.splits["train"]) == 20


def test_pseudo_labels_need_the_run_s_own_held_out_rows_and_data(teachers, data_dir, tmp_path, capsys):
    base = ["--task", "sentiment", "--preset", "tiny", "--data-dir", str(data_dir), "--val-size", str(VAL_SIZE),
            "--tokenizer", str(teachers[0].parent / "tokenizer.json"), "--max-steps", "2",
            "--out", str(tmp_path / "run")]
    labels = write_labels(tmp_path / "labels.jsonl", [(0, 1, 0.95), (3, 0, 0.92)])
    other = write_labels(tmp_path / "other.jsonl", [], rows=50)
    for extra, message in [(["--seed", "4", "--pseudo-labels", labels],
                            "holds out --val-size 10 --seed 3, this run 10 and 4"),
                           (["--seed", str(SEED), "--pseudo-labels", other],
                            "labels an unlabeled split of 50 reviews; this data has 8"),
                           (["--seed", str(SEED), "--pseudo-labels", labels, "--max-examples", "25"],
                            "does not combine with --max-examples"),
                           (["--seed", str(SEED), "--pseudo-labels", str(tmp_path / "none.jsonl")], "no such file"),
                           (["--seed", str(SEED), "--pseudo-labels", labels, "--pseudo-confidence", "0.3"],
                            "--pseudo-confidence must be in [0.5, 1]")]:
        with pytest.raises(SystemExit) as exc:
            run.main([*base, *extra, "--overwrite"])
        assert exc.value.code == 2 and message in capsys.readouterr().err
    result = run.main([*base, "--seed", str(SEED), "--pseudo-labels", labels, "--overwrite"])
    assert result["data"]["pseudo_rows"] == 2 and result["train_config"]["recipe"]["pseudo_labels"] == labels
    assert "'train_pairs': 20, 'val_pairs': 4, 'pseudo_rows': 2}" in capsys.readouterr().out  # the start says so


def test_a_run_resumes_only_on_the_same_pseudo_labelled_rows(teachers, data_dir, tmp_path, monkeypatch, capsys):
    """A labels file still being built may grow between a run's stretches: a resumed run would then
    batch other rows, so it is refused, and resumes exactly on the file it started with."""
    labels = tmp_path / "labels.jsonl"
    write_labels(labels, [(0, 1, 0.95), (3, 0, 0.92)])
    args = ["--task", "sentiment", "--preset", "tiny", "--data-dir", str(data_dir), "--val-size", str(VAL_SIZE),
            "--seed", str(SEED), "--tokenizer", str(teachers[0].parent / "tokenizer.json"), "--pseudo-labels",
            str(labels), "--max-steps", "6", "--eval-every", "3", "--out", str(tmp_path / "run")]
    with monkeypatch.context() as m:  # the first stretch runs out of time after 3 steps
        m.setattr(Trainer, "stop_reason", lambda self, received, now, step_seconds:
                  STOPS.index("max_minutes") if self.step >= 3 else 0)
        assert run.main(args)["steps"] == 3
    write_labels(labels, [(0, 1, 0.95), (3, 0, 0.92), (4, 1, 0.97), (5, 0, 0.99)])  # the build went on
    with pytest.raises(SystemExit) as exc:
        run.main([*args, "--resume"])
    assert exc.value.code == 2 and "22 training rows (now 24)" in capsys.readouterr().err
    write_labels(labels, [(0, 1, 0.95), (3, 0, 0.92)])
    run.main([*args, "--resume"])
    straight = run.main([*args[:-1], str(tmp_path / "straight")])
    a, b = (torch.load(tmp_path / d / STATE_NAME, weights_only=True) for d in ("run", "straight"))
    assert a["step"] == b["step"] == 6 and all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert straight["data"]["pseudo_rows"] == 2
