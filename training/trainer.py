"""The training loop: AdamW, linear warmup + cosine decay, gradient clipping, periodic evaluation,
best-on-validation checkpoints, resumable state, optional DistributedDataParallel.

Everything a resumed run needs is in one file, `trainer_state.pt` (weights, optimizer, step,
RNG state, history, and the settings that must not change on resume), written atomically; it is
loaded with `weights_only=True`, so it cannot execute code. The learning rate and the data order
are pure functions of the step number.

Under DDP every collective runs on the training device (NCCL has no CPU tensors), and whether to
stop for time is decided by all ranks together, so that they all end at the same step.
"""

import contextlib
import copy
import io
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from model import PreTrainedModel, autocast, resolve_precision
from storage import SNAPSHOTS_DIR, STATE_NAME, TOKENIZER_NAME, atomic_write, snapshot_name, write_index

from .recipe import (
    REPEAT_PASSES,
    apply_unfreezing,
    average_state_dicts,
    param_groups,
    set_dropout,
    stlr,
    training_loss,
    wsd,
    wsd_decay_start,
)
from .training_args import TrainConfig

if TYPE_CHECKING:
    from .contract import Task, TaskData

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
STOPS = ("max_steps", "max_minutes", "interrupted")  # why training stopped; a later one wins when ranks differ
FINAL_SHARE = 0.1  # under --max-minutes, the final evaluation gets at most this share of the budget ...
FINAL_OVERHEAD_S = 5.0  # ... plus this (at most that share) for loading the checkpoint, samples, curve and metrics
SIZING_STEPS = 12  # a run sized to its time budget (`Trainer.size_to_budget`) times this many steps ...
SIZING_UNTIMED = 2  # ... but not its first ones, which allocate memory and pick kernels: slower than the rest
REFIT_EVERY = 10  # under wsd, a sized run re-fits its count every this many steps, until its decay starts


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup to `lr`, then cosine decay to `lr * min_lr_ratio` at `max_steps`; or the recipe's
    slanted triangular schedule (`training.recipe.stlr`), whose climb is the warmup; or its
    warmup-stable-decay (`training.recipe.wsd`), which holds `lr` until the last `decay_fraction` of
    the steps. A decay needs its end before it starts: a run sized to its time budget fixes
    `max_steps` before its first step, and under wsd may re-fit it until the decay starts."""
    if cfg.recipe.schedule == "stlr":
        return stlr(step, cfg.lr, cfg.warmup_steps, cfg.max_steps)
    if cfg.recipe.schedule == "wsd":
        return wsd(step, cfg.lr, cfg.warmup_steps, cfg.max_steps, cfg.recipe.decay_fraction, cfg.min_lr_ratio)
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW over `recipe.param_groups`: weight decay on matrices only, and each group's share of
    the scheduled learning rate (all 1 unless --layer-decay is set). `fused`: one pass per tensor
    instead of a dozen element-wise kernels (about 4x faster a step on CPU, on CUDA too)."""
    return torch.optim.AdamW(param_groups(model, cfg.weight_decay, cfg.recipe.layer_decay), lr=cfg.lr,
                             betas=(0.9, 0.95), fused=True)


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str) -> DistInfo:
    """Set up a torchrun process group (NCCL on GPUs, gloo on CPU) when WORLD_SIZE > 1."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return DistInfo()
    info = DistInfo(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    return info


def _wait_released(*tensors: torch.Tensor) -> None:
    """Return once gloo's worker thread has let go of the tensors of a collective that has completed.

    The worker drops its reference a moment after the collective returns, and dropping a tensor
    that Python also holds takes the GIL. If the process is shutting down by then (the collective
    was a rank's last), the worker cannot take it and the process aborts with "terminate called
    without an active exception" (pytorch/pytorch#190489): a rank that did its work exits with
    SIGABRT. Waiting here, with the GIL released, lets the worker finish first. Only gloo is
    waited for: NCCL's references go from its watchdog thread on its own schedule, and waiting
    for that at every step would cost more than it guards (and no GPU here could test it)."""
    if dist.get_backend() != dist.Backend.GLOO:
        return
    deadline = time.monotonic() + 1.0  # a gloo that kept them longer brings back the race, not a hang
    while any(t._use_count() > 1 for t in tensors) and time.monotonic() < deadline:  # 1: the caller's own
        time.sleep(0)  # releases the GIL


def weights_in_sync(model: torch.nn.Module, info: DistInfo) -> bool:
    """True when every rank holds bit-identical weights (what DDP promises). Gathered on the
    weights' own device: NCCL cannot gather CPU tensors."""
    if info.world_size == 1:
        return True
    flat = torch.cat([p.detach().float().flatten() for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(info.world_size)]
    dist.all_gather(gathered, flat)
    _wait_released(flat, *gathered)
    return all(torch.equal(g, gathered[0]) for g in gathered)


def agreed(code: int, device: str, info: DistInfo) -> int:
    """The largest of every rank's `code` (an all-reduce MAX on `device`), on every rank: what one rank
    decides (stop for time, stop for a signal), all do, at the same step."""
    if info.world_size == 1:
        return code
    t = torch.tensor([float(code)], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    _wait_released(t)
    return int(t.item())


def snapshot_steps(max_steps: int, n: int) -> list[int]:
    """The steps whose weights a run keeps for the app's "watch it learn" view: step 0 (the random
    start) and n - 1 steps spaced evenly in log(step) from step 10 to the last, where most of what
    changes early would fall between two evenly spaced ones. Fewer when the steps are too few."""
    if n <= 0:
        return []
    spaced = np.geomspace(min(10, max_steps), max_steps, n - 1) if n > 1 else np.array([max_steps])
    return sorted({0, *(int(round(x)) for x in spaced)})


@contextlib.contextmanager
def stop_requests():
    """Within: SIGINT (Ctrl-C) and SIGTERM are recorded in the list yielded instead of stopping the
    process, so the loop ends its step, saves a resumable state and returns; a second one raises
    KeyboardInterrupt at once (stop without saving). Signals reach the main thread only: elsewhere
    (a test's worker thread) nothing is installed."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def request(signum, frame):
        if received:
            raise KeyboardInterrupt
        received.append(signum)
        print(f"\n{signal.Signals(signum).name}: saving at the end of this step (again: stop without saving)",
              file=sys.stderr, flush=True)

    previous = {sig: signal.signal(sig, request) for sig in STOP_SIGNALS}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def training_rows(task: "Task", data: "TaskData") -> int | None:
    """How many rows the training split holds, which the batches' order is of; None for a task that
    makes its batches without one (a toy that draws them)."""
    return task.rows(data, "train") if "train" in data.splits else None


def resume_mismatches(state: dict, cfg: TrainConfig, model_config: dict, world_size: int,
                      train_rows: int | None = None) -> list[str]:
    """What differs between a saved state and this run in the settings a resumed run must keep
    (anything else, e.g. a raised --max-steps, is a new segment recorded in the run's commands):
    the batch and seed fix the data order, the model config the weights' meaning, and the number of
    training rows (when known: states since 2026-11-27) that the order is of: a `--pseudo-labels`
    file that grew since, or other `--sentence-copies`, would train on other batches."""
    saved_cfg = state["train_config"]
    found = [f"--{k.replace('_', '-')} {saved_cfg.get(k)} (now {getattr(cfg, k)})"
             for k in ("batch_size", "seed", "max_tokens") if saved_cfg.get(k) != getattr(cfg, k)]
    if None not in (state.get("train_rows"), train_rows) and state["train_rows"] != train_rows:
        found.append(f"{state['train_rows']:,} training rows (now {train_rows:,})")
    if state.get("world_size", 1) != world_size:
        found.append(f"{state.get('world_size', 1)} processes (now {world_size})")
    saved_model = state.get("model_config")
    chosen = ("dropout", "attention_dropout") if "dropout" in (state.get("sized") or {}) else ()  # by the sizing
    if saved_model is not None:
        found += [f"{k}={saved_model.get(k)!r} (now {v!r})" for k, v in model_config.items()
                  if saved_model.get(k) != v and k not in chosen]
    return found


def kept_random_state():
    """Within: draw random numbers freely; after: the CPU's (and the current CUDA device's) random
    state as before (`torch.random.fork_rng`)."""
    return torch.random.fork_rng(devices=[torch.cuda.current_device()] if torch.cuda.is_available() else [])


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within: SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so that a run stopped outside its
    training loop (reading the data, the final evaluation) ends the way Ctrl-C ends it (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Trainer:
    """Trains a model of a prepared task (`tasks.Task`): batches from `task.batch`, periodic
    `task.evaluate` on validation, and `task.better` picks the checkpoint to keep in `out_dir`; then
    `final_metrics` scores the kept checkpoint.

    Time: with --max-minutes, `train(deadline)` stops when what is left would not cover the next step
    and what comes after training (a last evaluation, the final one at most `FINAL_SHARE` of the budget
    or the periodic sample if that is more, unless --full-eval, and `overhead_seconds`), so the whole
    invocation ends by the deadline. Every duration it plans with is measured in this invocation (steps,
    periodic evaluations: seconds per validation row) or, until it evaluates, a resumed run's last rate
    on the same device and threads. A run without `max_steps` (the laptop preset's) first sizes them to
    the time it has (`size_to_budget`), and under the wsd schedule re-fits them to the steps it takes
    while the rate holds its peak (`refit`), or starts the decay when a periodic evaluation finds the
    held-out loss no better (`cool_down`). `clock` (seconds) is read once at the start, around the
    sizing steps and once before each step (while re-fitting, after it too, and at each re-fit); tests
    inject one to make a rank run out of time, or a step take a known time."""

    def __init__(self, model: PreTrainedModel, task: "Task", data: "TaskData", out_dir: Path, device: str,
                 dist_info: DistInfo, save_dtype: torch.dtype = torch.float32,
                 clock: Callable[[], float] = time.monotonic):
        self.model, self.task, self.data, self.cfg = model.to(device), task, data, data.train_cfg
        self.out, self.device, self.info, self.save_dtype, self.clock = out_dir, device, dist_info, save_dtype, clock
        self.optimizer = make_optimizer(self.model, self.cfg)
        self.step, self.tokens_seen, self.elapsed = 0, 0, 0.0  # elapsed: training time of all invocations
        self.history: list[dict] = []
        self.best: dict | None = None
        self.commands: list[str] = []  # every invocation that trained this state, in order
        self.init_from: dict | None = None  # what the model started from (`storage.lineage`), as the run began
        self.recent_weights: list[dict] = []  # --average-last: the weights at the last evaluation points (CPU)
        self.window_losses: list[float] = []  # training losses since the last evaluation (its train_loss)
        self.snapshots: list[dict] = []  # the weight snapshots kept so far (`storage.snapshots`' index entries)
        self.deadline: float | None = None  # `clock` reading by which the invocation must end (--max-minutes)
        self.eval_seconds = 0.0  # the last periodic evaluation, saving included
        self.row_seconds: float | None = None  # evaluation time per validation row, measured
        self.sized: dict | None = None  # how `size_to_budget` chose max_steps (metrics.json's `sized_to_budget`)
        self.refitting = False  # sized in this invocation under wsd: re-fit max_steps until the decay starts
        self.ddp = self.model
        if dist_info.world_size > 1:
            device_ids = [torch.device(device).index] if device.startswith("cuda") else None
            self.ddp = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=device_ids)
        self.precision = resolve_precision(self.cfg.precision, device)  # "auto" -> what this device runs fastest
        self.autocast = autocast(device, self.precision)

    # --- resumable state ------------------------------------------------------------------------
    def state_dict(self) -> dict:
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "step": self.step,
                 "tokens_seen": self.tokens_seen, "elapsed": self.elapsed, "history": self.history,
                 "best": self.best, "commands": self.commands, "init_from": self.init_from,
                 "rng_cpu": torch.get_rng_state(),
                 "train_config": asdict(self.cfg), "model_config": asdict(self.model.config),
                 "world_size": self.info.world_size, "train_rows": training_rows(self.task, self.data),
                 "snapshots": self.recent_weights,  # its name in older states
                 "window_losses": self.window_losses, "snapshot_index": self.snapshots,
                 "timing": {"where": self.where(), "row_seconds": self.row_seconds}, "sized": self.sized}
        if torch.cuda.is_available():
            state["rng_cuda"] = torch.cuda.get_rng_state()
        return state

    def save_state(self) -> None:
        buffer = io.BytesIO()
        torch.save(self.state_dict(), buffer)
        atomic_write(self.out / STATE_NAME, lambda tmp: Path(tmp).write_bytes(buffer.getvalue()))

    @staticmethod
    def read_state(path: Path) -> dict:
        return torch.load(path, map_location="cpu", weights_only=True)

    def load_state(self, state: dict) -> None:
        """Continue from `read_state`'s dict (check it with `resume_mismatches` first)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.tokens_seen, self.elapsed = state["step"], state["tokens_seen"], state["elapsed"]
        self.history, self.best = state["history"], state["best"]
        self.commands = state.get("commands", [])
        self.init_from = state.get("init_from")  # a state saved before runs recorded it: None
        self.recent_weights = state.get("snapshots", [])
        self.window_losses = state.get("window_losses", [])
        self.snapshots = state.get("snapshot_index", [])
        self.sized = state.get("sized")
        if self.sized and "dropout" in self.sized:  # chosen when the run was sized: its other steps take it too
            set_dropout(self.model, self.sized["dropout"])
        if self.cfg.max_steps is None:  # sized to the first invocation's budget: a resumed one keeps that schedule
            self.cfg.max_steps = state["train_config"]["max_steps"]
        timing = state.get("timing") or {}
        if timing.get("row_seconds") and timing.get("where") == self.where():
            # until this invocation evaluates, plan with the last one's rate on the same device and threads
            # (a resumed stretch may end before its first evaluation); another machine's rate would mislead
            self.row_seconds = timing["row_seconds"]
            self.eval_seconds = self.row_seconds * self.sample_rows("val")
        torch.set_rng_state(state["rng_cpu"])
        if "rng_cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state(state["rng_cuda"])

    # --- evaluation and snapshots ---------------------------------------------------------------
    def evaluate(self) -> None:
        """Score the model on validation and keep it if it is the best so far. With --average-last N
        the model scored and kept is the mean of the weights at the last N evaluation points (training
        goes on from the current weights)."""
        started = time.perf_counter()
        model = self.model
        if self.cfg.recipe.average_last > 1:
            current = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
            self.recent_weights = [*self.recent_weights, current][-self.cfg.recipe.average_last :]
            model = copy.deepcopy(self.model)
            model.load_state_dict(average_state_dicts(self.recent_weights))
        metrics = self._periodic_metrics(model)
        train_loss = sum(self.window_losses) / len(self.window_losses) if self.window_losses else None
        point = {"step": self.step, "train_loss": train_loss, "lr": lr_at(self.step - 1, self.cfg),
                 "time_s": round(self.elapsed, 1), **{f"val_{k}": v for k, v in metrics.items()}}
        self.history.append(point)
        self.window_losses = []
        if self.best is None or self.task.better(metrics, self.best):
            self.best = {**metrics, "step": self.step}
            self.save_model(model, self.out, self.save_dtype)
        self.save_state()
        self.eval_seconds = time.perf_counter() - started

    def save_model(self, model: PreTrainedModel, folder: Path, dtype: torch.dtype | None) -> None:
        """The model in `folder`: config.json + model.safetensors, and for a classifier its classifier.json
        (`data.classifier`); the tokenizer beside them, except in a snapshot (its folder shares one)."""
        model.save_pretrained(folder, dtype=dtype)
        if self.data.classifier is not None:
            self.data.classifier.save_pretrained(folder)
        if folder == self.out:
            self.data.tokenizer.save(self.out / TOKENIZER_NAME)

    def sample_rows(self, split: str) -> int:
        """The rows of `split` periodic evaluation reads, and the fewest the final one reads."""
        return min(self.task.periodic_rows(self.data), self.task.rows(self.data, split))

    def _periodic_metrics(self, model: PreTrainedModel) -> dict:
        """`task.evaluate` on the periodic sample of validation rows, timing it per row."""
        rows = self.sample_rows("val")
        started = time.perf_counter()
        with self.autocast:
            metrics = self.task.evaluate(model, self.data, "val", rows)
        self.row_seconds = (time.perf_counter() - started) / max(1, rows)
        self.model.train()
        return metrics

    def take_snapshot(self) -> None:
        """Keep the current weights in float16 under snapshots/, with their loss on the periodic
        validation sample, and rewrite the index (`storage.snapshots`)."""
        folder = self.out / SNAPSHOTS_DIR
        metrics = self._periodic_metrics(self.model)
        self.save_model(self.model, folder / snapshot_name(self.step), torch.float16)
        self.data.tokenizer.save(folder / TOKENIZER_NAME)
        self.snapshots = [s for s in self.snapshots if s["step"] != self.step] + [
            {"step": self.step, "tokens": self.tokens_seen, "path": snapshot_name(self.step),
             **{f"val_{k}": v for k, v in metrics.items()}}]
        self.write_snapshot_index()

    def write_snapshot_index(self) -> None:
        if self.snapshots:
            write_index(self.out / SNAPSHOTS_DIR, {
                "model_type": self.model.model_type, "max_steps": self.cfg.max_steps, "commands": self.commands,
                "snapshots": self.snapshots, "history": self.history})

    # --- time -----------------------------------------------------------------------------------
    def size_to_budget(self) -> None:
        """Set `max_steps` (None: left to the time budget, as the laptop preset leaves it) to the steps
        that fit between now and the deadline, with the evaluations and snapshots they bring and the
        final evaluation.

        Why a number of steps, fixed before the first one: the learning rate decays to its floor at
        `max_steps`, so the schedule needs its end from the start. A fixed count that is too small
        leaves minutes unused; one too large is stopped by the deadline mid-decay, at a learning rate
        still high. Timing the first steps and then fixing the count keeps the schedule a function of
        the step, as it is in every other run: `--resume` goes on with the count the state recorded,
        and `--max-steps N` (which always wins) trains exactly this run again.

        It times real steps (`time_steps`) and, if no rate was measured yet, one periodic evaluation,
        leaving no trace. With the recipe's `repeat_dropout`, a count that would read the training
        tokens more than `REPEAT_PASSES` times turns that dropout on (`set_dropout`) and times the
        steps again (dropout makes them slower): a small text on a fast machine is otherwise memorised
        long before the time is up. Under DDP the slowest rank's step time counts and rank 0's count
        and choice are everyone's."""
        if self.deadline is None:
            raise ValueError("max_steps=None sizes a run to its time budget: give max_minutes (or max_steps)")
        if self.row_seconds is None and self.info.is_main:  # rank 0 evaluates
            with kept_random_state():
                self._periodic_metrics(self.model)
        step_seconds, step_tokens = self.time_steps()
        steps = self.steps_that_fit(step_seconds, self.clock())
        chosen = {}  # what the passes chose, for metrics.json
        passes = self.passes(steps, step_tokens)
        dropout = self.cfg.recipe.repeat_dropout
        if dropout > self.model.config.dropout and agreed(int(self.info.is_main and passes > REPEAT_PASSES),
                                                          self.device, self.info):
            # the time would read the text more than REPEAT_PASSES times: dropout, and its slower steps
            set_dropout(self.model, dropout)
            chosen = {"passes_without_dropout": round(passes, 1),
                      "step_seconds_without_dropout": round(step_seconds, 4), "dropout": dropout}
            step_seconds, _ = self.time_steps()
            steps = self.steps_that_fit(step_seconds, self.clock())
        self.cfg.max_steps = agreed(steps if self.info.is_main else 0, self.device, self.info)
        self.sized = {"step_seconds": round(step_seconds, 4), "eval_seconds": round(self.planned_eval_seconds(), 3),
                      "budget_s": round(self.deadline - self.clock(), 1), "max_steps": self.cfg.max_steps, **chosen}
        self.refitting = self.cfg.recipe.schedule == "wsd"
        if self.info.is_main:
            later = (", re-fitted as it trains until the decay starts (sooner if the held-out loss stops "
                     "improving)") if self.refitting else ""
            if "dropout" in self.sized:
                print(f"{self.sized['passes_without_dropout']:g} passes over the training tokens would fit the time "
                      f"(steps of {self.sized['step_seconds_without_dropout']:.3f} s): more than {REPEAT_PASSES} "
                      f"memorise them, so dropout {dropout:g} from the first step", flush=True)
            print(f"sized to the time left ({self.sized['budget_s']:.0f} s): {self.cfg.max_steps:,} steps of "
                  f"{step_seconds:.3f} s (timed on {SIZING_STEPS - SIZING_UNTIMED}), evaluations of "
                  f"{self.sized['eval_seconds']:.1f} s every {self.cfg.eval_every}{later}", flush=True)

    def time_steps(self) -> tuple[float, float]:
        """Seconds and tokens of one step, on `SIZING_STEPS` real steps (the first `SIZING_UNTIMED` not
        timed); then the weights, the optimizer and the random state go back, so the run trains from
        step 0 as if they had not been taken. Under DDP the slowest rank's step time counts."""
        weights = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.model.train()
        tokens = 0
        with kept_random_state():
            for step in range(SIZING_STEPS):
                if step == SIZING_UNTIMED:
                    timed_from = self.clock()
                tokens += self.optimizer_step(step, self.cfg.lr)[1]
        step_seconds = (self.clock() - timed_from) / (SIZING_STEPS - SIZING_UNTIMED)
        self.model.load_state_dict(weights)
        self.optimizer = make_optimizer(self.model, self.cfg)  # a fresh one, as the run started with
        self.model.zero_grad(set_to_none=True)
        return agreed(math.ceil(step_seconds * 1e6), self.device, self.info) / 1e6, tokens / SIZING_STEPS

    def passes(self, steps: int, step_tokens: float) -> float:
        """How many times `steps` steps of `step_tokens` tokens read the training tokens (0 when the task
        does not count them)."""
        train_tokens = self.data.description.get("train_tokens")
        return steps * step_tokens / train_tokens if train_tokens else 0.0

    def decay_start(self) -> int:
        """The first step at which wsd's rate falls below its peak, for the current `max_steps`."""
        return wsd_decay_start(self.cfg.warmup_steps, self.cfg.max_steps, self.cfg.recipe.decay_fraction)

    def refit(self, step_seconds: float, now: float, snapshots_left: int) -> bool:
        """Re-fit `max_steps` to the time left at `step_seconds` a step, as measured on the steps this
        run has taken (warm, unlike the sizing steps, which ran ~10% slower on a 2-core CPU), with the
        evaluations and `snapshots_left` snapshots still to come. Only while the wsd rate holds its
        peak: every step taken so far had the same rate under the old count and the new one, so the run
        is, weight for weight, the fixed-step run of the count it ends with, and --resume goes on from
        the count the state recorded. The new count never moves the decay's start before the next step
        (a slower machine starts decaying now, and the deadline guards the rest). Returns whether the
        count changed; under DDP the slowest rank's step time counts and rank 0's count is everyone's."""
        step_seconds = agreed(math.ceil(step_seconds * 1e6), self.device, self.info) / 1e6
        fit = self.step + self.steps_that_fit(step_seconds, now, snapshots_left)
        steps = agreed(max(fit, self.decaying_from_here()) if self.info.is_main else 0, self.device, self.info)
        changed = steps != self.cfg.max_steps
        if changed:
            self.sized.setdefault("first_max_steps", self.sized["max_steps"])
            self.cfg.max_steps = steps
            self.sized.update(max_steps=steps, refit_step=self.step, refit_step_seconds=round(step_seconds, 4))
        return changed

    def decaying_from_here(self) -> int:
        """The fewest steps whose wsd decay starts at or after the next step (`self.step`), so that
        every step taken so far was at the rate of the run that ends there."""
        low, high = self.step + 1, max(self.step + 1, self.cfg.max_steps)
        fraction, warmup = self.cfg.recipe.decay_fraction, self.cfg.warmup_steps
        while low < high:
            mid = (low + high) // 2
            low, high = (mid + 1, high) if wsd_decay_start(warmup, mid, fraction) < self.step else (low, mid)
        return low

    def cool_down(self) -> None:
        """A sized wsd run whose held-out loss did not improve at a periodic evaluation while the rate
        held its peak: more steps at the peak would only memorise the text (a small corpus on a fast
        machine), so the decay starts at the next step and the run ends after it, before its time is
        up. The best checkpoint is still the one kept; `sized` records where the decay began."""
        steps = self.decaying_from_here()
        self.sized.setdefault("first_max_steps", self.sized["max_steps"])
        self.sized.update(max_steps=steps, cooled_down_at=self.step)
        self.cfg.max_steps, self.refitting = steps, False

    def planned_eval_seconds(self) -> float:
        """What one periodic evaluation takes: the last one's time, or the measured rate times its rows."""
        return self.eval_seconds or (self.row_seconds or 0.0) * self.sample_rows("val")

    def steps_that_fit(self, step_seconds: float, now: float, snapshots: int | None = None) -> int:
        """How many steps of `step_seconds` fit between `now` and the deadline, leaving time for an
        evaluation every `eval_every` steps, one for each snapshot still to take (`snapshots`; by
        default all of them), the one `stop_reason` keeps in hand and the final evaluation
        (`final_seconds`). At least one."""
        evaluation = self.planned_eval_seconds()
        snapshots = self.cfg.snapshots if snapshots is None else snapshots
        left = self.deadline - now - self.final_seconds() - (snapshots + 2) * evaluation
        return max(1, int(left / (step_seconds + evaluation / self.cfg.eval_every)))

    def where(self) -> str:
        """The device, ranks and threads timings are measured on (a saved rate is reused only there)."""
        return f"{self.device} x{self.info.world_size}, {torch.get_num_threads()} threads"

    def overhead_seconds(self) -> float:
        """What the end of a run takes besides evaluating: `FINAL_OVERHEAD_S`, or `FINAL_SHARE` of a
        smaller --max-minutes."""
        if self.cfg.max_minutes is None:
            return FINAL_OVERHEAD_S
        return min(FINAL_OVERHEAD_S, FINAL_SHARE * self.cfg.max_minutes * 60)

    def final_seconds(self) -> float:
        """What the final evaluation of the kept checkpoint is expected to take, with the overhead:
        every validation (and test) row at the measured rate, capped at `FINAL_SHARE` of
        --max-minutes unless --full-eval (it then reads a sample), but never fewer rows than `final_rows`
        reads when no time is left: the periodic sample of each split."""
        splits = [split for split in self.data.splits if split != "train"]
        rate = self.row_seconds or 0.0
        seconds = rate * sum(self.task.rows(self.data, split) for split in splits)
        if self.cfg.max_minutes is not None and not self.cfg.full_eval:
            floor = rate * sum(self.sample_rows(split) for split in splits)
            seconds = min(seconds, max(floor, FINAL_SHARE * self.cfg.max_minutes * 60))
        return seconds + self.overhead_seconds()

    def final_rows(self, split: str) -> int | None:
        """How many rows of `split` the final evaluation reads: all (None) without --max-minutes, with
        --full-eval, before any rate was measured, or when they fit in the time left; else as many as
        fit, never fewer than periodic evaluation reads."""
        total = self.task.rows(self.data, split)
        if self.deadline is None or self.cfg.full_eval or self.row_seconds is None:
            return None
        later = sum(self.task.rows(self.data, s) for s in self.data.splits if s not in ("train", "val", split))
        left = self.deadline - self.clock() - self.overhead_seconds()
        fit = int(left / self.row_seconds) - (later if split == "val" else 0)
        return None if fit >= total else max(fit, self.sample_rows(split))

    def final_metrics(self, model: PreTrainedModel) -> dict:
        """Finalize and score `model` (the checkpoint kept) on validation and, if the data has one, test,
        each with a progress bar; rows as `final_rows` allows. Returns what metrics.json records,
        `final_eval` saying how many rows of each split were read."""
        metrics, read = {}, {}
        for split in [s for s in ("val", "test") if s in self.data.splits]:
            limit, total = self.final_rows(split), self.task.rows(self.data, split)
            n = total if limit is None else limit
            what = "all" if limit is None else f"a sample of {n:,} of the {total:,}"
            with tqdm(total=n, desc=f"final evaluation ({split}: {what} rows)", dynamic_ncols=True,
                      mininterval=1.0 if os.isatty(2) else 30.0, disable=not self.info.is_main) as bar, self.autocast:
                if split == "val":
                    finalized = self.task.finalize(model, self.data, limit, bar.update)
                    if finalized and self.data.classifier is not None:  # a fitted temperature: the weights stay
                        self.data.classifier.save_pretrained(self.out)
                    metrics.update(finalized)
                if not any(key.startswith(f"{split}_") for key in metrics):  # finalize did not score them
                    scores = self.task.evaluate(model, self.data, split, limit, bar.update)
                    metrics.update({f"{split}_{k}": v for k, v in scores.items()})
            read[split] = {"rows": n, "of": total}
        return {**metrics, "final_eval": read}

    # --- the loop -------------------------------------------------------------------------------
    def stop_reason(self, received: list[int], now: float, step_seconds: float) -> int:
        """The index in `STOPS` of why to stop before the next step (0: go on), agreed by all ranks:
        a signal, or --max-minutes when the next step, an evaluation it ends with, the evaluation
        of where training stops (and its snapshot, when the run keeps them) and the final evaluation
        would not fit."""
        code = 0
        if self.deadline is not None:
            next_eval = (self.step + 1) % self.cfg.eval_every == 0 or self.step + 1 == self.cfg.max_steps
            needed = step_seconds + (self.eval_seconds if next_eval else 0.0) + self.eval_seconds
            if self.cfg.snapshots:  # a run stopped by the deadline also keeps a snapshot of where it stopped
                needed += self.eval_seconds
            if now + needed + self.final_seconds() >= self.deadline:
                code = STOPS.index("max_minutes")
        if received:
            code = STOPS.index("interrupted")
        return agreed(code, self.device, self.info)

    def optimizer_step(self, step: int, lr: float) -> tuple[float, int]:
        """One optimizer step on batch `step` at learning rate `lr` (each group at its `lr_scale`):
        returns the loss and the tokens it trained on, all ranks together."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group["lr_scale"]
        if self.cfg.recipe.unfreeze_every:
            apply_unfreezing(self.model, step, self.cfg.recipe.unfreeze_every)
        batch = self.task.batch(self.data, step, self.info.rank, self.info.world_size)
        batch = {k: v.to(self.device) for k, v in batch.items()}
        with self.autocast:
            loss = training_loss(self.model, self.ddp, batch, self.cfg.recipe)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        return loss.item(), self.task.tokens(batch) * self.info.world_size  # .item(): the step has finished

    def train(self, deadline: float | None = None) -> str:
        """Train until max_steps, the deadline (a `clock` reading; by default --max-minutes from now)
        or a stop signal; returns why it stopped (one of `STOPS`). After a signal the state at the
        current step is saved, without an evaluation, so that --resume goes on exactly as if nothing
        had happened."""
        cfg, info = self.cfg, self.info
        started = self.clock()
        self.deadline = deadline if deadline is not None or cfg.max_minutes is None else started + cfg.max_minutes * 60
        if cfg.max_steps is None:
            self.size_to_budget()
        keep = set(snapshot_steps(cfg.max_steps, cfg.snapshots))
        self.model.train()
        bar = tqdm(total=cfg.max_steps, initial=self.step, disable=not info.is_main, dynamic_ncols=True,
                   mininterval=1.0 if os.isatty(2) else 30.0, desc=self.task.name)
        window_start, window_tokens, reason, steps_here = time.perf_counter(), 0, "max_steps", 0
        loop_start = time.perf_counter()
        warm_seconds, warm_steps = 0.0, 0  # `clock` time of this invocation's steps after its first (refit's rate)
        with stop_requests() as received:
            if self.step == 0 and 0 in keep:
                self._at_rank_zero(self.take_snapshot)
            while self.step < cfg.max_steps:
                step_seconds = (time.perf_counter() - loop_start) / steps_here if steps_here else 0.0
                now = self.clock()
                code = self.stop_reason(received, now, step_seconds)
                if code:
                    reason = STOPS[code]
                    break
                if self.deadline is not None and steps_here and info.is_main:  # the ETA: steps or time, first
                    fit = (self.deadline - now - self.final_seconds()) / step_seconds
                    bar.total = max(self.step + 1, min(cfg.max_steps, self.step + int(fit)))
                if self.refitting and self.step >= self.decay_start():  # the count is final from here
                    self.refitting = False
                    if info.is_main:
                        rate = f"{self.sized['refit_step_seconds']:.3f} s a step" if "refit_step" in self.sized \
                            else "the sizing steps' rate"
                        bar.write(f"step {self.step}: the learning rate decays from here to step {cfg.max_steps:,} "
                                  f"(fitted at {rate})")
                t0 = time.perf_counter()
                lr = lr_at(self.step, cfg)
                loss, n_tok = self.optimizer_step(self.step, lr)
                if self.refitting and steps_here >= SIZING_UNTIMED:  # the first steps here allocate the
                    warm_seconds, warm_steps = warm_seconds + self.clock() - now, warm_steps + 1  # optimizer's state
                self.step += 1
                steps_here += 1
                self.tokens_seen += n_tok
                window_tokens += n_tok
                self.window_losses.append(loss)
                self.elapsed += time.perf_counter() - t0
                if info.is_main:
                    rate = window_tokens / max(1e-9, time.perf_counter() - window_start)
                    bar.set_postfix(loss=f"{self.window_losses[-1]:.3f}", lr=f"{lr:.2e}", tok_s=f"{rate:,.0f}",
                                    refresh=False)
                    bar.update(1)
                evaluating = self.step % cfg.eval_every == 0 or self.step == cfg.max_steps
                if evaluating:
                    self._at_rank_zero(self.evaluate, lambda: bar.write(f"step {self.step}: " + ", ".join(
                        f"{k} {v:.4f}" for k, v in self.history[-1].items() if isinstance(v, float))))
                    window_start, window_tokens = time.perf_counter(), 0
                    if self.refitting and self.step < min(self.decay_start(), cfg.max_steps) and agreed(
                            int(info.is_main and self.best["step"] != self.step), self.device, info):
                        self.cool_down()
                        keep = set(snapshot_steps(cfg.max_steps, cfg.snapshots)) | {s["step"] for s in self.snapshots}
                        if info.is_main:  # rank 0 evaluates: the others know no best
                            bar.write(f"step {self.step}: the held-out loss has not improved since step "
                                      f"{self.best['step']:,}: the learning rate decays from here to step "
                                      f"{cfg.max_steps:,}")
                if self.step in keep:
                    self._at_rank_zero(self.take_snapshot)
                if (self.refitting and warm_steps and steps_here % REFIT_EVERY == 0
                        and self.step < min(self.decay_start(), cfg.max_steps)):
                    left = sum(step > self.step for step in keep)
                    if self.refit(warm_seconds / warm_steps, self.clock(), left):
                        keep = set(snapshot_steps(cfg.max_steps, cfg.snapshots)) | {
                            s["step"] for s in self.snapshots}  # those taken stay in the view
            bar.close()
            if reason == "interrupted":
                self._at_rank_zero(self.save_state)
                return reason
            if info.is_main:
                # a time limit ends the view with the weights training stopped at (kept in the saved state)
                last_frame = keep and reason == "max_minutes" and self.step not in {s["step"] for s in self.snapshots}
                if last_frame:
                    self.take_snapshot()
                if not self.history or self.history[-1]["step"] != self.step:
                    self.evaluate()  # saves the state
                elif last_frame:
                    self.save_state()
                if keep:
                    self.write_snapshot_index()  # with the whole loss curve
        return reason

    def _at_rank_zero(self, work: Callable[[], object], *then: Callable[[], object]) -> None:
        """Run `work` (and `then`) on rank 0 while the other ranks wait for it."""
        if self.info.is_main:
            work()
            for step in then:
                step()
        if self.info.world_size > 1:
            dist.barrier(device_ids=[torch.device(self.device).index] if self.device.startswith("cuda") else None)
