"""Training and evaluation of the models in `model/` on IMDB (or any text table).

Entry points: `python -m training.run` and `python -m training.evaluate`. A task (what data, what
model, what batches, what metrics) is a subclass of `training.task.Task`. Bad options raise
`UsageError`, bad data `DataError`; the CLIs print either as one line.
"""

from .errors import DataError, UsageError

__all__ = ["DataError", "UsageError"]
