"""What every benchmark shares: where results go, which held-out rows it reads, timing (the median
of repeats after a warm-up) and the closing `--json` step (print the figures, write the same ones).

Benchmarks run as modules from the repository root (`python -m benchmarks.NAME`), so `model`,
`training`, ... import as they do in the tests, with no `sys.path` edits.
"""

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tokenization import clean_text
from training.data import validation_rows
from training.heldout import SEED, VAL_SIZE

__all__ = ["RESULTS", "SEED", "VAL_SIZE", "WORDS", "median_seconds", "speed_arguments", "speed_review", "timings",
           "write_json"]

T = TypeVar("T")
RESULTS = Path(__file__).resolve().parent / "results"
WORDS = 200  # the speed benchmarks' review length: a typical IMDB review


def speed_arguments(name: str, doc: str, argv: list[str] | None) -> argparse.Namespace:
    """The options of the explanation-speed benchmarks: both checkpoints, the data, repeats, --json."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentiment", default="checkpoints/sentiment")
    parser.add_argument("--lm", default="checkpoints/lm")
    parser.add_argument("--data-dir", default="../shared/data/imdb")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=str(RESULTS / f"{name}.json"))
    return parser.parse_args(argv)


def speed_review(data_dir: str) -> str:
    """The first held-out review of at least WORDS words, cut to WORDS: what the speed benchmarks time."""
    review = next(t for t in validation_rows(data_dir, VAL_SIZE, SEED)["text"] if len(t.split()) >= WORDS)
    return " ".join(clean_text(review).split()[:WORDS])


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
