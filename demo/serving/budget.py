"""One compute budget for the whole app, sized to the machine.

Gradio's `concurrency_limit` counts *requests*, and a streamed chat holds its request for many
seconds: with a per-handler limit, a 2-core Space either runs 20 jobs at once (each one slowed
down by the others) or makes a short sentiment request wait behind whole chats. Here every model
call, whichever tab it comes from, takes one of `slots` compute slots for one unit of work (one
generated token, one classification), and the slots are handed out first come, first served. A
chat gives its slot back between tokens, so a sentiment request waits for a few token steps, not
for whole chats. When too many are already waiting, the request is refused at once with a
friendly "busy" message rather than left in a queue that cannot drain.
"""

import os
import threading
from collections import deque
from contextlib import contextmanager

from demo.serving.errors import DemoError

BUSY = "The app is busy right now (many visitors at once). Please try again in a minute."


class Busy(DemoError):
    """Too many requests are waiting for compute: try again later."""


def machine_slots() -> int:
    """Compute slots for this machine: one per CPU core this process may use (the models run one
    torch thread per request, see `demo.app.main`); a GPU is shared the same way."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class ComputeBudget:
    """A fair (FIFO) counting semaphore with a bound on the number of waiters.

    `threading.Semaphore` lets a thread that just released a slot take it straight back, so a
    streaming chat could starve everybody else; here `release` hands the slot to the longest
    waiter directly.
    """

    def __init__(self, slots: int, max_waiting: int):
        if slots < 1:
            raise ValueError(f"a budget needs at least 1 slot, got {slots}")
        self.slots = slots
        self.max_waiting = max_waiting
        self._free = slots
        self._waiters: deque[threading.Event] = deque()
        self._lock = threading.Lock()

    @property
    def busy_slots(self) -> int:
        with self._lock:
            return self.slots - self._free

    def acquire(self) -> None:
        """Take a slot, waiting in line for one; raise `Busy` when the line is full."""
        with self._lock:
            if self._free and not self._waiters:
                self._free -= 1
                return
            if len(self._waiters) >= self.max_waiting:
                raise Busy(BUSY)
            turn = threading.Event()
            self._waiters.append(turn)
        turn.wait()  # `release` gives its slot to us: no need to take it again

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().set()
            else:
                self._free += 1

    @contextmanager
    def slot(self):
        self.acquire()
        try:
            yield
        finally:
            self.release()
