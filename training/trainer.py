"""The training loop: AdamW, the learning-rate schedule (`training.schedules`), gradient clipping,
periodic evaluation, best-on-validation checkpoints, resumable state, optional DistributedDataParallel
(`training.distributed`). Every decision about time (--max-minutes, a count sized to it) is the time
budget's (`training.budget`): the loop steps, evaluates and saves.

Everything a resumed run needs is in one file, `trainer_state.pt` (weights, optimizer, step,
RNG state, history, and the settings that must not change on resume), written atomically; it is
loaded with `weights_only=True`, so it cannot execute code. The learning rate and the data order
are pure functions of the step number.
"""

import copy
import io
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from model import PreTrainedModel, autocast, current_fields, current_names, resolve_precision
from storage import SNAPSHOTS_DIR, STATE_NAME, TOKENIZER_NAME, atomic_write, snapshot_name, write_index

from .budget import SIZING_STEPS, SIZING_UNTIMED, Plan, TimeBudget, set_dropout, sizing_chose
from .distributed import DistInfo, agreed
from .recipe import apply_unfreezing, average_state_dicts, param_groups, training_loss
from .schedules import lr_at
from .stopping import stop_requests
from .training_args import TrainConfig

if TYPE_CHECKING:
    from .contract import Task, TaskData

