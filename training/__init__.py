"""Training and evaluation of the models in `model/` on IMDB (or any text table).

Entry points: `python -m training.run`, `python -m training.evaluate` and `python -m training.evidence`
(short training text from a classifier's own attributions, for `--evidence`). A task (what data, what
model, what batches, what metrics) is a subclass of `training.task.Task`. Bad options raise
`UsageError`, bad data `DataError`; the CLIs print either as one line.
"""

from .errors import DataError, UsageError

__all__ = ["DataError", "UsageError"]
