"""run_ahead: the source runs in its own thread, the consumer gets the newest state, the last one
always, errors after the state before them, and closing stops the source."""

import threading
import time

import pytest

from demo.streaming import run_ahead


def gated(n: int, gate: threading.Event | None = None, produced: list | None = None, closed: threading.Event = None):
    """0..n-1; after item 0, waits for `gate` (when given) before producing the rest."""
    try:
        for i in range(n):
            if produced is not None:
                produced.append(i)
            yield i
            if i == 0 and gate is not None:
                assert gate.wait(5)
    finally:
        if closed is not None:
            closed.set()


def test_the_source_keeps_running_while_the_consumer_is_busy_and_only_the_newest_state_is_sent() -> None:
    gate, produced, closed = threading.Event(), [], threading.Event()
    stream = run_ahead(gated(50, gate, produced, closed), interval=0.0)
    assert next(stream) == 0  # the first state, as soon as it exists
    gate.set()  # while the consumer "renders" item 0, the source produces everything else
    deadline = time.monotonic() + 5
    while len(produced) < 50 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(produced) == 50  # nobody asked for items 1..49, yet they were computed
    assert list(stream) == [49]  # the newest (and last) state; the skipped ones are not sent
    assert closed.wait(1)


def test_at_most_one_state_per_interval_and_always_the_last() -> None:
    def slow(n):
        for i in range(n):
            time.sleep(0.005)
            yield i

    sent, times = [], []
    for item in run_ahead(slow(40), interval=0.05):
        sent.append(item)
        times.append(time.monotonic())
    assert sent[-1] == 39 and sent == sorted(set(sent))
    assert len(sent) < 40  # coalesced
    assert all(b - a >= 0.049 for a, b in zip(times, times[1:-1], strict=False))  # the last may come sooner


def test_an_error_in_the_source_comes_after_the_state_before_it() -> None:
    def failing():
        yield 1
        yield 2
        raise ValueError("boom")

    received = []
    with pytest.raises(ValueError, match="boom"):
        for item in run_ahead(failing(), interval=0.0):
            received.append(item)
    assert received[-1] == 2


def test_closing_the_consumer_stops_and_closes_the_source() -> None:
    produced, closed = [], threading.Event()

    def endless():
        try:
            i = 0
            while True:
                produced.append(i)
                time.sleep(0.002)
                yield i
                i += 1
        finally:
            closed.set()

    stream = run_ahead(endless(), interval=0.0)
    next(stream)
    stream.close()  # as Gradio does when the visitor presses Stop
    assert closed.wait(2)
    count = len(produced)
    time.sleep(0.05)
    assert len(produced) == count  # nothing more is computed
