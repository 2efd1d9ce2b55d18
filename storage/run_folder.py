"""A run folder's lifecycle, beside the layout it guards (`layout.py`).

A training run marks its folder with `RUN_IN_PROGRESS` when it starts (`start_run`) and removes the
mark once metrics.json is written (`finish_run`); readers (the app, `push`) refuse a folder that
`is_being_written`. A run stopped by Ctrl-C or SIGTERM keeps the mark (the folder holds no finished
run) and records in it where it stopped and how to go on (`interrupt_run`, read by `run_marker`).
A folder that `run_files` finds anything in holds a run: a new run may continue it (`--resume`) or
replace it (`--overwrite`, which clears `REPLACED_FILES` first), never mix into it. A run given no
folder takes a `new_run_folder`; one that fails before saving its first state leaves none behind
(`removed_on_failure`), and one stopped before it saved anything unmarks its folder (`nothing_saved`).
"""

import contextlib
import itertools
import json
import os
import shutil
import time
from pathlib import Path

from storage.atomic import atomic_write_text
from storage.layout import CONFIG_NAME, CURVE_NAME, IN_PROGRESS_NAME, METRICS_NAME, STATE_NAME, WEIGHTS_NAME
from storage.snapshots import SNAPSHOTS_DIR

RUN_FILES = (IN_PROGRESS_NAME, STATE_NAME, METRICS_NAME, CONFIG_NAME, WEIGHTS_NAME)  # a folder with one holds a run
REPLACED_FILES = (STATE_NAME, METRICS_NAME, CURVE_NAME, CONFIG_NAME, WEIGHTS_NAME)  # and snapshots/: --overwrite


def run_files(folder: Path) -> list[str]:
    """The files of `folder` that show it holds a run (finished, crashed or still running)."""
    return [name for name in RUN_FILES if (folder / name).exists()]


def is_being_written(folder: Path) -> bool:
    """Whether a training run is writing into `folder` (or crashed before finishing)."""
    return (folder / IN_PROGRESS_NAME).exists()


def new_run_folder(task: str) -> Path:
    """A new `runs/<task>-<timestamp>[-n]` folder, created here so that no other run can take it."""
    stamp = f"runs/{task}-{time.strftime('%Y%m%d-%H%M%S')}"
    for n in itertools.count(1):
        folder = Path(stamp if n == 1 else f"{stamp}-{n}")
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            continue


@contextlib.contextmanager
def removed_on_failure(folder: Path, keep: bool):
    """Within: a failure (an exception, Ctrl-C) before the run saved its first state removes `folder`,
    unless `keep` (it existed before, or another process owns it): no empty run folder stays behind."""
    try:
        yield
    except BaseException:
        if not keep and not (folder / STATE_NAME).exists():
            shutil.rmtree(folder, ignore_errors=True)
        raise


def start_run(folder: Path, command: str, replace: bool) -> None:
    """Mark `folder` as being written by `command`, after clearing a replaced run's files."""
    folder.mkdir(parents=True, exist_ok=True)
    if replace:
        for name in REPLACED_FILES:
            (folder / name).unlink(missing_ok=True)
        shutil.rmtree(folder / SNAPSHOTS_DIR, ignore_errors=True)
    marker = {"command": command, "pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    atomic_write_text(folder / IN_PROGRESS_NAME, json.dumps(marker, indent=2) + "\n")


def run_marker(folder: Path) -> dict:
    """What the in-progress mark of `folder` says (the command, and `interrupted` with the step and
    the `--resume` command once stopped); {} when there is none or it cannot be read."""
    try:
        marker = json.loads((folder / IN_PROGRESS_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return marker if isinstance(marker, dict) else {}


def interrupt_run(folder: Path, step: int, resume: str) -> None:
    """Record in the mark that the run was stopped at `step` and is continued by the command `resume`."""
    marker = {**run_marker(folder), "interrupted": {"step": step, "resume": resume,
                                                    "at": time.strftime("%Y-%m-%d %H:%M:%S")}}
    atomic_write_text(folder / IN_PROGRESS_NAME, json.dumps(marker, indent=2) + "\n")


def nothing_saved(folder: Path) -> None:
    """A run stopped before its first save: if this process marked `folder`, the mark goes (there is no
    run to resume)."""
    if run_marker(folder).get("pid") == os.getpid():
        finish_run(folder)


def finish_run(folder: Path) -> None:
    """The run is over and metrics.json written: the folder may be served and pushed."""
    (folder / IN_PROGRESS_NAME).unlink(missing_ok=True)
