"""The app's one compute budget (`demo.serving.budget`): a fair, bounded semaphore shared by every tab."""

import threading
import time

import pytest

from demo.serving import BUSY, Busy, ComputeBudget, DemoService, machine_slots
from demo.serving.memory import malloc_trim, trim_when_idle
from demo.tiny import shared_tiny_checkpoints
from demo.views.attention import attention_view
from demo.views.chat import continue_text
from demo.views.sentiment import classify, explain


def test_machine_slots_counts_usable_cores() -> None:
    import os

    assert machine_slots() == len(os.sched_getaffinity(0))


def test_never_more_than_slots_at_once_and_first_come_first_served() -> None:
    budget = ComputeBudget(slots=2, max_waiting=16)
    running, peak, order = 0, 0, []
    lock = threading.Lock()

    def work(i: int) -> None:
        nonlocal running, peak
        with budget.slot():
            with lock:
                running += 1
                peak = max(peak, running)
                order.append(i)
            time.sleep(0.02)
            with lock:
                running -= 1

    threads = []
    for i in range(8):  # started one after another, so they queue up in this order
        threads.append(threading.Thread(target=work, args=(i,)))
        threads[-1].start()
        time.sleep(0.002)
    for t in threads:
        t.join()
    assert peak == 2 and order == list(range(8)) and budget.busy_slots == 0


def test_a_releasing_thread_cannot_jump_the_line() -> None:
    """A chat gives its slot back after each token and asks again at once: a waiting request must
    get the slot first (with `threading.Semaphore` the chat could take it straight back)."""
    budget = ComputeBudget(slots=1, max_waiting=4)
    budget.acquire()  # the chat holds the only slot
    served = threading.Event()

    def other() -> None:
        with budget.slot():
            served.set()

    waiter = threading.Thread(target=other)
    waiter.start()
    while not budget._waiters:  # the other request is in line
        time.sleep(0.001)
    budget.release()
    budget.acquire()  # the chat asks again: it queues behind the other request
    assert served.is_set()
    budget.release()
    waiter.join()


def test_a_full_line_is_told_to_come_back_later() -> None:
    budget = ComputeBudget(slots=1, max_waiting=1)
    budget.acquire()
    waiter = threading.Thread(target=budget.acquire)
    waiter.start()
    while not budget._waiters:
        time.sleep(0.001)
    with pytest.raises(Busy, match="busy"):
        budget.acquire()
    assert "try again" in BUSY
    budget.release()  # hands the slot to the waiter
    waiter.join()
    assert budget.busy_slots == 1


def test_every_tab_draws_on_the_services_budget() -> None:
    service = DemoService(shared_tiny_checkpoints(), device="cpu", slots=1, max_waiting=0)
    service.budget.acquire()  # all compute taken, nobody may wait: every model call is refused
    with pytest.raises(Busy):
        classify(service, "A fine film.")
    with pytest.raises(Busy):
        attention_view(service, "A fine film.", "lm_self")
    with pytest.raises(Busy):
        continue_text(service, "This movie was", max_new_tokens=2)
    service.budget.release()
    assert classify(service, "A fine film.").label in {"negative", "positive"}
    assert service.budget.busy_slots == 0


def test_explanations_never_take_every_slot() -> None:
    service = DemoService(shared_tiny_checkpoints(), device="cpu", slots=2)
    assert service.heavy.slots == 1
    service.heavy.acquire()  # an explanation is running: the next one waits, a classification does not
    started = threading.Event()

    def explaining() -> None:
        started.set()
        explain(service, "A fine film.", "attention")

    waiter = threading.Thread(target=explaining)
    waiter.start()
    started.wait()
    while not service.heavy._waiters:
        time.sleep(0.001)
    assert classify(service, "A fine film.").label in {"negative", "positive"}
    assert waiter.is_alive()  # still waiting for the explanation before it
    service.heavy.release()
    waiter.join()
    assert service.heavy.busy_slots == 0 and service.budget.busy_slots == 0


def test_glibc_malloc_trim_is_found() -> None:
    assert callable(malloc_trim())  # Linux with glibc, as on this machine and on Spaces


def test_the_heap_is_trimmed_only_while_no_model_call_runs() -> None:
    budget = ComputeBudget(slots=1, max_waiting=1)
    seen, trimmed = [], threading.Event()

    def trim(pad: int) -> int:
        seen.append((pad, budget.busy_slots))
        trimmed.set()
        return 1

    budget.acquire()  # a model call runs
    stop = trim_when_idle(budget, every=0.01, trim=trim)
    try:
        time.sleep(0.1)  # ten chances to trim, all passed up
        assert seen == []
        budget.release()
        assert trimmed.wait(10)
        assert seen[0] == (0, 0)
    finally:
        stop.set()
