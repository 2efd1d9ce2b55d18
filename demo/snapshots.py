"""The "Watch it learn" tab's computation: one training run's weight snapshots answering one prompt.

A run keeps float16 copies of its language model at a few log-spaced steps (`training.run
--snapshots`; the layout is `storage.snapshots`). For the snapshot picked: the prompt's continuation
(greedy, or sampled with a fixed seed, so that moving between snapshots changes only the weights),
the probabilities the model gave the token after the prompt, one layer's attention over prompt and
continuation, and the run's loss at that step. A snapshot becomes a `Checkpoint` record on first use
(and stays loaded), so the Chat and Attention computations run on it unchanged.

The tab shows the snapshots of the LM served (a run folder served with `python -m demo --lm PATH`),
else those shipped in `checkpoints/lm-laptop/snapshots/` (`storage.SHIPPED_SNAPSHOTS`), else it says
there are none. No Gradio here; `demo.tabs.learning` shows it.
"""

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from demo import chat
from demo.attention import AttentionResult, attention_maps
from demo.budget import ComputeBudget
from demo.checkpoint import LM, Checkpoint, Scrubber, load_tokenizer
from demo.inputs import DemoError, read_number
from model import DecoderOnlyLM, load_pretrained
from storage import SHIPPED_SNAPSHOTS, find_snapshots, read_index

NO_SNAPSHOTS = ("No snapshots: the language model served was trained without them. A training run keeps them "
                "(`python -m training.run --task lm --preset laptop ...`); serve it with `python -m demo --lm RUN`.")
MAX_NEW_TOKENS = 24
SAMPLED = {"temperature": 0.8, "top_k": 50, "seed": 0}  # one fixed draw: only the weights change along the slider


@dataclass
class SnapshotSet:
    """A run's snapshots (index entries in step order, each with step, tokens and val_loss), its
    loss curve (`history`: the run's periodic evaluations) and its tokenizer."""

    folder: Path
    location: str  # for display: the folder's last two names, never an absolute path
    entries: list[dict]
    history: list[dict]
    commands: list[str]
    tokenizer: object
    device: str = "cpu"
    _loaded: dict[int, Checkpoint] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def checkpoint(self, i: int) -> Checkpoint:
        """Snapshot `i` as a served model, loaded once (float16 on disk, float32 in memory)."""
        with self._lock:
            if i not in self._loaded:
                entry = self.entries[i]
                model = load_pretrained(self.folder / entry["path"], self.device)
                if not isinstance(model, DecoderOnlyLM):
                    raise DemoError(f"The snapshot at step {entry['step']} is not a language model.")
                self._loaded[i] = Checkpoint(name=LM, location=f"{self.location}/{entry['path']}", status="ready",
                                             model=model, tokenizer=self.tokenizer, config=dict(vars(model.config)))
            return self._loaded[i]


def find(lm: Checkpoint, root: Path, device: str = "cpu") -> SnapshotSet | None:
    """The snapshots beside the LM served, else the shipped ones under `root`; None when neither has
    any that can be read (a broken index is logged by the caller's header as "no snapshots")."""
    for place in (lm.directory, root / SHIPPED_SNAPSHOTS):
        folder = find_snapshots(place) if place is not None else None
        if folder is None:
            continue
        try:
            index = read_index(folder)
        except (OSError, ValueError):
            continue
        tokenizer, _ = load_tokenizer(folder, Scrubber(folder))
        entries = sorted((e for e in index["snapshots"] if (folder / str(e.get("path", ""))).is_dir()),
                         key=lambda e: e["step"])
        if tokenizer is None or not entries:
            continue
        return SnapshotSet(folder, f"{folder.parent.name}/{folder.name}", entries, index.get("history", []),
                           index.get("commands", []), tokenizer, device)
    return None


@dataclass
class LearningView:
    """What snapshot `index` makes of the prompt."""

    index: int
    step: int
    tokens: int
    val_loss: float | None  # on the run's periodic validation sample, at this step
    continuation: str
    next_token: list[tuple[str, float]]  # the model's top probabilities for the token after the prompt
    attention: AttentionResult  # one layer, over the prompt and the continuation
    notices: list[str]


def learning_view(snapshots: SnapshotSet, budget: ComputeBudget,
                  batched: Callable[[], contextlib.AbstractContextManager], index: object, prompt: object,
                  sampled: object = False, layer: object = None) -> LearningView:
    """Snapshot `index` (clamped, with a notice) continuing `prompt`: greedy, or one fixed sampled
    draw; the attention map of `layer` (default: the last) over the prompt and what it wrote. The
    continuation takes the budget's slots token by token (`chat.stream_continuation`), the attention
    pass one slot, in `batched()` precision."""
    notices = []
    i = int(round(read_number(index, 0)))
    if not 0 <= i < len(snapshots.entries):
        notices.append(f"There are {len(snapshots.entries)} snapshots (0 to {len(snapshots.entries) - 1}): "
                       "showing the nearest.")
        i = min(max(i, 0), len(snapshots.entries) - 1)
    entry, ckpt = snapshots.entries[i], snapshots.checkpoint(i)
    settings = SAMPLED if sampled else {"temperature": 0}
    *_, update = chat.stream_continuation(ckpt, budget, prompt, max_new_tokens=MAX_NEW_TOKENS, **settings)
    _, said = chat.generation_config(None, None, MAX_NEW_TOKENS, **settings)  # "0 is greedy": the radio says so
    notices += [n for n in update.notices if n not in said]
    first = update.steps[0] if update.steps else None
    next_token = sorted({first.token: first.prob, **dict(first.alternatives)}.items(), key=lambda kv: -kv[1]) \
        if first else []
    n_layers = ckpt.model.config.n_layer
    layer_i = n_layers - 1 if layer is None else int(round(read_number(layer, n_layers - 1)))
    text = ckpt.tokenizer.decode(list(update.token_ids))  # the prompt as the model read it, and its continuation
    with budget.slot(), batched():
        attention = attention_maps(ckpt, text, "lm_self", layer_i)  # a layer out of range: the nearest, noted
    return LearningView(i, int(entry["step"]), int(entry.get("tokens", 0)), entry.get("val_loss"), update.text,
                        next_token, attention, notices + attention.notices)
