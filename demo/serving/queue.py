"""Gradio's queue, tuned for a small machine shared by many visitors.

Two limits keep the server responsive (see `demo.serving.budget`): Gradio admits at most
`ACTIVE_REQUESTS` requests at once, all tabs together (one shared `concurrency_id`, the `COMPUTE`
settings every model call's event takes), and queues `QUEUE_SIZE` more; the model calls of the
admitted requests share the machine's compute slots, token by token. A classification, one short
model call, skips Gradio's queue and waits for a slot only.

The rest is what the queue costs the server itself: how often it polls (`poll_by_load`) and how
many past events its monitoring summary reads (`ANALYTICS`). Gradio's own attributes that this
sets are listed, with the tests that notice an upgrade changing them, in docs/gradio_internals.md.
"""

import asyncio
import os

ACTIVE_REQUESTS = 16  # requests in progress at once, all tabs together; they take turns on the compute slots
QUEUE_SIZE = 64  # more requests than this waiting: Gradio answers "queue full, try again later"
COMPUTE = {"concurrency_id": "compute", "concurrency_limit": ACTIVE_REQUESTS}
# After every event, Gradio's queue recomputes a summary of all recorded events (up to 10,000) with
# pandas: a cost per request that grows with the server's age. Every 100 events over the last 1,000
# is plenty for its monitoring page (read when the queue is created).
ANALYTICS = {"GRADIO_ANALYTICS_CACHE_FREQUENCY": "100", "GRADIO_ANALYTICS_MAX_EVENTS": "1000"}
# Gradio's queue looks for new events every 1 ms when free (on Linux) and for progress every 10 ms.
# Each look wakes the server's event loop, which takes the GIL from a generating model between its
# ops: ~1,500 wake-ups a second. While a long request runs (a chat), every 10 ms / 100 ms instead
# (~200 a second): a request queued behind it waits at most 10 ms more to start, and chats stream
# faster (docs/log.md). Otherwise every 1 ms again, so that a lone request (a classification, a
# chat's first token) starts within 1 ms, not 5 on average, and so does the next one after it.
QUEUE_POLL_SECONDS = (0.01, 0.1)
IDLE_POLL_SECONDS = 0.001
LONG_REQUEST_SECONDS = 0.1  # a request running longer slows the poll down (a classification takes ~30 ms)


def start_queue(app) -> None:
    """Give the Gradio app (`gr.Blocks`) its queue, with these limits and this polling."""
    for name, value in ANALYTICS.items():  # the environment's own setting wins
        os.environ.setdefault(name, value)
    app.queue(default_concurrency_limit=ACTIVE_REQUESTS, max_size=QUEUE_SIZE)
    poll_by_load(app._queue)


def poll_by_load(queue) -> None:
    """The queue looks for new events every `QUEUE_POLL_SECONDS` while a request has run longer than
    `LONG_REQUEST_SECONDS`, every `IDLE_POLL_SECONDS` otherwise: Gradio runs each request through
    `process_events`, which this wraps."""
    queue.sleep_when_free, queue.progress_update_sleep_when_free = IDLE_POLL_SECONDS, QUEUE_POLL_SECONDS[1]
    process_events = queue.process_events

    async def process_events_polling_slower(*args, **kwargs):
        slow_down = asyncio.get_running_loop().call_later(LONG_REQUEST_SECONDS, setattr, queue, "sleep_when_free",
                                                          QUEUE_POLL_SECONDS[0])
        try:
            await process_events(*args, **kwargs)
        finally:
            slow_down.cancel()
            if queue.get_active_worker_count() == 0:
                queue.sleep_when_free = IDLE_POLL_SECONDS

    queue.process_events = process_events_polling_slower
