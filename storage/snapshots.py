"""A run's weight snapshots, for the app's "watch it learn" view: where they live and their index.

    <run>/snapshots/
        index.json            SNAPSHOT_INDEX   the snapshots (step, tokens seen, validation loss) and the
                                               run's loss curve, rewritten as the run goes
        tokenizer.json                         the run's tokenizer: the folder is self-contained
        step-000123/          snapshot_name()  a checkpoint folder (config.json + float16 model.safetensors)

A run keeps a few (`training.run --snapshots`, log-spaced over its steps: the early ones change the
most); the app reads them (`demo.serving.snapshots`): those of the LM it serves, else the set shipped in
`checkpoints/<SHIPPED_SNAPSHOTS>/snapshots/`, a copy of a run's folder with as many snapshots as fit
a size budget (`python -m publishing.snapshots`). Training writes, the app reads, and both spell the layout
through this module.
"""

import json
import os
from pathlib import Path

from storage.atomic import atomic_write_text

SNAPSHOTS_DIR = "snapshots"
SNAPSHOT_INDEX = "index.json"
SHIPPED_SNAPSHOTS = "lm-laptop"  # checkpoints/lm-laptop/snapshots/: the set the app shows when its LM has none


def snapshot_name(step: int) -> str:
    return f"step-{step:06d}"


def find_snapshots(path: str | os.PathLike) -> Path | None:
    """The snapshots folder at `path`: `path` itself when it holds an index, else its `snapshots/`;
    None when neither does."""
    path = Path(path)
    for folder in (path, path / SNAPSHOTS_DIR):
        if (folder / SNAPSHOT_INDEX).is_file():
            return folder
    return None


def read_index(folder: str | os.PathLike) -> dict:
    """A snapshots folder's index: {"snapshots": [{"step", "tokens", "val_loss", ...}, ...], "history":
    [the run's evaluations], ...}. Raises OSError or ValueError when it cannot be read."""
    index = json.loads((Path(folder) / SNAPSHOT_INDEX).read_text(encoding="utf-8"))
    if not isinstance(index, dict) or not isinstance(index.get("snapshots"), list):
        raise ValueError(f"{Path(folder) / SNAPSHOT_INDEX} is not a snapshot index")
    return index


def write_index(folder: str | os.PathLike, index: dict) -> None:
    """Write a snapshots folder's index (atomically: the app may be reading it)."""
    atomic_write_text(Path(folder) / SNAPSHOT_INDEX, json.dumps(index, indent=1) + "\n")
