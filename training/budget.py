"""The time budget of one invocation (--max-minutes) and the sizing policy of a run given no step count
(the laptop preset's): every decision about time the training loop acts on is made here, so that the
loop (`training.trainer`) only steps, evaluates and saves.

Two objects, kept apart: `TimeBudget` is the clock (the deadline, the measured rates), and `Plan` is
what the policy decided (the step count, the warmup, the dropout rule's choice, whether the count may
still change, and `sized`, how it was chosen). A plan is frozen: each decision takes the current plan
and returns a new one, which the trainer adopts (its settings and, for the dropout rule, its model).

What it decides, and when the loop asks:
- before the first step, a run without `max_steps` is sized (`size`): the steps that fit the time
  left, timed on real steps, with the dropout rule of a run that would read its text too often, and
  an evaluation interval that draws its curve in at least `MIN_EVALUATIONS` points;
- before each step, whether the next step still fits (`out_of_time`), and from which step the count
  is final (`decay_begins`);
- after a periodic evaluation under wsd, whether the decay starts early because the held-out loss
  stopped improving (`after_evaluation`), and every `REFIT_EVERY` steps the count re-fitted to the
  steps the run takes (`refit_due`);
- at the end, how many rows the final evaluation reads (`final_rows`).

The run's settings stay as given (`TimeBudget.cfg`); the plan's count, warmup and evaluation interval
replace theirs in the copy the trainer trains with (`Plan.settings`), and `sized`, the record of how the
count was chosen, is saved beside the settings in trainer_state.pt and metrics.json (`sized_to_budget`).
Every duration it plans with is measured in this invocation (steps; periodic evaluations: seconds per
validation row) or, until it evaluates, a resumed run's last rate on the same device and threads.
`clock` (seconds) is read once at the start, around the sizing steps and once before each step (while
re-fitting, after it too, and at each re-fit); tests inject one to make a rank run out of time, or a
step take a known time.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from model import PreTrainedModel

from .distributed import DistInfo, agreed
from .schedules import wsd_decay_start
from .training_args import TrainConfig

if TYPE_CHECKING:
    from .contract import Task, TaskData

FINAL_SHARE = 0.1  # under --max-minutes, the final evaluation gets at most this share of the budget ...
WARMUP_SHARE = 0.25  # a run sized to its minutes warms up for at most this share of its steps (`Plan.capped_warmup`)
MIN_EVALUATIONS = 5  # ... and evaluates at least this many times (`Plan.evaluated_often`)
FINAL_OVERHEAD_S = 5.0  # ... plus this (at most that share) for loading the checkpoint, samples, curve and metrics
SIZING_STEPS = 12  # a run sized to its time budget (`TimeBudget.size`) times this many steps ...
SIZING_UNTIMED = 2  # ... but not its first ones, which allocate memory and pick kernels: slower than the rest
REFIT_EVERY = 10  # under wsd, a sized run re-fits its count every this many steps, until its decay starts
# More passes than this over the same training tokens and a model with no dropout memorises them: on
# 1 MB of Shakespeare the laptop LM's held-out loss stopped improving after 13-15 passes, and a budget
# of 29 passes scored better with dropout 0.1 (1.944 bits/byte, against 2.004 without and 1.994 at 0.2),
# one of 8 passes worse (2.140 against 2.003): docs/experiments/own-text-budgets-2026-12-03. Muennighoff
# et al. 2023 (Scaling Data-Constrained Language Models) find repeated tokens worth less and less after
# about 4 passes, and next to nothing after 16 to 40
REPEAT_PASSES = 16


@dataclass(frozen=True)
class Plan:
    """What the sizing policy decided for one run; every decision returns a new plan (`replace`)."""

    max_steps: int | None  # None: a run left to its time budget, before `TimeBudget.size`
    warmup_steps: int
    eval_every: int
    dropout: float | None = None  # the dropout rule's choice (`REPEAT_PASSES`); None: the model's own
    refitting: bool = False  # sized in this invocation under wsd: the count may change until the decay starts
    sized: dict | None = None  # how the count was chosen (metrics.json's `sized_to_budget`); never mutated

    @classmethod
    def given(cls, cfg: TrainConfig) -> "Plan":
        """The plan of settings as given: their count (None: to be sized), warmup and evaluation interval."""
        return cls(cfg.max_steps, cfg.warmup_steps, cfg.eval_every)

    def settings(self, cfg: TrainConfig) -> TrainConfig:
        """`cfg` with this plan's count, warmup and evaluation interval: what the run trains with (`cfg`
        itself stays as given)."""
        return replace(cfg, max_steps=self.max_steps, warmup_steps=self.warmup_steps, eval_every=self.eval_every)

    def counted(self, steps: int, **record) -> "Plan":
        """This plan with `steps` steps, `record` added to `sized` (the first count kept as `first_max_steps`)."""
        sized = dict(self.sized)
        sized.setdefault("first_max_steps", sized["max_steps"])
        sized.update(max_steps=steps, **record)
        return replace(self, max_steps=steps, sized=sized)

    def capped_warmup(self) -> "Plan":
        """A sized run warms up for at most `WARMUP_SHARE` of the steps it was given: the laptop preset's 50
        warmup steps were all 13 of a 1-minute run on a busy 2-core CPU, which then never trained at its
        peak rate. Applied where the count is sized, and again from the recorded count on resume."""
        return replace(self, warmup_steps=min(self.warmup_steps, max(1, int(self.max_steps * WARMUP_SHARE))))

    def evaluated_often(self) -> "Plan":
        """A sized run evaluates at least `MIN_EVALUATIONS` times: the laptop preset's interval of 200 steps
        suits its ~1,300 steps in 9 minutes, but gave a 2-minute run one evaluation, its training curve a
        single dot. A periodic evaluation of the LM is a quarter of a second, so a shorter interval costs
        next to nothing (`TimeBudget.steps_that_fit` counts it). Applied where the count is sized; a
        resumed run keeps the recorded interval."""
        if not MIN_EVALUATIONS:  # no floor
            return self
        return replace(self, eval_every=min(self.eval_every, max(1, self.max_steps // MIN_EVALUATIONS)))


def set_dropout(model: PreTrainedModel, p: float) -> None:
    """Train `model` from here with dropout `p` on its embeddings, residual branches and feed-forward
    hidden layer (a plan's `dropout`, which the trainer applies); the attention weights keep theirs (as in
    the runs that chose `REPEAT_PASSES`).
    Dropout holds no weights, so this changes nothing a trained model computes; it is written into the
    config, so that config.json says what the model was trained with and a resumed run trains the same."""
    config = model.config
    config.attention_dropout = config.attention_weight_dropout
    config.dropout = p
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = p


def sizing_chose(state: dict) -> tuple[str, ...]:
    """The model config fields a saved run's sizing chose (its dropout rule): a resumed run takes them
    from the state (`TimeBudget.resumed_plan`), whatever its own settings say."""
    return ("dropout", "attention_dropout") if "dropout" in (state.get("sized") or {}) else ()


def sizing_words(cfg: TrainConfig) -> str:
    """What `--print-config` says of a run's step count when the budget will size it."""
    refit = (", re-fitted as it trains until the decay starts, which a held-out loss that stops improving "
             "brings forward)") if cfg.recipe.schedule == "wsd" else ")"
    return f"as many as fit {cfg.max_minutes:g} minutes (timed on the first steps{refit}"


