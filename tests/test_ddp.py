"""DistributedDataParallel on CPU (gloo): two processes, as `torchrun --nproc_per_node=2` runs them.

The time limit is the dangerous part of DDP: a rank that stops alone leaves the other waiting in
the next gradient all-reduce forever. Here one rank's clock runs out and the other's never does;
both must stop before the same step.
"""

import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from model import DecoderOnlyConfig, DecoderOnlyLM
from storage import IN_PROGRESS_NAME, METRICS_NAME, STATE_NAME
from tokenization import BPETokenizer
from training.contract import Corpus, Task, TaskData, TaskOptions
from training.data import step_generator
from training.distributed import init_distributed, weights_in_sync
from training.trainer import Trainer
from training.training_args import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
IMDB = ROOT.parent / "shared" / "data" / "imdb"
STOP_BEFORE_STEP = 7  # rank 1's clock runs out before this step; rank 0's never does


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NextTokenTask(Task):
    """Random token sequences whose next token is the current one plus 1: a task in one class."""

    name = "next_token"
    model_class = DecoderOnlyLM

    def __init__(self, splits: dict | None = None, options: TaskOptions | None = None):
        self.corpus = Corpus([], {})

    def prepare(self, tokenizer, model_overrides, train_cfg) -> TaskData:
        config = DecoderOnlyConfig(vocab_size=tokenizer.vocab_size, block_size=8, n_layer=1, n_head=2, d_model=16,
                                   d_ff=32, dropout=0.0, **model_overrides)
        val = self._sequences(torch.Generator().manual_seed(999), 16, config.vocab_size)
        return TaskData(config, tokenizer, train_cfg, {"val": val})

    @staticmethod
    def _sequences(gen: torch.Generator, n: int, vocab_size: int) -> dict:
        x = torch.randint(0, vocab_size - 9, (n, 1), generator=gen) + torch.arange(9)  # (n, 9)
        return {"input_ids": x[:, :-1], "targets": x[:, 1:]}

    def batch(self, data, step, rank=0, world_size=1) -> dict:
        gen = step_generator(data.train_cfg.seed, step, rank)
        return self._sequences(gen, data.train_cfg.batch_size, data.config.vocab_size)

    @staticmethod
    def tokens(batch) -> int:
        return batch["input_ids"].numel()

    def rows(self, data, split) -> int:
        return len(data.splits[split]["input_ids"])

    def evaluate(self, model, data, split="val", limit=None, progress=None) -> dict:
        model.eval()
        with torch.no_grad():
            return {"loss": model(**data.splits[split]).loss.item()}


class ClockRunningOutAt:
    """0 s for the first `calls` readings (the start and the checks before the first steps), then
    an hour: this rank finds its time spent before step `calls - 1`."""

    def __init__(self, calls: int | None):
        self.calls, self.readings = calls, 0

    def __call__(self) -> float:
        self.readings += 1
        return 3600.0 if self.calls is not None and self.readings > self.calls else 0.0


