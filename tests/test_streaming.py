"""run_ahead: the source runs in its own thread, the consumer gets the newest state, the last one
always, errors after the state before them, and closing stops the source. paced: at most so many
items a second, on a clock the test controls."""

import threading
import time

import pytest

from demo.serving import paced, run_ahead, streaming


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


class Clock:
    """`time.monotonic` and `time.sleep` for `demo.serving.streaming`: time passes only when slept or spent."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds


def test_paced_items_come_at_most_so_many_a_second_and_on_time(monkeypatch) -> None:
    clock = Clock()
    monkeypatch.setattr(streaming, "time", clock)

    def computed(costs):  # each item takes its cost in seconds to compute
        for i, cost in enumerate(costs):
            clock.now += cost
            yield i

    shown = [(item, clock.now) for item in paced(computed([0.01, 0.01, 0.3, 0.01, 0.01]), per_second=5)]
    assert [item for item, _ in shown] == [0, 1, 2, 3, 4]
    times = [t for _, t in shown]
    # every 0.2 s; the slow third item shows as soon as it is ready, and the next ones keep 0.2 s from it
    assert times == pytest.approx([0.01, 0.21, 0.51, 0.71, 0.91])


def test_paced_at_speed_zero_is_as_fast_as_the_source(monkeypatch) -> None:
    clock = Clock()
    monkeypatch.setattr(streaming, "time", clock)
    assert list(paced(iter(range(5)), per_second=0)) == list(range(5)) and clock.now == 0