class TimeBudget:
    """The clock of one invocation: its deadline and the rates measured on it; the policy's decisions
    take the run's current `Plan` and return the next.

    With --max-minutes, the loop stops when what is left would not cover the next step and what comes
    after training (a last evaluation, the final one at most `FINAL_SHARE` of the budget or the periodic
    sample if that is more, unless --full-eval, and `overhead_seconds`), so the whole invocation ends by
    the deadline. A run without `max_steps` first sizes them to the time it has (`size`), and under the
    wsd schedule re-fits them to the steps it takes while the rate holds its peak (`refit`), or starts
    the decay when a periodic evaluation finds the held-out loss no better (`cool_down`)."""

    def __init__(self, cfg: TrainConfig, task: "Task", data: "TaskData", device: str, info: DistInfo,
                 clock: Callable[[], float]):
        self.cfg, self.task, self.data, self.device, self.info, self.clock = cfg, task, data, device, info, clock
        self.deadline: float | None = None  # `clock` reading by which the invocation must end (--max-minutes)
        self.eval_seconds = 0.0  # the last periodic evaluation, saving included
        self.row_seconds: float | None = None  # evaluation time per validation row, measured
        self.warm_seconds, self.warm_steps = 0.0, 0  # `clock` time of this invocation's steps after its first

    def start(self, deadline: float | None) -> None:
        """Begin an invocation that must end by `deadline` (a `clock` reading; by default --max-minutes
        from now)."""
        started = self.clock()
        self.deadline = deadline if deadline is not None or self.cfg.max_minutes is None else (
            started + self.cfg.max_minutes * 60)
        self.warm_seconds, self.warm_steps = 0.0, 0

    # --- saved with the run -------------------------------------------------------------------------
    def state_dict(self, plan: Plan) -> dict:
        return {"timing": {"where": self.where(), "row_seconds": self.row_seconds}, "sized": plan.sized}

    def resumed_plan(self, state: dict, plan: Plan) -> Plan:
        """Continue a saved run's plan: its count, its dropout rule and, on the same device and threads,
        its evaluation rate."""
        sized = state.get("sized")
        plan = replace(plan, sized=sized, dropout=sized["dropout"] if sizing_chose(state) else None)
        if self.cfg.max_steps is None:  # sized to the first invocation's budget: a resumed one keeps that schedule
            saved = state["train_config"]
            plan = replace(plan, max_steps=saved["max_steps"], eval_every=saved["eval_every"]).capped_warmup()
        timing = state.get("timing") or {}
        if timing.get("row_seconds") and timing.get("where") == self.where():
            # until this invocation evaluates, plan with the last one's rate on the same device and threads
            # (a resumed stretch may end before its first evaluation); another machine's rate would mislead
            self.row_seconds = timing["row_seconds"]
            self.eval_seconds = self.row_seconds * self.sample_rows("val")
        return plan

    def where(self) -> str:
        """The device, ranks and threads timings are measured on (a saved rate is reused only there)."""
        return f"{self.device} x{self.info.world_size}, {torch.get_num_threads()} threads"

    # --- sizing -------------------------------------------------------------------------------------
    def size(self, plan: Plan, time_steps: Callable[[], tuple[float, float]],
             time_evaluation: Callable[[], object], adopt: Callable[[Plan], None], model_dropout: float) -> Plan:
        """The plan with `max_steps` (None: left to the time budget, as the laptop preset leaves it) fixed to
        the steps that fit between now and the deadline, with the evaluations and snapshots they bring and
        the final evaluation.

        Why a number of steps, fixed before the first one: the learning rate decays to its floor at
        `max_steps`, so the schedule needs its end from the start. A fixed count that is too small
        leaves minutes unused; one too large is stopped by the deadline mid-decay, at a learning rate
        still high. Timing the first steps and then fixing the count keeps the schedule a function of
        the step, as it is in every other run: `--resume` goes on with the count the state recorded,
        and `--max-steps N` (which always wins) trains exactly this run again.

        `time_steps` times real steps (seconds and tokens of one) and `time_evaluation` one periodic
        evaluation, if no rate was measured yet; both leave no trace. With the recipe's
        `repeat_dropout` above the model's `model_dropout`, a count that would read the training tokens
        more than `REPEAT_PASSES` times takes that dropout (the plan given to `adopt`, which turns it on)
        and times the steps again (dropout makes them slower): a small text on a fast machine is otherwise
        memorised long before the time is up. Under DDP the slowest rank's step time counts and rank 0's
        count and choice are everyone's."""
        if self.deadline is None:
            raise ValueError("max_steps=None sizes a run to its time budget: give max_minutes (or max_steps)")
        if self.row_seconds is None and self.info.is_main:  # rank 0 evaluates
            time_evaluation()
        step_seconds, step_tokens = time_steps()
        steps = self.steps_that_fit(step_seconds, self.clock(), None)
        chosen = {}  # what the passes chose, for metrics.json
        passes = self.passes(steps, step_tokens)
        dropout = self.cfg.recipe.repeat_dropout
        if dropout > model_dropout and agreed(int(self.info.is_main and passes > REPEAT_PASSES),
                                              self.device, self.info):
            # the time would read the text more than REPEAT_PASSES times: dropout, and its slower steps
            plan = replace(plan, dropout=dropout)
            adopt(plan)
            chosen = {"passes_without_dropout": round(passes, 1),
                      "step_seconds_without_dropout": round(step_seconds, 4), "dropout": dropout}
            step_seconds, _ = time_steps()
            steps = self.steps_that_fit(step_seconds, self.clock(), None)
        steps = agreed(steps if self.info.is_main else 0, self.device, self.info)
        sized = {"step_seconds": round(step_seconds, 4), "eval_seconds": round(self.planned_eval_seconds(), 3),
                 "budget_s": round(self.deadline - self.clock(), 1), "max_steps": steps, **chosen}
        plan = replace(plan, max_steps=steps, sized=sized, refitting=self.cfg.recipe.schedule == "wsd")
        plan = plan.capped_warmup().evaluated_often()
        if self.info.is_main:
            later = (", re-fitted as it trains until the decay starts (sooner if the held-out loss stops "
                     "improving)") if plan.refitting else ""
            if "dropout" in sized:
                print(f"{sized['passes_without_dropout']:g} passes over the training tokens would fit the time "
                      f"(steps of {sized['step_seconds_without_dropout']:.3f} s): more than {REPEAT_PASSES} "
                      f"memorise them, so dropout {dropout:g} from the first step", flush=True)
            print(f"sized to the time left ({sized['budget_s']:.0f} s): {steps:,} steps of "
                  f"{step_seconds:.3f} s (timed on {SIZING_STEPS - SIZING_UNTIMED}), evaluations of "
                  f"{sized['eval_seconds']:.1f} s every {plan.eval_every}{later}", flush=True)
        return plan

    def passes(self, steps: int, step_tokens: float) -> float:
        """How many times `steps` steps of `step_tokens` tokens read the training tokens (0 when the task
        does not count them)."""
        train_tokens = self.data.description.get("train_tokens")
        return steps * step_tokens / train_tokens if train_tokens else 0.0

    def steps_that_fit(self, step_seconds: float, now: float, eval_every: int | None,
                       snapshots: int | None = None) -> int:
        """How many steps of `step_seconds` fit between `now` and the deadline, leaving time for an
        evaluation every `eval_every` steps (None: the interval is still to be chosen, so every
        `--eval-every` steps but at least `MIN_EVALUATIONS` of them, as `Plan.evaluated_often` will make
        it), one for each snapshot still to take (`snapshots`; by default all of them), the one
        `out_of_time` keeps in hand and the final evaluation (`final_seconds`). At least one."""
        evaluation = self.planned_eval_seconds()
        snapshots = self.cfg.snapshots if snapshots is None else snapshots
        left = self.deadline - now - self.final_seconds() - (snapshots + 2) * evaluation
        fit = left / (step_seconds + evaluation / (eval_every or self.cfg.eval_every))
        if eval_every is None:
            fit = min(fit, (left - MIN_EVALUATIONS * evaluation) / step_seconds)
        return max(1, int(fit))

    # --- while it trains: the wsd count is re-fitted until its decay starts ---------------------------
    def decay_start(self, plan: Plan) -> int:
        """The first step at which wsd's rate falls below its peak, for the plan's count."""
        return wsd_decay_start(plan.warmup_steps, plan.max_steps, self.cfg.recipe.decay_fraction)

    def decay_begins(self, plan: Plan, step: int) -> tuple[Plan, str | None]:
        """Before `step`: once the decay has started the count is final (no more re-fits), with the line
        that says so; else the plan as it is and None."""
        if not (plan.refitting and step >= self.decay_start(plan)):
            return plan, None
        rate = f"{plan.sized['refit_step_seconds']:.3f} s a step" if "refit_step" in plan.sized \
            else "the sizing steps' rate"
        return replace(plan, refitting=False), (
            f"step {step}: the learning rate decays from here to step {plan.max_steps:,} (fitted at {rate})")

    def step_taken(self, plan: Plan, before: float, steps_here: int) -> None:
        """Count a step that began at the `clock` reading `before` (the `steps_here`-th of this
        invocation) in the rate re-fits use, unless it is one of the first, which allocate the
        optimizer's state."""
        if plan.refitting and steps_here >= SIZING_UNTIMED:
            self.warm_seconds, self.warm_steps = self.warm_seconds + self.clock() - before, self.warm_steps + 1

    def can_refit(self, plan: Plan, step: int) -> bool:
        """Whether the count may still change after `step`: sized here under wsd, the decay not begun."""
        return plan.refitting and step < min(self.decay_start(plan), plan.max_steps)

    def after_evaluation(self, plan: Plan, step: int, best_step: int | None) -> tuple[Plan, str | None]:
        """After the periodic evaluation at `step`: when the best held-out loss is still the one of an
        earlier step (`best_step`: rank 0's; None on the other ranks, which do not evaluate) while the
        count can still change, the plan that `cool_down`s, and on rank 0 the line that says so."""
        if not (self.can_refit(plan, step) and agreed(int(best_step not in (None, step)), self.device, self.info)):
            return plan, None
        plan = self.cool_down(plan, step)
        return plan, None if best_step is None else (
            f"step {step}: the held-out loss has not improved since step {best_step:,}: the learning rate "
            f"decays from here to step {plan.max_steps:,}")

    def refit_due(self, plan: Plan, step: int, steps_here: int, snapshots_left: int) -> Plan:
        """Every `REFIT_EVERY` steps of this invocation, while the count can change: the plan `refit` to the
        warm steps' rate (else as it is)."""
        if not (self.warm_steps and steps_here % REFIT_EVERY == 0 and self.can_refit(plan, step)):
            return plan
        return self.refit(plan, step, self.warm_seconds / self.warm_steps, self.clock(), snapshots_left)

    def refit(self, plan: Plan, step: int, step_seconds: float, now: float, snapshots_left: int) -> Plan:
        """The plan's count re-fitted to the time left at `step_seconds` a step, as measured on the steps
        this run has taken (warm, unlike the sizing steps, which ran ~10% slower on a 2-core CPU), with the
        evaluations and `snapshots_left` snapshots still to come. Only while the wsd rate holds its
        peak: every step taken so far had the same rate under the old count and the new one, so the run
        is, weight for weight, the fixed-step run of the count it ends with, and --resume goes on from
        the count the state recorded. The new count never moves the decay's start before the next step
        (a slower machine starts decaying now, and the deadline guards the rest). Under DDP the slowest
        rank's step time counts and rank 0's count is everyone's."""
        step_seconds = agreed(math.ceil(step_seconds * 1e6), self.device, self.info) / 1e6
        fit = step + self.steps_that_fit(step_seconds, now, plan.eval_every, snapshots_left)
        steps = agreed(max(fit, self.decaying_from(plan, step)) if self.info.is_main else 0, self.device, self.info)
        if steps == plan.max_steps:
            return plan
        return plan.counted(steps, refit_step=step, refit_step_seconds=round(step_seconds, 4))

    def decaying_from(self, plan: Plan, step: int) -> int:
        """The fewest steps whose wsd decay starts at or after `step` (the next), so that every step taken
        so far was at the rate of the run that ends there."""
        low, high = step + 1, max(step + 1, plan.max_steps)
        fraction, warmup = self.cfg.recipe.decay_fraction, plan.warmup_steps
        while low < high:
            mid = (low + high) // 2
            low, high = (mid + 1, high) if wsd_decay_start(warmup, mid, fraction) < step else (low, mid)
        return low

    def cool_down(self, plan: Plan, step: int) -> Plan:
        """A sized wsd run whose held-out loss did not improve at a periodic evaluation while the rate
        held its peak: more steps at the peak would only memorise the text (a small corpus on a fast
        machine), so the decay starts at the next step and the run ends after it, before its time is
        up. The best checkpoint is still the one kept; `sized` records where the decay began."""
        return replace(plan.counted(self.decaying_from(plan, step), cooled_down_at=step), refitting=False)

    # --- the deadline -------------------------------------------------------------------------------
    def out_of_time(self, plan: Plan, step: int, now: float, step_seconds: float) -> bool:
        """Whether --max-minutes ends training before `step`: the step, an evaluation it ends with, the
        evaluation of where training stops (and its snapshot, when the run keeps them) and the final
        evaluation would not fit."""
        if self.deadline is None:
            return False
        next_eval = (step + 1) % plan.eval_every == 0 or step + 1 == plan.max_steps
        needed = step_seconds + (self.eval_seconds if next_eval else 0.0) + self.eval_seconds
        if self.cfg.snapshots:  # a run stopped by the deadline also keeps a snapshot of where it stopped
            needed += self.eval_seconds
        return now + needed + self.final_seconds() >= self.deadline

    def expected_steps(self, plan: Plan, step: int, now: float, step_seconds: float) -> int:
        """Where training is expected to stop, seen before `step` (the progress bar's total): the count,
        or the steps that fit the time left, whichever comes first."""
        fit = (self.deadline - now - self.final_seconds()) / step_seconds
        return max(step + 1, min(plan.max_steps, step + int(fit)))

    def sample_rows(self, split: str) -> int:
        """The rows of `split` periodic evaluation reads, and the fewest the final one reads."""
        return min(self.task.periodic_rows(self.data), self.task.rows(self.data, split))

    def planned_eval_seconds(self) -> float:
        """What one periodic evaluation takes: the last one's time, or the measured rate times its rows."""
        return self.eval_seconds or (self.row_seconds or 0.0) * self.sample_rows("val")

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