def _rank(rank: int, port: int, tokenizer_path: str, out: str, result: str) -> None:
    os.environ.update(WORLD_SIZE="2", RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    info = init_distributed("cpu")
    task = NextTokenTask()
    cfg = TrainConfig(batch_size=4, max_steps=50, lr=1e-2, warmup_steps=0, eval_every=5, eval_batches=1,
                      max_minutes=1.0)
    data = task.prepare(BPETokenizer.from_file(tokenizer_path), {}, cfg)
    torch.manual_seed(0)
    model = task.build(data)
    clock = ClockRunningOutAt(1 + STOP_BEFORE_STEP if rank == 1 else None)
    trainer = Trainer(model, task, data, Path(out), "cpu", info, clock=clock)
    reason = trainer.train()
    in_sync = weights_in_sync(trainer.model, info)
    Path(result).write_text(json.dumps({"step": trainer.step, "reason": reason, "in_sync": in_sync}))
    torch.distributed.destroy_process_group()


def test_time_stop_is_agreed_by_all_ranks(tmp_path):
    tokenizer_path = tmp_path / "tokenizer.json"
    BPETokenizer.train(["a small corpus for a tokenizer the task does not read"], vocab_size=300).save(tokenizer_path)
    port, context = _free_port(), multiprocessing.get_context("spawn")
    results = [tmp_path / f"rank{r}.json" for r in range(2)]
    procs = [context.Process(target=_rank, args=(r, port, str(tokenizer_path), str(tmp_path / "out"), str(results[r])))
             for r in range(2)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 120
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    hung = [r for r, p in enumerate(procs) if p.is_alive()]
    for p in procs:
        if p.is_alive():
            p.kill()
    assert not hung, f"ranks {hung} still waiting in a collective: the ranks did not stop together"
    assert [p.exitcode for p in procs] == [0, 0]
    ranks = [json.loads(r.read_text()) for r in results]
    expected = {"step": STOP_BEFORE_STEP, "reason": "max_minutes", "in_sync": True}
    assert ranks == [expected, expected]  # rank 0's clock never ran out: it stopped because rank 1's did
    state = torch.load(tmp_path / "out" / STATE_NAME, weights_only=True)
    assert state["step"] == STOP_BEFORE_STEP and [h["step"] for h in state["history"]] == [5, STOP_BEFORE_STEP]


@pytest.mark.needs_imdb
def test_two_process_gloo_run_with_a_time_limit(tmp_path):
    """torchrun end to end: real clocks, a budget of 15 s (start-up and final evaluation included)
    for 10,000 steps. Both ranks stop at one step, rank 0 writes metrics.json, and the weights agree
    bit for bit."""
    import pandas as pd

    data = tmp_path / "data"
    data.mkdir()
    pd.read_parquet(IMDB / "train.parquet").sample(200, random_state=0).to_parquet(data / "train.parquet")
    tokenizer = tmp_path / "tokenizer.json"
    BPETokenizer.train(pd.read_parquet(data / "train.parquet")["text"], vocab_size=400).save(tokenizer)
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={_free_port()}",
           "-m", "training.run", "--task", "lm", "--preset", "tiny", "--data-dir", str(data), "--out", str(out),
           "--tokenizer", str(tokenizer), "--val-size", "20", "--max-steps", "10000", "--eval-every", "3",
           "--max-minutes", "0.25", "--device", "cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((out / METRICS_NAME).read_text())
    assert metrics["world_size"] == 2 and metrics["ddp_weights_in_sync"] is True
    assert metrics["stopped_by"] == "max_minutes" and 0 < metrics["steps"] < 10000
    assert metrics["tokens_seen"] == metrics["steps"] * 2 * 8 * 64  # steps x ranks x batch x block
    assert not (out / IN_PROGRESS_NAME).exists()


@pytest.mark.needs_imdb
def test_two_process_run_sized_to_its_minutes_refits_and_cools_down_together(tmp_path):
    """The laptop preset's schedule under torchrun (its shape shrunk): sized to 18 s, re-fitted while the
    rate holds its peak, and decayed early when rank 0's evaluation finds the held-out loss no better
    (every 5 steps here): every rank takes the same count, and only rank 0 knows the best step."""
    import pandas as pd

    data = tmp_path / "data"
    data.mkdir()
    pd.read_parquet(IMDB / "train.parquet").sample(200, random_state=0).to_parquet(data / "train.parquet")
    tokenizer = tmp_path / "tokenizer.json"
    BPETokenizer.train(pd.read_parquet(data / "train.parquet")["text"], vocab_size=400).save(tokenizer)
    out = tmp_path / "ddp"
    shrunk = [a for kv in ("n_layer=1", "d_model=32", "n_head=2", "d_ff=64", "block_size=64") for a in ("--set", kv)]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={_free_port()}",
           "-m", "training.run", "--task", "lm", "--preset", "laptop", "--data-dir", str(data), "--out", str(out),
           "--tokenizer", str(tokenizer), "--val-size", "20", *shrunk, "--batch-size", "4", "--eval-every", "5",
           "--eval-batches", "3", "--max-minutes", "0.3", "--device", "cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((out / METRICS_NAME).read_text())
    sized = metrics["sized_to_budget"]
    assert metrics["world_size"] == 2 and metrics["ddp_weights_in_sync"] is True
    assert metrics["train_config"]["recipe"]["schedule"] == "wsd" and "first_max_steps" in sized
    assert "cooled_down_at" in sized and metrics["steps"] == metrics["max_steps"] == sized["max_steps"]
    assert "the learning rate decays from here" in proc.stdout
