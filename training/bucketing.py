"""Length-bucketed, token-budget batches.

IMDB reviews run from a dozen to over a thousand tokens. A batch of randomly drawn reviews is padded
to its longest one, so most of the compute goes into padding. Here a batch is a group of reviews of
similar length, and its size is set by a token budget: its padded size (rows x longest row) stays
within `max_tokens`, so short reviews come many to a batch and long ones few.

Training (`BucketSampler`): each epoch is a fixed-seed permutation of all examples, cut into pools,
each pool sorted by length and cut into budget-sized batches, and the batches shuffled. Every
example is in exactly one batch of each epoch, and the batches of step `s` are a pure function of
(seed, s), so a resumed run sees exactly the batches an uninterrupted run would have seen.

Evaluation (`tokenization.batches.length_batches`): one pass in length order, cut by the same
budget (`cut_by_budget`, which a classifier reading reviews uses too).
"""

from collections.abc import Sequence

import numpy as np

from tokenization.batches import cut_by_budget


class BucketSampler:
    """Training batches of similar-length examples within a token budget, epoch after epoch.

    `pool_size` examples (a random sample) are sorted together: larger pools pad less, smaller
    pools keep more randomness in which examples share a batch.
    """

    def __init__(self, lengths: Sequence[int], max_tokens: int, seed: int, pool_size: int = 2048,
                 max_rows: int | None = None):
        if len(lengths) == 0:
            raise ValueError("no examples to batch")
        if max(lengths) > max_tokens:
            raise ValueError(f"the longest example has {max(lengths)} tokens: raise the token budget "
                             f"({max_tokens}) to at least that")
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.max_tokens, self.seed, self.pool_size, self.max_rows = max_tokens, seed, pool_size, max_rows
        self._epochs: list[list[list[int]]] = []  # plans computed so far, a cache of pure functions
        self._starts: list[int] = [0]  # global index of each epoch's first batch

    def epoch(self, epoch: int) -> list[list[int]]:
        """The batches of one epoch, in the order they are used."""
        while len(self._epochs) <= epoch:
            e = len(self._epochs)
            rng = np.random.default_rng([self.seed, e])
            order = rng.permutation(len(self.lengths))
            batches = []
            for first in range(0, len(order), self.pool_size):
                pool = order[first : first + self.pool_size]
                pool = pool[np.argsort(self.lengths[pool], kind="stable")]
                batches += cut_by_budget(pool, self.lengths, self.max_tokens, self.max_rows)
            batches = [batches[j] for j in rng.permutation(len(batches))]
            self._epochs.append(batches)
            self._starts.append(self._starts[-1] + len(batches))
        return self._epochs[epoch]

    def locate(self, index: int) -> tuple[int, int]:
        """Global batch index -> (epoch, position in that epoch)."""
        e = 0
        while True:
            n = len(self.epoch(e))
            if index < self._starts[e] + n:
                return e, index - self._starts[e]
            e += 1

    def batch(self, step: int, rank: int = 0, world_size: int = 1) -> list[int]:
        """The example indices of optimizer step `step` for process `rank`: the processes of a step
        take consecutive batches of the same sequence."""
        epoch, position = self.locate(step * world_size + rank)
        return self._epochs[epoch][position]
