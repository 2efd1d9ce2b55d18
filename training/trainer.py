"""The training loop: AdamW, linear warmup + cosine decay, gradient clipping, periodic evaluation,
best-on-validation checkpoints, resumable state, optional DistributedDataParallel.

Everything a resumed run needs is in one file, `trainer_state.pt` (weights, optimizer, step,
RNG state, history, and the settings that must not change on resume), written atomically; it is
loaded with `weights_only=True`, so it cannot execute code. The learning rate and the data order
are pure functions of the step number.

Under DDP every collective runs on the training device (NCCL has no CPU tensors), and whether to
stop for time is decided by all ranks together, so that they all end at the same step.
"""

import copy
import io
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from model import PreTrainedModel, autocast, resolve_precision
from storage import STATE_NAME, TOKENIZER_NAME, atomic_write

from .recipe import apply_unfreezing, average_state_dicts, param_groups, stlr, training_loss
from .training_args import TrainConfig

if TYPE_CHECKING:
    from .task import Task, TaskData


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup to `lr`, then cosine decay to `lr * min_lr_ratio` at `max_steps`; or the recipe's
    slanted triangular schedule (`training.recipe.stlr`), whose climb is the warmup."""
    if cfg.recipe.schedule == "stlr":
        return stlr(step, cfg.lr, cfg.warmup_steps, cfg.max_steps)
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


def any_rank(flag: bool, device: str, info: DistInfo) -> bool:
    """True on every rank when `flag` is true on at least one (an all-reduce MAX on `device`)."""
    if info.world_size == 1:
        return flag
    t = torch.tensor([float(flag)], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    _wait_released(t)
    return bool(t.item())


def resume_mismatches(state: dict, cfg: TrainConfig, model_config: dict, world_size: int) -> list[str]:
    """What differs between a saved state and this run in the settings a resumed run must keep
    (anything else, e.g. a raised --max-steps, is a new segment recorded in the run's commands):
    the batch and seed fix the data order, the model config the weights' meaning."""
    saved_cfg = state["train_config"]
    found = [f"--{k.replace('_', '-')} {saved_cfg.get(k)} (now {getattr(cfg, k)})"
             for k in ("batch_size", "seed", "max_tokens") if saved_cfg.get(k) != getattr(cfg, k)]
    if state.get("world_size", 1) != world_size:
        found.append(f"{state.get('world_size', 1)} processes (now {world_size})")
    saved_model = state.get("model_config")
    if saved_model is not None:
        found += [f"{k}={saved_model.get(k)!r} (now {v!r})" for k, v in model_config.items() if saved_model.get(k) != v]
    return found


class Trainer:
    """Trains a model of a prepared task (`tasks.Task`): batches from `task.batch`, periodic
    `task.evaluate` on validation, and `task.better` picks the checkpoint to keep in `out_dir`.

    `clock` (seconds) decides --max-minutes; tests inject one to make a rank run out of time."""

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
        self.snapshots: list[dict] = []  # --average-last: the weights at the last evaluation points (CPU)
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
                 "best": self.best, "commands": self.commands, "rng_cpu": torch.get_rng_state(),
                 "train_config": asdict(self.cfg), "model_config": asdict(self.model.config),
                 "world_size": self.info.world_size, "snapshots": self.snapshots}
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
        self.snapshots = state.get("snapshots", [])
        torch.set_rng_state(state["rng_cpu"])
        if "rng_cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state(state["rng_cuda"])

    # --- the loop -------------------------------------------------------------------------------
    def evaluate(self, train_loss: float | None) -> None:
        """Score the model on validation and keep it if it is the best so far. With --average-last N
        the model scored and kept is the mean of the weights at the last N evaluation points (training
        goes on from the current weights)."""
        model = self.model
        if self.cfg.recipe.average_last > 1:
            current = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
            self.snapshots = [*self.snapshots, current][-self.cfg.recipe.average_last :]
            model = copy.deepcopy(self.model)
            model.load_state_dict(average_state_dicts(self.snapshots))
        with self.autocast:
            metrics = self.task.evaluate(model, self.data, "val", full=False)
        self.model.train()
        point = {"step": self.step, "train_loss": train_loss, "lr": lr_at(self.step - 1, self.cfg),
                 "time_s": round(self.elapsed, 1), **{f"val_{k}": v for k, v in metrics.items()}}
        self.history.append(point)
        if self.best is None or self.task.better(metrics, self.best):
            self.best = {**metrics, "step": self.step}
            model.save_pretrained(self.out, dtype=self.save_dtype)
            self.data.tokenizer.save(self.out / TOKENIZER_NAME)
        self.save_state()

    def out_of_time(self, started: float) -> bool:
        """Whether this invocation's --max-minutes are spent, on any rank: all ranks then stop
        before the same step (a rank that stopped alone would leave the others waiting forever)."""
        if self.cfg.max_minutes is None:
            return False
        return any_rank(self.clock() - started >= self.cfg.max_minutes * 60, self.device, self.info)

    def train(self) -> str:
        """Train until max_steps or max_minutes; returns why it stopped."""
        cfg, info = self.cfg, self.info
        started = self.clock()
        self.model.train()
        bar = tqdm(total=cfg.max_steps, initial=self.step, disable=not info.is_main, dynamic_ncols=True,
                   mininterval=1.0 if os.isatty(2) else 30.0, desc=self.task.name)
        losses: list[float] = []
        window_start, window_tokens, reason = time.perf_counter(), 0, "max_steps"
        while self.step < cfg.max_steps:
            if self.out_of_time(started):
                reason = "max_minutes"
                break
            t0 = time.perf_counter()
            lr = lr_at(self.step, cfg)
            for group in self.optimizer.param_groups:
                group["lr"] = lr * group["lr_scale"]
            if cfg.recipe.unfreeze_every:
                apply_unfreezing(self.model, self.step, cfg.recipe.unfreeze_every)
            batch = self.task.batch(self.data, self.step, info.rank, info.world_size)
            batch = {k: v.to(self.device) for k, v in batch.items()}
            with self.autocast:
                loss = training_loss(self.model, self.ddp, batch, cfg.recipe)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
            self.optimizer.step()
            self.step += 1
            n_tok = self.task.tokens(batch) * info.world_size
            self.tokens_seen += n_tok
            window_tokens += n_tok
            losses.append(loss.item())
            self.elapsed += time.perf_counter() - t0
            if info.is_main:
                rate = window_tokens / max(1e-9, time.perf_counter() - window_start)
                bar.set_postfix(loss=f"{losses[-1]:.3f}", lr=f"{lr:.2e}", tok_s=f"{rate:,.0f}", refresh=False)
                bar.update(1)
            if self.step % cfg.eval_every == 0 or self.step == cfg.max_steps:
                if info.is_main:
                    self.evaluate(sum(losses) / len(losses))
                    bar.write(f"step {self.step}: " + ", ".join(
                        f"{k} {v:.4f}" for k, v in self.history[-1].items() if isinstance(v, float)))
                losses, window_start, window_tokens = [], time.perf_counter(), 0
                if info.world_size > 1:  # the other ranks wait for rank 0's evaluation
                    dist.barrier(device_ids=[torch.device(self.device).index] if self.device.startswith("cuda")
                                 else None)
        bar.close()
        if info.is_main and (not self.history or self.history[-1]["step"] != self.step):
            self.evaluate(sum(losses) / len(losses) if losses else None)
        return reason
