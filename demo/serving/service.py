"""`DemoService`: the served models, loaded once, and the compute budget every request draws on.

No Gradio here, so every view can be unit tested, benchmarked and reused without a server. The
service knows no view: each view's computation (`demo.views`) takes the service, reads what it
needs from it (a model, the tokenizer, the snapshots) and runs its model calls inside
`service.compute()`, which waits for a compute slot and sets the precision of batched passes.

Robustness rules every view follows, because the caller is an anonymous web visitor:
- Input text is cleaned (`demo.serving.inputs.visitor_text`): non-strings, lone surrogates and
  absurd lengths are handled up front; numbers are read with `read_number` (no NaN, no ±inf).
- Anything the visitor can fix (empty input, a missing checkpoint) raises `DemoError` with a
  sentence meant for them; the UI shows it as a one-line notice (`failure`), never as an error box.
- Out-of-range settings are clamped and the clamp is explained in `notices`, never raised.
- Messages never contain absolute file system paths.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch

from demo.serving import snapshots
from demo.serving.budget import ComputeBudget, machine_slots
from demo.serving.checkpoint import (
    LM,
    SENTIMENT,
    SENTIMENT_BACKWARD,
    Checkpoint,
    Scrubber,
    load_checkpoint,
    load_tokenizer,
    pair_readers,
)
from demo.serving.errors import DemoError
from model import autocast, resolve_device, resolve_precision

MAX_WAITING = 64  # requests waiting for a compute slot before new ones are told "busy"
MAX_HEAVY_WAITING = 8  # explanations waiting for their turn before new ones are told "busy"
PRECISION_ENV = "DEMO_PRECISION"  # the Space's override of `--precision` (auto | fp32 | bf16)


def serving_device(choice: str | None) -> tuple[str, str | None]:
    """`model.resolve_device`, except that CUDA asked for and missing falls back to CPU with a
    notice instead of an error, so the same command works on a CPU Space and a GPU one."""
    choice = (choice or "auto").lower()
    if choice.startswith("cuda") and not torch.cuda.is_available():
        return "cpu", "CUDA was requested but is not available: running on CPU."
    return resolve_device(choice), None


class DemoService:
    """Loads the checkpoints once and serves every view. Thread-safe: models are only read (eval
    mode, no dropout) and every request builds its own tensors, caches and RNG."""

    def __init__(self, checkpoints: str | Path, device: str = "auto", slots: int | None = None,
                 max_waiting: int = MAX_WAITING, precision: str | None = None, models: dict[str, str] | None = None):
        """`models`: {LM or SENTIMENT: a run folder, checkpoint folder or Hub id} served instead of the
        one in `checkpoints` (`python -m demo --lm PATH --sentiment PATH`), each with the tokenizer
        beside its weights."""
        self.root, models = Path(checkpoints), models or {}
        self.device, device_notice = serving_device(device)
        # bfloat16 for the batched passes (classifier, attention maps, attributions, logit lens) where the
        # hardware multiplies it natively; generation's single-row steps stay float32 (bf16 gains nothing there)
        self.precision = resolve_precision(precision or os.environ.get(PRECISION_ENV, "auto"), self.device)
        self.notices = [device_notice] if device_notice else []
        self.budget = ComputeBudget(slots or machine_slots(), max_waiting)
        # explanations take seconds (integrated gradients on a 1,024-token review: tens of seconds on
        # one busy core): they never hold every slot, so chats and classifications keep moving
        self.heavy = ComputeBudget(max(1, self.budget.slots - 1), MAX_HEAVY_WAITING)
        if not self.root.is_dir():
            self.notices.append(f"No checkpoints directory `{self.root.name}/` found.")
        shared_tokenizer, _ = load_tokenizer(self.root, Scrubber(self.root))
        self.lm = load_checkpoint(self.root, LM, self.device, shared_tokenizer, models.get(LM))
        self.sentiment = load_checkpoint(self.root, SENTIMENT, self.device, shared_tokenizer, models.get(SENTIMENT))
        # the verdict's second reader (`pair_readers`): beside a sentiment model named on the command line,
        # only one named with it, never the checkpoints folder's partner of another model
        if SENTIMENT in models and SENTIMENT_BACKWARD not in models:
            self.sentiment_backward = Checkpoint(SENTIMENT_BACKWARD, "", message="none named beside --sentiment")
        else:
            self.sentiment_backward = pair_readers(self.sentiment, load_checkpoint(
                self.root, SENTIMENT_BACKWARD, self.device, shared_tokenizer, models.get(SENTIMENT_BACKWARD)))
        # the Tokenizer tab shows the tokenizer of a model named on the command line, else the shared one,
        # else whichever a model brought
        named = [c.tokenizer for c in self.checkpoints if c.name in models]
        self.tokenizer = next((t for t in [*named, shared_tokenizer, self.lm.tokenizer, self.sentiment.tokenizer]
                               if t is not None), None)
        self.snapshots = snapshots.find(self.lm, self.root, self.device)  # the "watch it learn" tab's, or None

    @property
    def checkpoints(self) -> list[Checkpoint]:
        """The served models; the backward reader unless there is none to serve (a missing one is no fault)."""
        return [self.lm, self.sentiment] + [self.sentiment_backward] * (self.sentiment_backward.status != "missing")

    @property
    def readers(self) -> list[Checkpoint]:
        """The classifiers whose probabilities the sentiment verdict averages: the sentiment model, and
        its backward reader when one is paired with it."""
        return [self.sentiment] + [self.sentiment_backward] * self.sentiment_backward.ready

    def checkpoint(self, name: object) -> Checkpoint:
        """The served model `name` (LM or SENTIMENT); any other name, as a visitor may send, is a `DemoError`."""
        if name not in (LM, SENTIMENT):
            raise DemoError(f"Unknown model {str(name)[:20]!r}: choose {LM!r} or {SENTIMENT!r}.")
        return self.lm if name == LM else self.sentiment

    def device_description(self) -> str:
        if self.device == "cuda":
            return f"CUDA ({torch.cuda.get_device_name(0)})"
        n = torch.get_num_threads()
        return f"CPU ({n} thread{'s' if n > 1 else ''})"

    @contextmanager
    def compute(self, heavy: bool = False, batched: bool = False) -> Iterator[None]:
        """One model call's turn on the machine: a slot of the shared budget, first one of the
        explanations' fewer slots when `heavy` (seconds of work), and bfloat16 autocast when `batched`
        and the service runs in "bf16" (a pass over many positions at once; a recomputation checked
        against float32 or a generation step is not batched)."""
        with self.heavy.slot() if heavy else nullcontext(), self.budget.slot():
            with autocast(self.device, self.precision) if batched else nullcontext():
                yield
