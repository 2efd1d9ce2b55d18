"""The checkpoint folder: its file names, the one atomic writer, where a checkpoint comes from (and what a
fine-tuned one started from), a run folder's lifecycle (the in-progress mark, which files mean a run)
and its weight snapshots.

A low-level package that imports nothing of this project, so `model`, `tokenization`, `training`,
`demo` and `benchmarks` can all use it and the dependencies still point one way.
"""

from storage.atomic import atomic_write, atomic_write_text
from storage.hub import resolve_checkpoint
from storage.layout import (
    CARD_NAME,
    CLASSIFIER_NAME,
    CONFIG_NAME,
    CURVE_NAME,
    IN_PROGRESS_NAME,
    METRICS_NAME,
    STATE_NAME,
    TOKENIZER_NAME,
    WEIGHTS_NAME,
)
from storage.lineage import chain, lineage, record_lineage, tokens_in_all
from storage.run_folder import (
    REPLACED_FILES,
    RUN_FILES,
    finish_run,
    interrupt_run,
    is_being_written,
    new_run_folder,
    nothing_saved,
    removed_on_failure,
    run_files,
    run_marker,
    start_run,
)
from storage.snapshots import (
    SHIPPED_SNAPSHOTS,
    SNAPSHOT_INDEX,
    SNAPSHOTS_DIR,
    find_snapshots,
    read_index,
    snapshot_name,
    write_index,
)

__all__ = [
    "CARD_NAME", "CLASSIFIER_NAME", "CONFIG_NAME", "CURVE_NAME", "IN_PROGRESS_NAME", "METRICS_NAME", "STATE_NAME",
    "TOKENIZER_NAME", "WEIGHTS_NAME", "REPLACED_FILES", "RUN_FILES", "atomic_write", "atomic_write_text",
    "finish_run", "interrupt_run", "is_being_written", "new_run_folder", "nothing_saved", "removed_on_failure",
    "resolve_checkpoint", "run_files", "run_marker", "start_run",
    "SHIPPED_SNAPSHOTS", "SNAPSHOT_INDEX", "SNAPSHOTS_DIR", "find_snapshots", "read_index", "snapshot_name",
    "write_index", "chain", "lineage", "record_lineage", "tokens_in_all",
]
