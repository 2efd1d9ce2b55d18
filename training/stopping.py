"""Stopping a run cleanly: Ctrl-C (SIGINT) and SIGTERM end the training loop at the end of a step, with
a resumable state saved (`stop_requests`), and outside the loop end the run as Ctrl-C does
(`sigterm_as_interrupt`). Signals reach the main thread only: elsewhere (a test's worker thread)
nothing is installed.
"""

import contextlib
import signal
import sys
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def stop_requests():
    """Within: SIGINT (Ctrl-C) and SIGTERM are recorded in the list yielded instead of stopping the
    process, so the loop ends its step, saves a resumable state and returns; a second one raises
    KeyboardInterrupt at once (stop without saving). Signals reach the main thread only: elsewhere
    (a test's worker thread) nothing is installed."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def request(signum, frame):
        if received:
            raise KeyboardInterrupt
        received.append(signum)
        print(f"\n{signal.Signals(signum).name}: saving at the end of this step (again: stop without saving)",
              file=sys.stderr, flush=True)

    previous = {sig: signal.signal(sig, request) for sig in STOP_SIGNALS}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within: SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so that a run stopped outside its
    training loop (reading the data, the final evaluation) ends the way Ctrl-C ends it (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
