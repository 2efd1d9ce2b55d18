"""Training and evaluation of the models in `model/` on IMDB, on your own text (`--data`: `own_text`, with a
tokenizer of its own, `tokenizer_choice`), or on any text table.

Entry points: `python -m training.run`, `python -m training.evaluate`, `python -m training.sample` and
`python -m training.evidence` (short training text from a classifier's own attributions, for
`--evidence`). A task (what data, what model, what batches, what metrics) is a subclass of
`training.contract.Task`. Bad options raise `UsageError`, bad data `DataError`; the CLIs print either as one line.

OpenMP's threads wait for each other by sleeping, not spinning (`OMP_WAIT_POLICY=PASSIVE`, unless
set otherwise), when this package is imported before torch, as the CLIs import it: on a 2-core
machine with anything else running (a browser, another job), spinning threads that wait for a
descheduled one made a training step of the laptop LM 4.5x slower (2,586 against 569 ms, measured
in docs/experiments/laptop-2026-11-25). OpenMP reads the variable once, when torch loads it.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .errors import DataError, UsageError  # noqa: E402

__all__ = ["DataError", "UsageError"]
