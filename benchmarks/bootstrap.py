"""Bootstrap statistics for the sentiment benchmarks: figures come with a 95% percentile bootstrap
interval (fixed seed), and two classifiers scored on the same rows get a paired bootstrap interval of
their difference (per-row -1/0/1)."""

import numpy as np


def bootstrap_interval(correct, n_resamples: int = 10_000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of per-row scores (accuracy from 0/1 rows, or a
    difference of accuracies from paired -1/0/1 rows)."""
    values = np.asarray(correct, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = np.concatenate([values[rng.integers(0, len(values), size=(min(1000, n_resamples - first), len(values)))]
                            .mean(axis=1) for first in range(0, n_resamples, 1000)])  # 1,000 resamples at a time
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def accuracy_with_interval(correct, **kwargs) -> dict:
    values = np.asarray(correct, dtype=np.float64)
    low, high = bootstrap_interval(values, **kwargs)
    return {"accuracy": float(values.mean()), "ci95": [low, high], "examples": len(values)}
