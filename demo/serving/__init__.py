"""Serving: what any view needs to run on a shared machine for anonymous visitors, and nothing of a view.

- `service.DemoService`: the served models (`checkpoint`: one `Checkpoint` record each, loaded once,
  never raising), their tokenizer and weight snapshots (`snapshots`), the device and precision, and
  `compute()`: a model call's turn on the machine's compute budget (`budget`).
- `inputs` reads what visitors send (text, numbers) safely; `errors` turns a failure into the one
  line they are shown (`DemoError`'s own message, or a generic one, logged).
- `streaming` streams a view's states to the browser while the model keeps computing; `replies`
  lets Stop and Clear end a reply from inside its stream.
- `queue` tunes Gradio's queue; `sessions` starts Gradio's sessions lazily; `memory` hands freed
  memory back to the OS while the server idles.

Imports go one way: `demo.views` and `demo.tabs` use this package, which imports neither. Its face
below holds no Gradio, so a view and its tests load without a server; the app imports `sessions`,
the one module that patches Gradio, by name.
"""

from demo.serving.budget import BUSY, Busy, ComputeBudget, machine_slots
from demo.serving.checkpoint import LM, SENTIMENT, SENTIMENT_BACKWARD, Checkpoint
from demo.serving.errors import INTERNAL_ERROR, DemoError, failure, scrub_paths
from demo.serving.inputs import MAX_INPUT_CHARS, read_number, visitor_text
from demo.serving.memory import trim_when_idle
from demo.serving.queue import COMPUTE, start_queue
from demo.serving.replies import Replies
from demo.serving.service import PRECISION_ENV, DemoService, serving_device
from demo.serving.snapshots import SnapshotSet
from demo.serving.streaming import paced, run_ahead

__all__ = [
    "BUSY", "COMPUTE", "INTERNAL_ERROR", "LM", "MAX_INPUT_CHARS", "PRECISION_ENV", "SENTIMENT", "SENTIMENT_BACKWARD",
    "Busy", "Checkpoint", "ComputeBudget", "DemoError", "DemoService", "Replies", "SnapshotSet", "failure",
    "machine_slots", "paced", "read_number", "run_ahead", "scrub_paths", "serving_device", "start_queue",
    "trim_when_idle", "visitor_text",
]
