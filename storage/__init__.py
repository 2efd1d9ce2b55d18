"""The checkpoint folder: its file names, the one atomic writer, and where a checkpoint comes from.

A low-level package that imports nothing of this project, so `model`, `tokenization`, `training`,
`demo` and `benchmarks` can all use it and the dependencies still point one way.
"""

from storage.atomic import atomic_write, atomic_write_text
from storage.hub import resolve_checkpoint
from storage.layout import (
    CARD_NAME,
    CONFIG_NAME,
    CURVE_NAME,
    IN_PROGRESS_NAME,
    METRICS_NAME,
    STATE_NAME,
    TOKENIZER_NAME,
    WEIGHTS_NAME,
)

__all__ = [
    "CARD_NAME", "CONFIG_NAME", "CURVE_NAME", "IN_PROGRESS_NAME", "METRICS_NAME", "STATE_NAME",
    "TOKENIZER_NAME", "WEIGHTS_NAME", "atomic_write", "atomic_write_text", "resolve_checkpoint",
]
