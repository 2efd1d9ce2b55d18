"""Retraining never destroys work: where a run writes (`--out`), what it refuses, its in-progress
marker, what --resume refuses, labels validated in every split, and a run killed with SIGKILL that
resumes to bit-identical weights."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import datasets
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from storage import CONFIG_NAME, IN_PROGRESS_NAME, METRICS_NAME, SNAPSHOTS_DIR, STATE_NAME, WEIGHTS_NAME, read_index
from tokenization import BPETokenizer
from training import run
from training.data import label_column, text_column
from training.errors import DataError
from training.tasks import SentimentTask, Seq2SeqTask, TaskOptions
from training.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
IMDB = ROOT.parent / "shared" / "data" / "imdb"


@pytest.fixture(scope="module")
def reviews(tmp_path_factory) -> tuple[Path, Path]:
    """(data folder with a 200-review train.parquet, tokenizer trained on it)."""
    if not (IMDB / "train.parquet").is_file():
        pytest.skip("local IMDB copy not found")
    folder = tmp_path_factory.mktemp("reviews")
    df = pd.read_parquet(IMDB / "train.parquet").sample(200, random_state=0)
    df.to_parquet(folder / "train.parquet")
    tokenizer = folder / "tokenizer.json"
    BPETokenizer.train(df["text"], vocab_size=400).save(tokenizer)
    return folder, tokenizer


def lm_args(reviews, *extra: str) -> list[str]:
    data, tokenizer = reviews
    return ["--task", "lm", "--preset", "tiny", "--data-dir", str(data), "--tokenizer", str(tokenizer),
            "--val-size", "20", "--max-steps", "4", "--eval-every", "2", *extra]


def refused(args: list[str], capsys) -> str:
    capsys.readouterr()  # what earlier runs printed
    with pytest.raises(SystemExit) as exc:
        run.main(args)
    assert exc.value.code == 2
    return capsys.readouterr().err


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --- --out ------------------------------------------------------------------------------------------
def test_default_out_is_a_fresh_folder_under_runs(tmp_path, reviews, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = run.main(lm_args(reviews))
    second = run.main(lm_args(reviews))  # most likely within the same second: still a folder of its own
    folders = sorted((tmp_path / "runs").iterdir())
    assert len(folders) == 2 and all(f.name.startswith("lm-20") for f in folders)
    for folder in folders:
        assert {METRICS_NAME, STATE_NAME, CONFIG_NAME, WEIGHTS_NAME} <= {p.name for p in folder.iterdir()}
        assert not (folder / IN_PROGRESS_NAME).exists()
    assert first["val_loss"] == second["val_loss"]  # same settings, same run, two folders
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # nothing in checkpoints/


def test_a_folder_holding_a_run_is_refused_unless_resumed_or_overwritten(tmp_path, reviews, capsys):
    out = tmp_path / "run"
    run.main(lm_args(reviews, "--out", str(out)))
    before = snapshot(out)
    err = refused(lm_args(reviews, "--out", str(out), "--max-steps", "2"), capsys)
    assert f"--out {out} already holds a run (trainer_state.pt, metrics.json, config.json, model.safetensors)" in err
    assert "--resume" in err and "--overwrite" in err and err.count("\n") == 1
    assert snapshot(out) == before  # not one byte touched

    crashed = tmp_path / "crashed"  # a run that died before its first checkpoint leaves only its marker
    crashed.mkdir()
    (crashed / IN_PROGRESS_NAME).write_text("{}")
    assert "already holds a run (RUN_IN_PROGRESS)" in refused(lm_args(reviews, "--out", str(crashed)), capsys)

    replaced = run.main(lm_args(reviews, "--out", str(out), "--max-steps", "2", "--overwrite"))
    assert replaced["steps"] == 2 and [h["step"] for h in replaced["history"]] == [2]  # a new run, not a resumed one
    assert torch.load(out / STATE_NAME, weights_only=True)["step"] == 2
    resumed = run.main(lm_args(reviews, "--out", str(out), "--resume"))
    assert [h["step"] for h in resumed["history"]] == [2, 4]


def test_the_in_progress_marker_lives_until_metrics_are_written(tmp_path, reviews, monkeypatch):
    out, seen = tmp_path / "run", []
    real_evaluate = Trainer.evaluate

    def evaluate(self):
        seen.append(((out / IN_PROGRESS_NAME).is_file(), (out / METRICS_NAME).exists()))
        real_evaluate(self)

    monkeypatch.setattr(Trainer, "evaluate", evaluate)
    args = lm_args(reviews, "--out", str(out))
    run.main(args)
    assert seen == [(True, False), (True, False)]  # at steps 2 and 4, while checkpoints were written
    assert (out / METRICS_NAME).is_file() and not (out / IN_PROGRESS_NAME).exists()


# --- --resume and --max-minutes ---------------------------------------------------------------------
def test_resume_refuses_a_changed_batch_size_seed_or_model_shape(tmp_path, reviews, capsys):
    out = tmp_path / "run"
    run.main(lm_args(reviews, "--out", str(out), "--max-steps", "2"))
    before = snapshot(out)
    for extra, message in [(["--batch-size", "4"], "--batch-size 8 (now 4)"),
                           (["--seed", "7"], "--seed 1337 (now 7)"),
                           (["--set", "n_head=4"], "n_head=2 (now 4)"),  # the same tensor shapes, another model
                           (["--set", "d_model=32"], "d_model=64 (now 32)")]:
        err = refused(lm_args(reviews, "--out", str(out), "--resume", *extra), capsys)
        assert f"--resume: {out} was trained with {message}. Resume with the same settings" in err, err
    assert snapshot(out) == before


def test_max_minutes_counts_this_invocation_so_resume_trains_on(tmp_path, reviews):
    args = lm_args(reviews, "--out", str(tmp_path / "run"), "--max-steps", "100000", "--eval-every", "100000",
                   "--max-minutes", "0.1")  # 6 s a call, start-up and final evaluation included
    first = run.main(args)
    second = run.main(args + ["--resume"])
    assert first["stopped_by"] == second["stopped_by"] == "max_minutes"
    assert 0 < first["steps"] < second["steps"] < 100000
    assert second["train_time_s"] > first["train_time_s"]  # the total still counts every invocation
    kept = [e["step"] for e in read_index(tmp_path / "run" / SNAPSHOTS_DIR)["snapshots"]]
    assert {first["steps"], second["steps"]} <= set(kept)  # where each invocation stopped: the view's frames


# --- labels -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("labels, message", [
    ([0, 1, -1, 1], "the test split, row 2 (0-based): label -1; expected 0 (negative), 1 (positive)"),
    ([0, 1, 2, 1], "row 2 (0-based): label 2; expected"),
    ([0.0, 1.0, 1.0, 0.0], "row 0 (0-based): label 0.0 (a float); expected 0 (negative), 1 (positive) "
                           "(and 3 more bad rows)"),
    ([0, None, 1, None], "the test split, row 1 (0-based): label missing; expected 0 (negative), 1 (positive) "
                         "(and 1 more bad rows)"),
    ([True, False, True, True], "row 0 (0-based): label True (a bool)"),
    (["1", "0", "1", "0"], "row 0 (0-based): label '1' (a str)"),
])
def test_bad_labels_are_named_by_split_and_row(labels, message):
    ds = datasets.Dataset.from_dict({"text": ["a review"] * 4, "label": labels})
    with pytest.raises(DataError) as exc:
        label_column(ds, "label", "test", ["negative", "positive"])
    assert str(exc.value) == message or message in str(exc.value)


def test_labels_of_every_split_are_read_and_checked():
    good = datasets.Dataset.from_dict({"text": [f"review {i}" for i in range(10)], "label": [0, 1] * 5})
    test = datasets.Dataset.from_dict({"text": ["bad", "good", "fine"], "label": [0, 1, 1]})
    task = SentimentTask({"train": good, "test": test}, TaskOptions(val_size=2))
    assert task.test_rows == (["bad", "good", "fine"], ["negative", "positive", "positive"])
    broken = datasets.Dataset.from_dict({"text": ["bad", "good", "?"], "label": [0, 1, -1]})
    with pytest.raises(DataError, match=r"the test split, row 2 \(0-based\): label -1"):
        SentimentTask({"train": good, "test": broken}, TaskOptions(val_size=2))  # was silently "positive"
    none_text = datasets.Dataset.from_dict({"text": ["bad", None, "fine"], "label": [0, 1, 1]})
    with pytest.raises(DataError, match=r"the test split, row 1 \(0-based\): no 'text' value"):
        SentimentTask({"train": good, "test": none_text}, TaskOptions(val_size=2))
    pairs = datasets.Dataset.from_dict({"source": ["a", "b", "c"], "target": ["x", None, None]})
    with pytest.raises(DataError, match=r"the train split, row 1 \(0-based\): no 'target' value \(and 1 more"):
        Seq2SeqTask({"train": pairs}, TaskOptions(val_size=1))


def test_text_column_keeps_the_rows_asked_for():
    ds = datasets.Dataset.from_dict({"text": ["a", "b", "c", "d"], "n": [1, 2, 3, 4]})
    assert text_column(ds, "text", "train", [3, 1]) == ["d", "b"]
    assert text_column(ds, "n", "train") == ["1", "2", "3", "4"]  # numbers are text too (seq2seq targets)


@pytest.mark.needs_imdb
def test_a_bad_test_label_stops_the_cli_before_training(tmp_path, reviews, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.parquet").write_bytes((reviews[0] / "train.parquet").read_bytes())
    pd.DataFrame({"text": ["fine", "awful", "odd"], "label": [1, 0, -1]}).to_parquet(data / "test.parquet")
    with pytest.raises(SystemExit) as exc:
        run.main(["--task", "sentiment", "--preset", "tiny", "--data-dir", str(data), "--tokenizer", str(reviews[1]),
                  "--val-size", "20", "--out", str(tmp_path / "out")])
    assert exc.value.code == 1
    assert capsys.readouterr().err == ("error: the test split, row 2 (0-based): label -1; "
                                       "expected 0 (negative), 1 (positive)\n")
    assert not (tmp_path / "out").exists()


# --- a real crash ----------------------------------------------------------------------------------
def test_a_run_killed_with_sigkill_resumes_to_bit_identical_weights(tmp_path, reviews):
    """The process dies at an arbitrary point after its first checkpoint (no exception, no cleanup),
    perhaps halfway through writing a file; --resume then ends exactly where a run that was never
    stopped ends."""
    args = lm_args(reviews, "--max-steps", "40", "--eval-every", "5", "--set", "dropout=0.2")  # dropout: RNG
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "training.run", *args, "--out", str(killed)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (killed / STATE_NAME).exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    _, stderr = proc.communicate()
    assert proc.returncode == -signal.SIGKILL, stderr.decode()[-2000:]  # killed, not finished
    assert (killed / IN_PROGRESS_NAME).exists() and not (killed / METRICS_NAME).exists()
    assert 5 <= torch.load(killed / STATE_NAME, weights_only=True)["step"] < 40

    run.main([*args, "--out", str(killed), "--resume"])  # in this process, also on one thread (conftest)
    straight = tmp_path / "straight"
    run.main([*args, "--out", str(straight)])

    a, b = (torch.load(d / STATE_NAME, weights_only=True) for d in (straight, killed))
    assert a["step"] == b["step"] == 40
    assert a["model"].keys() == b["model"].keys() and all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    wa, wb = load_file(straight / WEIGHTS_NAME), load_file(killed / WEIGHTS_NAME)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    ma, mb = (json.loads((d / METRICS_NAME).read_text()) for d in (straight, killed))
    assert [h["val_loss"] for h in ma["history"]] == [h["val_loss"] for h in mb["history"]]
    assert ma["val_loss"] == mb["val_loss"] and not (killed / IN_PROGRESS_NAME).exists()
    # the killed run and its --resume are one segment: its command alone reproduces the run
    assert mb["command"] == ma["command"].replace(str(straight), str(killed))


# --- Ctrl-C and SIGTERM ------------------------------------------------------------------------------
def _stop_mid_run(args: list[str], out: Path, sig: signal.Signals) -> subprocess.CompletedProcess:
    """Start a run, send `sig` once it has trained past its first checkpoint, and wait for it."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "training.run", *args, "--out", str(out)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / STATE_NAME).exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.3)  # a few steps past it
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_saves_the_current_step_and_resume_ends_bit_identical(tmp_path, reviews, sig):
    """Ctrl-C (or SIGTERM, as a scheduler sends) mid-run: the state of the step it stopped at is
    saved, one line says how to go on, no traceback; that command ends exactly where a run that was
    never stopped ends."""
    args = lm_args(reviews, "--max-steps", "400", "--eval-every", "25", "--set", "dropout=0.2")  # dropout: RNG
    stopped = tmp_path / "stopped"
    done = _stop_mid_run(args, stopped, sig)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr[-2000:]
    step = torch.load(stopped / STATE_NAME, weights_only=True)["step"]
    assert 25 <= step < 400 and not (stopped / METRICS_NAME).exists()
    resume = f"python -m training.run {' '.join(args)} --out {stopped} --resume"
    assert lines[-1] == f"interrupted: the state at step {step} is saved in {stopped}; continue with: {resume}"
    marker = json.loads((stopped / IN_PROGRESS_NAME).read_text())  # the folder holds no finished run ...
    assert marker["interrupted"]["step"] == step and marker["interrupted"]["resume"] == resume  # ... and says so

    run.main(resume.split()[3:])  # the printed command, in this process (also on one thread: conftest)
    straight = tmp_path / "straight"
    run.main([*args, "--out", str(straight)])
    a, b = (torch.load(d / STATE_NAME, weights_only=True) for d in (straight, stopped))
    assert a["step"] == b["step"] == 400
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    wa, wb = load_file(straight / WEIGHTS_NAME), load_file(stopped / WEIGHTS_NAME)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    ma, mb = (json.loads((d / METRICS_NAME).read_text()) for d in (straight, stopped))
    assert ma["history"] == [{**h, "time_s": ma["history"][i]["time_s"]} for i, h in enumerate(mb["history"])]
    assert ma["val_loss"] == mb["val_loss"] and not (stopped / IN_PROGRESS_NAME).exists()


def test_a_signal_before_the_first_step_saves_nothing_and_leaves_no_mark(tmp_path, reviews, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # as Ctrl-C while the data is read

    monkeypatch.setattr(run, "load_splits", interrupted)
    with pytest.raises(SystemExit) as exc:
        run.main(lm_args(reviews, "--out", str(tmp_path / "run")))
    assert exc.value.code == 130
    assert capsys.readouterr().err == "interrupted before the first step: nothing was saved\n"
    assert not (tmp_path / "run" / IN_PROGRESS_NAME).exists()
