"""A training run's weight snapshots, found beside the served language model and loaded on demand.

A run keeps float16 copies of its language model at a few log-spaced steps (`training.run
--snapshots`; the layout is `storage.snapshots`). The service finds them once, at start: those of
the LM served (a run folder served with `python -m demo --lm PATH`), else those shipped in
`checkpoints/lm-laptop/snapshots/` (`storage.SHIPPED_SNAPSHOTS`), else none. A snapshot becomes a
`Checkpoint` record on first use (and stays loaded), so every view's computation runs on it
unchanged (`demo.views.learning`).
"""

import threading
from dataclasses import dataclass, field
from pathlib import Path

from demo.serving.checkpoint import LM, Checkpoint, Scrubber, load_tokenizer
from demo.serving.errors import DemoError
from model import DecoderOnlyLM, load_pretrained
from storage import SHIPPED_SNAPSHOTS, find_snapshots, read_index


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
    heads: dict[int, tuple] = field(default_factory=dict)  # per snapshot, what its heads do (computed once)
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
