"""Publishing finished runs, which is not training: model cards and docs/results.md written from
metrics.json (`report`, `python -m publishing.report`), the frontier figure (`frontier`), and the
upload of a finished checkpoint to the Hugging Face Hub (`push`, `python -m publishing.push`).

A task's card text is part of its registration (`training.task.Task.card`); this package fills it in.
"""
