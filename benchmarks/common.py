"""What every benchmark shares: where results go, which held-out rows it reads, timing (the median
of repeats after a warm-up) and the closing `--json` step (print the figures, write the same ones).

Benchmarks run as modules from the repository root (`python -m benchmarks.NAME`), so `model`,
`training`, ... import as they do in the tests, with no `sys.path` edits.
"""

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from training.heldout import SEED, VAL_SIZE

__all__ = ["RESULTS", "SEED", "VAL_SIZE", "median_seconds", "timings", "write_json"]

T = TypeVar("T")
RESULTS = Path(__file__).resolve().parent / "results"


def timings(fn: Callable[[], T], repeats: int, warmups: int = 1) -> tuple[T, list[float]]:
    """(the last answer, the seconds of each of `repeats` calls): `warmups` untimed calls first pay
    for lazy allocations and first-call dispatch."""
    for _ in range(warmups):
        answer = fn()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        answer = fn()
        seconds.append(time.perf_counter() - start)
    return answer, seconds


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median seconds of `repeats` calls of `fn()`, after one warm-up."""
    return statistics.median(timings(fn, repeats)[1])


def write_json(result: dict, path: str | Path | None, echo: bool = False) -> None:
    """Print `result` as JSON when `echo`, and write it to `path` (when given) the same way."""
    text = json.dumps(result, indent=2)
    if echo:
        print(text)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text + "\n", encoding="utf-8")
