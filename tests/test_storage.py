"""storage: the atomic writer and its permission rule, where a checkpoint comes from, a run folder's lifecycle."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import storage
from storage import atomic_write, atomic_write_text, resolve_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def plain_mode(tmp_path: Path) -> int:
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    return plain.stat().st_mode & 0o777


def test_atomic_write_text_writes_and_leaves_no_temp(tmp_path):
    target = tmp_path / "a.txt"
    atomic_write_text(target, "first")
    atomic_write_text(target, "second é")
    assert target.read_text(encoding="utf-8") == "second é"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_owner_only_writers_get_the_permissions_of_a_plain_open(tmp_path):
    """A writer that creates its file 0600 (safetensors, mkstemp) must not hide a shared checkpoint."""
    def private(tmp: Path) -> None:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"data")
        os.close(fd)

    atomic_write(tmp_path / "w.bin", private)
    assert (tmp_path / "w.bin").stat().st_mode & 0o777 == plain_mode(tmp_path)
    assert (tmp_path / "w.bin").read_bytes() == b"data"


def test_a_failed_write_keeps_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "keep.txt"
    atomic_write_text(target, "good")

    def crash(tmp: Path) -> None:
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError, match="killed mid-write"):
        atomic_write(target, crash)
    assert target.read_text() == "good"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_layout_names():
    assert (storage.CONFIG_NAME, storage.WEIGHTS_NAME, storage.TOKENIZER_NAME, storage.METRICS_NAME) == (
        "config.json", "model.safetensors", "tokenizer.json", "metrics.json")
    assert (storage.CURVE_NAME, storage.STATE_NAME, storage.CARD_NAME, storage.IN_PROGRESS_NAME) == (
        "training_curve.png", "trainer_state.pt", "README.md", "RUN_IN_PROGRESS")


def test_storage_imports_nothing_of_this_project():
    code = "import sys, storage; print(sorted({m.split('.')[0] for m in sys.modules} & {'model', 'tokenization', " \
           "'training', 'demo', 'benchmarks', 'huggingface_hub'}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"  # huggingface_hub too: only a Hub id pays for its import


def test_a_local_folder_resolves_to_itself(tmp_path):
    assert resolve_checkpoint(tmp_path) == tmp_path
    assert resolve_checkpoint(str(tmp_path)) == tmp_path


def test_a_file_is_not_a_checkpoint(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(NotADirectoryError, match="holds config.json"):
        resolve_checkpoint(tmp_path / "config.json")


def test_a_missing_path_that_is_no_repo_id_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no checkpoint folder at .*nowhere"):
        resolve_checkpoint(tmp_path / "nowhere")


def test_a_run_folder_is_marked_while_written_and_replaced_files_are_cleared(tmp_path):
    folder = tmp_path / "run"
    assert storage.run_files(folder) == [] and not storage.is_being_written(folder)
    folder.mkdir()
    for name in (storage.METRICS_NAME, storage.WEIGHTS_NAME, storage.CARD_NAME):
        (folder / name).write_text("old")
    assert storage.run_files(folder) == [storage.METRICS_NAME, storage.WEIGHTS_NAME]
    storage.start_run(folder, "python -m training.run --task lm", replace=True)
    assert storage.is_being_written(folder)
    assert json.loads((folder / storage.IN_PROGRESS_NAME).read_text())["command"] == "python -m training.run --task lm"
    assert sorted(p.name for p in folder.iterdir()) == [storage.CARD_NAME, storage.IN_PROGRESS_NAME]  # card kept
    storage.finish_run(folder)
    assert not storage.is_being_written(folder) and storage.run_files(folder) == []


# --- lineage: what a fine-tuned or continued model started from ---------------------------------------

def fake_checkpoint(folder: Path, weights: bytes, metrics: dict | None) -> Path:
    folder.mkdir(parents=True)
    (folder / storage.WEIGHTS_NAME).write_bytes(weights)
    if metrics is not None:
        (folder / storage.METRICS_NAME).write_text(json.dumps(metrics))
    return folder


def test_lineage_names_the_weights_by_their_hash_and_carries_the_ancestors_own_start(tmp_path):
    import hashlib

    scratch = {"command": "python -m training.run --task lm --out a", "steps": 6000, "tokens_seen": 98_304_000,
               "train_time_s": 166.1, "device": "cuda", "date": "2026-11-23", "val_bpb": 1.39}
    a = fake_checkpoint(tmp_path / "a", b"weights of a", scratch)
    record_a = storage.lineage(a)
    assert record_a == {"checkpoint": str(a), "weights_sha256": hashlib.sha256(b"weights of a").hexdigest(),
                        **{k: scratch[k] for k in ("command", "steps", "tokens_seen", "train_time_s", "device",
                                                   "date")}}  # its figures are its own card's, not the lineage's
    b = fake_checkpoint(tmp_path / "b", b"weights of b", {"command": "... --init-from a", "tokens_seen": 40_960_000,
                                                          "init_from": record_a})
    record_b = storage.lineage(b, name="checkpoints/lm")
    assert record_b["checkpoint"] == "checkpoints/lm" and record_b["init_from"] == record_a
    run = {"tokens_seen": 22_000_000, "init_from": record_b}
    assert storage.chain(run) == [record_b, record_a]
    assert storage.tokens_in_all(run) == 22_000_000 + 40_960_000 + 98_304_000
    assert storage.lineage(fake_checkpoint(tmp_path / "bare", b"w", None)).keys() == {"checkpoint", "weights_sha256"}


def test_a_finished_run_records_its_start_once_from_where_those_weights_are_now(tmp_path, capsys):
    from publishing.lineage import main

    old = fake_checkpoint(tmp_path / "lm-then", b"the old lm", {"command": "scratch", "tokens_seen": 5})
    run = fake_checkpoint(tmp_path / "run", b"reader", {
        "command": "python -m training.run --task sentiment --init-from checkpoints/lm --max-minutes 9 && "
                   "python -m training.run --task sentiment --init-from checkpoints/lm --resume",
        "tokens_seen": 7})
    main([str(run), "--ancestor", str(old)])
    recorded = json.loads((run / storage.METRICS_NAME).read_text())["init_from"]
    assert recorded == storage.lineage(old, name="checkpoints/lm")  # the name its command used, the old bytes
    assert "started from checkpoints/lm" in capsys.readouterr().out
    for folder, message in [(run, "already records what it started from"),
                            (fake_checkpoint(tmp_path / "scratch", b"x", {"command": "python -m training.run"}),
                             "started from scratch")]:
        with pytest.raises(SystemExit) as exc:
            main([str(folder)])
        assert message in str(exc.value) and "\n" not in str(exc.value)
    assert json.loads((run / storage.METRICS_NAME).read_text())["init_from"] == recorded  # never replaced
