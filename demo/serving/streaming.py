"""Streaming a cumulative state to the browser without stalling the computation behind it.

Gradio pulls a generator handler one item at a time (`next` on a worker thread) and only asks for
the next item once it has rendered and sent the previous one. A chat that generates inside that
generator therefore stops generating while every update is rendered. `run_ahead` moves the source
into a thread of its own, so the model keeps computing while the server renders, and hands over
only the newest state when asked. Each item must be the whole state so far (a `ChatUpdate` is),
so the skipped ones lose nothing. Rendering is Python, though, and holds the GIL that the model's
thread needs between its ops, so each update still costs the model a few ms (docs/log.md).

`paced` slows a stream down to a speed a person can follow (the chat's speed control).
"""

import threading
import time
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")


def run_ahead(states: Iterator[T], interval: float) -> Iterator[T]:
    """Yield the newest item of `states`, computed ahead in a background thread: the first one as
    soon as it exists, then at most one every `interval` seconds, and always the last one.

    An exception in `states` is raised here, after the newest item before it. Closing this
    generator (the visitor pressed Stop, or left) stops `states` at its next item and closes it.
    """
    changed = threading.Condition()
    stop = threading.Event()
    # `waiting`: the consumer waits for a new item (rather than for its interval to pass), so the
    # producer wakes it; otherwise a wake-up per item would only cost the model the GIL.
    box: dict = {"item": None, "fresh": False, "finished": False, "error": None, "waiting": False}

    def produce() -> None:
        try:
            for item in states:
                with changed:
                    box["item"], box["fresh"] = item, True
                    if box["waiting"]:
                        changed.notify()
                if stop.is_set():
                    break
        except BaseException as e:  # handed to the consumer, which raises it
            box["error"] = e
        finally:
            try:
                close = getattr(states, "close", None)
                if close is not None:
                    close()
            finally:  # the consumer waits for this, whatever closing does
                with changed:
                    box["finished"] = True
                    changed.notify()

    threading.Thread(target=produce, name="run-ahead", daemon=True).start()
    last_sent = None
    try:
        while True:
            with changed:
                while not box["finished"]:
                    if box["fresh"]:
                        wait = 0.0 if last_sent is None else last_sent + interval - time.monotonic()
                        if wait <= 0:
                            break
                        changed.wait(wait)  # woken early only if the source finishes
                    else:
                        box["waiting"] = True
                        changed.wait()
                        box["waiting"] = False
                if not box["fresh"]:  # finished, and the last item has been sent
                    if box["error"] is not None:
                        raise box["error"]
                    return
                item, box["fresh"] = box["item"], False
            last_sent = time.monotonic()
            yield item
    finally:
        stop.set()


def paced(states: Iterator[T], per_second: float) -> Iterator[T]:
    """`states` at most `per_second` items a second (0: as they come), so that a learner can watch a
    reply being written token by token. Each item is computed as soon as the one before it is out and
    then waits for its turn, so it shows on time however long it took to compute (up to the interval)."""
    if per_second <= 0:
        yield from states
        return
    interval, due = 1.0 / per_second, None
    for item in states:
        now = time.monotonic()
        if due is not None and due > now:
            time.sleep(due - now)
        due = max(now, due or now) + interval
        yield item
