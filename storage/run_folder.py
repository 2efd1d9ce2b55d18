"""A run folder's lifecycle, beside the layout it guards (`layout.py`).

A training run marks its folder with `RUN_IN_PROGRESS` when it starts (`start_run`) and removes the
mark once metrics.json is written (`finish_run`); readers (the app, `push`) refuse a folder that
`is_being_written`. A folder that `run_files` finds anything in holds a run: a new run may continue
it (`--resume`) or replace it (`--overwrite`, which clears `REPLACED_FILES` first), never mix into it.
"""

import json
import os
import time
from pathlib import Path

from storage.atomic import atomic_write_text
from storage.layout import CONFIG_NAME, CURVE_NAME, IN_PROGRESS_NAME, METRICS_NAME, STATE_NAME, WEIGHTS_NAME

RUN_FILES = (IN_PROGRESS_NAME, STATE_NAME, METRICS_NAME, CONFIG_NAME, WEIGHTS_NAME)  # a folder with one holds a run
REPLACED_FILES = (STATE_NAME, METRICS_NAME, CURVE_NAME, CONFIG_NAME, WEIGHTS_NAME)  # removed by --overwrite


def run_files(folder: Path) -> list[str]:
    """The files of `folder` that show it holds a run (finished, crashed or still running)."""
    return [name for name in RUN_FILES if (folder / name).exists()]


def is_being_written(folder: Path) -> bool:
    """Whether a training run is writing into `folder` (or crashed before finishing)."""
    return (folder / IN_PROGRESS_NAME).exists()


def start_run(folder: Path, command: str, replace: bool) -> None:
    """Mark `folder` as being written by `command`, after clearing a replaced run's files."""
    folder.mkdir(parents=True, exist_ok=True)
    if replace:
        for name in REPLACED_FILES:
            (folder / name).unlink(missing_ok=True)
    marker = {"command": command, "pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    atomic_write_text(folder / IN_PROGRESS_NAME, json.dumps(marker, indent=2) + "\n")


def finish_run(folder: Path) -> None:
    """The run is over and metrics.json written: the folder may be served and pushed."""
    (folder / IN_PROGRESS_NAME).unlink(missing_ok=True)
