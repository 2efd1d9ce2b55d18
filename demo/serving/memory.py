"""Handing freed memory back to the OS while the server idles.

Every review and prompt gives the models' tensors new shapes, and glibc's malloc keeps the memory
they free for later reuse rather than returning it. The server's resident memory therefore crept
up under mixed requests (+11% from the 100th to the 1,000th request of `benchmarks.app_soak`). It
was no leak: run in-process, each 100 mixed requests added 56-89 MiB, and `malloc_trim(0)` took it
back to the same 663-665 MiB every time. So while the server runs, a background thread calls it
every `TRIM_SECONDS` when no model call is running (a model call's allocations would wait for it).
"""

import ctypes
import threading
from collections.abc import Callable

from demo.serving.budget import ComputeBudget

TRIM_SECONDS = 10.0


def malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library has none (macOS, musl)."""
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def trim_when_idle(budget: ComputeBudget, every: float = TRIM_SECONDS, trim=None) -> threading.Event | None:
    """Start a daemon thread that trims the heap every `every` seconds when `budget` has no slot in
    use. Returns the event that stops it, or None when there is nothing to call."""
    trim = trim or malloc_trim()
    if trim is None:
        return None
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every):
            if budget.busy_slots == 0:
                trim(0)

    threading.Thread(target=run, name="malloc-trim", daemon=True).start()
    return stop