STOPS = ("max_steps", "max_minutes", "interrupted")  # why training stopped; a later one wins when ranks differ


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW over `recipe.param_groups`: weight decay on matrices only, and each group's share of
    the scheduled learning rate (all 1 unless --layer-decay is set). `fused`: one pass per tensor
    instead of a dozen element-wise kernels (about 4x faster a step on CPU, on CUDA too)."""
    return torch.optim.AdamW(param_groups(model, cfg.weight_decay, cfg.recipe.layer_decay), lr=cfg.lr,
                             betas=(0.9, 0.95), fused=True)


def snapshot_steps(max_steps: int, n: int) -> list[int]:
    """The steps whose weights a run keeps for the app's "watch it learn" view: step 0 (the random
    start) and n - 1 steps spaced evenly in log(step) from step 10 to the last, where most of what
    changes early would fall between two evenly spaced ones. Fewer when the steps are too few."""
    if n <= 0:
        return []
    spaced = np.geomspace(min(10, max_steps), max_steps, n - 1) if n > 1 else np.array([max_steps])
    return sorted({0, *(int(round(x)) for x in spaced)})


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
    saved_model = None if saved_model is None else current_fields(saved_model)  # saved before a field was renamed
    chosen = sizing_chose(state)  # the sizing's choice, not a setting of either run
    if saved_model is not None:
        found += [f"{k}={saved_model.get(k)!r} (now {v!r})" for k, v in model_config.items()
                  if saved_model.get(k) != v and k not in chosen]
    return found


def kept_random_state():
    """Within: draw random numbers freely; after: the CPU's (and the current CUDA device's) random
    state as before (`torch.random.fork_rng`)."""
    return torch.random.fork_rng(devices=[torch.cuda.current_device()] if torch.cuda.is_available() else [])


class Trainer:
    """Trains a model of a prepared task (`tasks.Task`): batches from `task.batch`, periodic
    `task.evaluate` on validation, and `task.better` picks the checkpoint to keep in `out_dir`; then
    `final_metrics` scores the kept checkpoint. `budget` (`training.budget.TimeBudget`) says when to
    stop for time; `plan` is what its sizing policy decided (a run given no count: how many steps), and
    `cfg` the settings it trains with (the given ones, the plan's count and warmup in them); `clock`
    (seconds) is the budget's clock."""

    def __init__(self, model: PreTrainedModel, task: "Task", data: "TaskData", out_dir: Path, device: str,
                 dist_info: DistInfo, save_dtype: torch.dtype = torch.float32,
                 clock: Callable[[], float] = time.monotonic):
        self.model, self.task, self.data = model.to(device), task, data
        self.out, self.device, self.info, self.save_dtype, self.clock = out_dir, device, dist_info, save_dtype, clock
        self.budget = TimeBudget(data.train_cfg, task, data, device, dist_info, clock)
        self.plan = Plan.given(data.train_cfg)
        self.cfg = self.plan.settings(data.train_cfg)
        self.optimizer = make_optimizer(self.model, self.cfg)
        self.step, self.tokens_seen, self.elapsed = 0, 0, 0.0  # elapsed: training time of all invocations
        self.history: list[dict] = []
        self.best: dict | None = None
        self.commands: list[str] = []  # every invocation that trained this state, in order
        self.init_from: dict | None = None  # what the model started from (`storage.lineage`), as the run began
        self.recent_weights: list[dict] = []  # --average-last: the weights at the last evaluation points (CPU)
        self.window_losses: list[float] = []  # training losses since the last evaluation (its train_loss)
        self.snapshot_index: list[dict] = []  # the weight snapshots kept so far (`storage.snapshots`' entries)
        self.ddp = self.model
        if dist_info.world_size > 1:
            device_ids = [torch.device(device).index] if device.startswith("cuda") else None
            self.ddp = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=device_ids)
        self.precision = resolve_precision(self.cfg.precision, device)  # "auto" -> what this device runs fastest
        self.autocast = autocast(device, self.precision)

    def adopt(self, plan: Plan) -> None:
        """Train by `plan` from here (`training.budget`): its count and warmup in `cfg`, and the dropout
        its rule chose in the model."""
        if plan.dropout is not None and plan.dropout != self.plan.dropout:
            set_dropout(self.model, plan.dropout)
        self.plan, self.cfg = plan, plan.settings(self.data.train_cfg)

    # --- resumable state ------------------------------------------------------------------------
    def state_dict(self) -> dict:
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "step": self.step,
                 "tokens_seen": self.tokens_seen, "elapsed": self.elapsed, "history": self.history,
                 "best": self.best, "commands": self.commands, "init_from": self.init_from,
                 "rng_cpu": torch.get_rng_state(),
                 "train_config": asdict(self.cfg), "model_config": asdict(self.model.config),
                 "world_size": self.info.world_size, "train_rows": training_rows(self.task, self.data),
                 "snapshots": self.recent_weights,  # the --average-last weights, under trainer_state.pt's first key
                 "window_losses": self.window_losses, "snapshot_index": self.snapshot_index,
                 **self.budget.state_dict(self.plan)}
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
        self.model.load_state_dict(current_names(state["model"]))  # a state saved before a module was renamed
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.tokens_seen, self.elapsed = state["step"], state["tokens_seen"], state["elapsed"]
        self.history, self.best = state["history"], state["best"]
        self.commands = state.get("commands", [])
        self.init_from = state.get("init_from")  # a state saved before runs recorded it: None
        self.recent_weights = [current_names(weights) for weights in state.get("snapshots", [])]
        self.window_losses = state.get("window_losses", [])
        self.snapshot_index = state.get("snapshot_index", [])
        self.adopt(self.budget.resumed_plan(state, self.plan))
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
        self.budget.eval_seconds = time.perf_counter() - started

    def save_model(self, model: PreTrainedModel, folder: Path, dtype: torch.dtype | None) -> None:
        """The model in `folder`: config.json + model.safetensors, and for a classifier its classifier.json
        (`data.classifier`); the tokenizer beside them, except in a snapshot (its folder shares one)."""
        model.save_pretrained(folder, dtype=dtype)
        if self.data.classifier is not None:
            self.data.classifier.save_pretrained(folder)
        if folder == self.out:
            self.data.tokenizer.save(self.out / TOKENIZER_NAME)

    def _periodic_metrics(self, model: PreTrainedModel) -> dict:
        """`task.evaluate` on the periodic sample of validation rows, timing it per row."""
        rows = self.budget.sample_rows("val")
        started = time.perf_counter()
        with self.autocast:
            metrics = self.task.evaluate(model, self.data, "val", rows)
        self.budget.row_seconds = (time.perf_counter() - started) / max(1, rows)
        self.model.train()
        return metrics

    def take_snapshot(self) -> None:
        """Keep the current weights in float16 under snapshots/, with their loss on the periodic
        validation sample, and rewrite the index (`storage.snapshots`)."""
        folder = self.out / SNAPSHOTS_DIR
        metrics = self._periodic_metrics(self.model)
        self.save_model(self.model, folder / snapshot_name(self.step), torch.float16)
        self.data.tokenizer.save(folder / TOKENIZER_NAME)
        self.snapshot_index = [s for s in self.snapshot_index if s["step"] != self.step] + [
            {"step": self.step, "tokens": self.tokens_seen, "path": snapshot_name(self.step),
             **{f"val_{k}": v for k, v in metrics.items()}}]
        self.write_snapshot_index()

    def write_snapshot_index(self) -> None:
        if self.snapshot_index:
            write_index(self.out / SNAPSHOTS_DIR, {
                "model_type": self.model.model_type, "max_steps": self.cfg.max_steps, "commands": self.commands,
                "snapshots": self.snapshot_index, "history": self.history})

    # --- what the budget times ------------------------------------------------------------------------
    def time_evaluation(self) -> None:
        """One periodic evaluation, for the rate it measures; the random state as before."""
        with kept_random_state():
            self._periodic_metrics(self.model)

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

    def final_metrics(self, model: PreTrainedModel) -> dict:
        """Finalize and score `model` (the checkpoint kept) on validation and, if the data has one, test,
        each with a progress bar; rows as `final_rows` allows. Returns what metrics.json records,
        `final_eval` saying how many rows of each split were read."""
        metrics, read = {}, {}
        for split in [s for s in ("val", "test") if s in self.data.splits]:
            limit, total = self.budget.final_rows(split), self.task.rows(self.data, split)
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
        a signal, or the time budget (`TimeBudget.out_of_time`)."""
        code = STOPS.index("max_minutes") if self.budget.out_of_time(self.plan, self.step, now, step_seconds) else 0
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
        or a stop signal; returns why it stopped (one of `STOPS`). A run given no max_steps is first
        sized to its time (`TimeBudget.size`). After a signal the state at the current step is saved,
        without an evaluation, so that --resume goes on exactly as if nothing had happened."""
        info, budget = self.info, self.budget
        budget.start(deadline)
        if self.cfg.max_steps is None:
            self.adopt(budget.size(self.plan, self.time_steps, self.time_evaluation, self.adopt,
                                   self.model.config.dropout))
        snapshot_at, planned = self.snapshot_steps_planned(), self.cfg.max_steps
        self.model.train()
        bar = tqdm(total=self.cfg.max_steps, initial=self.step, disable=not info.is_main, dynamic_ncols=True,
                   mininterval=1.0 if os.isatty(2) else 30.0, desc=self.task.name)
        window_start, window_tokens, reason, steps_here = time.perf_counter(), 0, "max_steps", 0
        loop_start = time.perf_counter()
        with stop_requests() as received:
            if self.step == 0 and 0 in snapshot_at:
                self._at_rank_zero(self.take_snapshot)
            while self.step < self.cfg.max_steps:  # the budget may change the count as it goes
                step_seconds = (time.perf_counter() - loop_start) / steps_here if steps_here else 0.0
                now = self.clock()
                code = self.stop_reason(received, now, step_seconds)
                if code:
                    reason = STOPS[code]
                    break
                if budget.deadline is not None and steps_here and info.is_main:  # the ETA: steps or time, first
                    bar.total = budget.expected_steps(self.plan, self.step, now, step_seconds)
                self._take(bar, budget.decay_begins(self.plan, self.step))
                t0 = time.perf_counter()
                lr = lr_at(self.step, self.cfg)
                loss, n_tok = self.optimizer_step(self.step, lr)
                budget.step_taken(self.plan, now, steps_here)
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
                if self.step % self.cfg.eval_every == 0 or self.step == self.cfg.max_steps:
                    self._at_rank_zero(self.evaluate, lambda: bar.write(f"step {self.step}: " + ", ".join(
                        f"{k} {v:.4f}" for k, v in self.history[-1].items() if isinstance(v, float))))
                    window_start, window_tokens = time.perf_counter(), 0
                    self._take(bar, budget.after_evaluation(self.plan, self.step,
                                                            self.best["step"] if info.is_main else None))
                if self.cfg.max_steps != planned:  # cooled down or re-fitted: the snapshots' steps move with the count
                    snapshot_at, planned = self.snapshot_steps_planned(), self.cfg.max_steps
                if self.step in snapshot_at:
                    self._at_rank_zero(self.take_snapshot)
                self.adopt(budget.refit_due(self.plan, self.step, steps_here, sum(s > self.step for s in snapshot_at)))
            bar.close()
            if reason == "interrupted":
                self._at_rank_zero(self.save_state)
                return reason
            if info.is_main:
                # a time limit ends the view with the weights training stopped at (kept in the saved state)
                taken = {s["step"] for s in self.snapshot_index}
                last_frame = snapshot_at and reason == "max_minutes" and self.step not in taken
                if last_frame:
                    self.take_snapshot()
                if not self.history or self.history[-1]["step"] != self.step:
                    self.evaluate()  # saves the state
                elif last_frame:
                    self.save_state()
                if snapshot_at:
                    self.write_snapshot_index()  # with the whole loss curve
        return reason

    def snapshot_steps_planned(self) -> set[int]:
        """The steps whose weights the run keeps, spaced over its count (`snapshot_steps`): again when the
        budget moves the count; those taken stay in the view (`snapshot_index`)."""
        return set(snapshot_steps(self.cfg.max_steps, self.cfg.snapshots))

    def _take(self, bar: tqdm, decided: tuple[Plan, str | None]) -> None:
        """Adopt a budget decision's plan, and write its line (rank 0)."""
        plan, line = decided
        self.adopt(plan)
        if line and self.info.is_main:
            bar.write(line)

    def _at_rank_zero(self, work: Callable[[], object], *then: Callable[[], object]) -> None:
        """Run `work` (and `then`) on rank 0 while the other ranks wait for it."""
        if self.info.is_main:
            work()
            for step in then:
                step()
        if self.info.world_size > 1:
            dist.barrier(device_ids=[torch.device(self.device).index] if self.device.startswith("cuda") else None)
