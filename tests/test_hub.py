"""Loading from a Hugging Face Hub repo id through a pre-populated local cache, offline.

The real code path, no mocks and no network: a cache laid out as `huggingface_hub` lays it out
(`models--owner--name/{blobs,refs/main,snapshots/<commit>/...}`) is built in tmp_path, and a fresh
process with `HF_HUB_CACHE` pointing at it and `HF_HUB_OFFLINE=1` loads the model and the tokenizer
by repo id. A fresh process, because huggingface_hub reads those variables once, at import.
"""

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from huggingface_hub import scan_cache_dir

from model import DecoderOnlyConfig, DecoderOnlyLM
from publishing.push import files_to_push
from storage import CONFIG_NAME, METRICS_NAME, STATE_NAME, TOKENIZER_NAME, WEIGHTS_NAME
from tokenization import BPETokenizer

ROOT = Path(__file__).resolve().parents[1]
REPO_ID = "tiny-owner/tiny-lm"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
PROMPT = "The film was great"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ckpt")
    texts = ["The film was great, the cast was great.", "A dull film with a weak plot."] * 20
    tokenizer = BPETokenizer.train(texts, vocab_size=300, min_frequency=1)
    tokenizer.save(folder)
    torch.manual_seed(0)
    DecoderOnlyLM(DecoderOnlyConfig(vocab_size=tokenizer.vocab_size, block_size=32, n_layer=1, n_head=2,
                                    d_model=16, d_ff=32)).save_pretrained(folder)
    return folder


def populate_cache(cache: Path, repo_id: str, files: dict[str, Path]) -> Path:
    """What `snapshot_download` leaves behind: content-addressed blobs, a ref naming the commit,
    and a snapshot folder of symlinks into the blobs."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)  # no newline, as huggingface_hub writes it
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    for name, source in files.items():
        data = source.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
    return snapshot


def run_offline(code: str, cache: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


LOAD = f"""
import json, torch
from model import DecoderOnlyLM, load_pretrained
from tokenization import BPETokenizer
tok = BPETokenizer.from_file({REPO_ID!r})
ids = torch.tensor([tok.encode({PROMPT!r}, add_bos=True)])
models = [DecoderOnlyLM.from_pretrained({REPO_ID!r}), load_pretrained({REPO_ID!r})]
with torch.no_grad():
    print(json.dumps({{"ids": ids[0].tolist(), "logits": [m(ids).logits[0].tolist() for m in models]}}))
"""


def test_a_hub_repo_id_loads_from_the_local_cache_offline(checkpoint, tmp_path):
    cache = tmp_path / "hub"
    snapshot = populate_cache(cache, REPO_ID, {name: checkpoint / name
                                               for name in (CONFIG_NAME, WEIGHTS_NAME, TOKENIZER_NAME)})
    (repo,) = scan_cache_dir(cache).repos  # huggingface_hub itself reads the layout as a valid cache
    assert (repo.repo_id, repo.repo_type, [r.commit_hash for r in repo.revisions]) == (REPO_ID, "model", [COMMIT])
    assert {f.file_name for f in next(iter(repo.revisions)).files} == {CONFIG_NAME, WEIGHTS_NAME, TOKENIZER_NAME}

    result = run_offline(LOAD, cache, tmp_path)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    tokenizer, model = BPETokenizer.from_file(snapshot), DecoderOnlyLM.from_pretrained(checkpoint)
    assert loaded["ids"] == tokenizer.encode(PROMPT, add_bos=True)
    with torch.no_grad():
        expected = model(torch.tensor([loaded["ids"]])).logits[0]
    for logits in loaded["logits"]:  # from_pretrained and load_pretrained; another process may use other threads
        torch.testing.assert_close(torch.tensor(logits), expected, atol=1e-6, rtol=0)


def test_an_uncached_hub_repo_fails_fast_offline(tmp_path):
    code = """
