"""`TrainConfig`: the optimisation settings of one run (as HF's `training_args.py`), in its own module so
that the task contract (`training.tasks`) and the loop (`training.trainer`) both read it without
importing each other."""

from dataclasses import dataclass, field

from model import PRECISIONS

from .errors import UsageError
from .recipe import Recipe


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = 16
    max_steps: int | None = 1000  # None: as many as fit max_minutes (`training.budget.TimeBudget.size`)
    lr: float = 1e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 100
    eval_batches: int = 20  # periodic evaluation uses this many batches/windows; the final one, all
    max_minutes: float | None = None  # this invocation, start-up and final evaluation included (resumed: again)
    full_eval: bool = False  # the final evaluation reads every validation row even past max_minutes
    snapshots: int = 0  # weight snapshots kept at log-spaced steps (the app's "watch it learn" view)
    seed: int = 1337
    max_tokens: int | None = None  # encoder-decoder tasks: length-bucketed batches of this many padded tokens
    precision: str = "auto"  # auto | fp32 | bf16 (model.precision): bf16 autocast where the device has it
    recipe: Recipe = field(default_factory=Recipe)  # fine-tuning options (training.recipe), all off by default

    def __post_init__(self):
        if self.max_steps is None and self.max_minutes is None:
            raise UsageError("no --max-steps and no --max-minutes: give the steps, or the minutes to fit them to")
        for name in ("batch_size", "max_steps", "eval_every", "eval_batches"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise UsageError(f"--lr must be > 0, got {self.lr}")
        if self.warmup_steps < 0:
            raise UsageError(f"--warmup-steps must be >= 0, got {self.warmup_steps}")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise UsageError(f"--max-minutes must be > 0, got {self.max_minutes}")
        if self.snapshots < 0:
            raise UsageError(f"--snapshots must be >= 0, got {self.snapshots}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UsageError(f"--max-tokens must be >= 1, got {self.max_tokens}")
        if self.precision not in PRECISIONS:
            raise UsageError(f"--precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