from model import load_pretrained
from tokenization import BPETokenizer
for load in (load_pretrained, BPETokenizer.from_file):
    try:
        load("someone/not-cached")
    except FileNotFoundError as e:
        print(e)
"""
    result = run_offline(code, tmp_path / "empty-cache", tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2
    for line in lines:
        assert line.startswith("'someone/not-cached' is not a local folder, and the Hugging Face Hub repo")
        assert "not in the local cache" in line and "HF_HUB_OFFLINE=1" in line


def test_a_local_folder_wins_over_a_repo_id_of_the_same_name(checkpoint, tmp_path, monkeypatch):
    local = tmp_path / "tiny-owner" / "tiny-lm"
    local.mkdir(parents=True)
    for name in (CONFIG_NAME, WEIGHTS_NAME):
        (local / name).write_bytes((checkpoint / name).read_bytes())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = DecoderOnlyLM.from_pretrained(REPO_ID)  # the relative folder tiny-owner/tiny-lm
    assert model.config.vocab_size == DecoderOnlyLM.from_pretrained(checkpoint).config.vocab_size


# --- python -m publishing.push -----------------------------------------------------------------

def push_cli(checkpoint: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    """The CLI offline: everything up to the upload runs for real; the upload itself is refused by
    huggingface_hub (HF_HUB_OFFLINE=1), never sent."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home"), "HF_TOKEN": "hf_none"}
    return subprocess.run([sys.executable, "-m", "publishing.push", "--checkpoint", str(checkpoint),
                           "--repo-id", "someone/tiny-lm", *extra], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def finished_run(checkpoint, tmp_path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    for name in (CONFIG_NAME, WEIGHTS_NAME, TOKENIZER_NAME):
        (run / name).write_bytes((checkpoint / name).read_bytes())
    metrics = json.loads((ROOT / "checkpoints" / "lm" / METRICS_NAME).read_text())  # a real run's record
    (run / METRICS_NAME).write_text(json.dumps({**metrics, "parameters": 12345}))
    (run / STATE_NAME).write_bytes(b"optimizer state")
    return run


def test_push_uploads_the_checkpoint_files_and_its_card_never_the_trainer_state(finished_run):
    assert files_to_push(finished_run) == [CONFIG_NAME, WEIGHTS_NAME, TOKENIZER_NAME, METRICS_NAME, "README.md"]


def test_push_writes_the_card_then_reports_an_offline_hub_in_one_line(finished_run, tmp_path):
    result = push_cli(finished_run, tmp_path, "--private")
    assert result.returncode == 1
    assert result.stderr.startswith("error: the upload to someone/tiny-lm failed: OfflineModeIsEnabled")
    assert len(result.stderr.strip().splitlines()) == 1  # no traceback
    card = (finished_run / "README.md").read_text()
    assert card.startswith("---\n") and "12,345 parameters" in card


@pytest.mark.parametrize(("damage", "message"), [
    ("in_progress", r"a training run is still writing into it \(RUN_IN_PROGRESS\)"),
    ("no_weights", "not a checkpoint, it lacks model.safetensors"),
    ("bad_config", "does not load: .*config.json: n_layer must be between 1 and 128, got -3"),
    ("no_metrics", "no README.md and no metrics.json to write one from"),
])
def test_push_refuses_a_folder_that_is_not_a_finished_checkpoint(finished_run, tmp_path, damage, message):
    if damage == "in_progress":
        (finished_run / "RUN_IN_PROGRESS").write_text("")
    elif damage == "no_weights":
        (finished_run / WEIGHTS_NAME).unlink()
    elif damage == "bad_config":
        config = json.loads((finished_run / CONFIG_NAME).read_text())
        (finished_run / CONFIG_NAME).write_text(json.dumps({**config, "n_layer": -3}))
    else:
        (finished_run / "metrics.json").unlink()
    result = push_cli(finished_run, tmp_path)
    assert result.returncode == 2
    assert re.search(message, result.stderr), result.stderr
    assert not (finished_run / "README.md").exists()  # nothing written for a refused folder
