"""Token-budget batches: each example once per epoch, the budget held, the order a pure function."""

import random

import pytest

from tokenization.batches import cut_by_budget, length_batches
from training.bucketing import BucketSampler

LENGTHS = [random.Random(0).randint(5, 300) for _ in range(1000)]


def padded(batch: list[int], lengths=LENGTHS) -> int:
    return len(batch) * max(lengths[i] for i in batch)


@pytest.mark.parametrize("pool_size", [64, 2048])
def test_every_example_exactly_once_per_epoch_within_the_budget(pool_size):
    sampler = BucketSampler(LENGTHS, max_tokens=1200, seed=3, pool_size=pool_size)
    for epoch in range(3):
        batches = sampler.epoch(epoch)
        assert sorted(i for b in batches for i in b) == list(range(len(LENGTHS)))
        assert all(padded(b) <= 1200 for b in batches)
        # greedy cutting: a batch ends only when its pool's next example would break the budget
        assert sum(map(len, batches)) / len(batches) > 1200 / 300


def test_steps_walk_through_the_epochs_in_order():
    sampler = BucketSampler(LENGTHS, max_tokens=1000, seed=1)
    n0, n1 = len(sampler.epoch(0)), len(sampler.epoch(1))
    assert [sampler.batch(s) for s in range(n0 + n1)] == sampler.epoch(0) + sampler.epoch(1)
    assert sampler.epoch(0) != sampler.epoch(1)  # a new shuffle each epoch


def test_batch_order_is_a_pure_function_of_seed_and_step():
    a = BucketSampler(LENGTHS, max_tokens=800, seed=7)
    late = [a.batch(s) for s in (500, 3, 250)]  # asked out of order, in a fresh sampler
    b = BucketSampler(LENGTHS, max_tokens=800, seed=7)
    assert [b.batch(s) for s in range(501)][500] == late[0]
    assert [b.batch(3), b.batch(250)] == late[1:]
    assert BucketSampler(LENGTHS, max_tokens=800, seed=8).epoch(0) != a.epoch(0)


def test_processes_of_one_step_take_consecutive_batches():
    sampler = BucketSampler(LENGTHS, max_tokens=900, seed=2)
    assert [sampler.batch(4, rank, world_size=2) for rank in (0, 1)] == [sampler.batch(8), sampler.batch(9)]


def test_cut_by_budget_by_hand():
    lengths = [10, 10, 30, 40, 5]
    assert cut_by_budget([0, 1, 2, 3, 4], lengths, max_tokens=60) == [[0, 1], [2], [3], [4]]
    assert cut_by_budget([4, 0, 1, 2], lengths, max_tokens=60) == [[4, 0, 1], [2]]  # 3 x 10 = 30, then 4 x 30
    assert cut_by_budget([4, 0, 1], lengths, max_tokens=60, max_rows=2) == [[4, 0], [1]]
    # padding: [5, 10] pads 5 of 20 (0.25); [5, 10, 30] would pad 45 of 90 (0.5); [0, 1] + 40 pads 60 of 120
    assert cut_by_budget([4, 0, 2], lengths, max_tokens=100, max_padding=0.25) == [[4, 0], [2]]
    assert cut_by_budget([4, 0, 2], lengths, max_tokens=100, max_padding=0.5) == [[4, 0, 2]]
    assert cut_by_budget([0, 1, 3], lengths, max_tokens=200, max_padding=0.49) == [[0, 1], [3]]


def test_a_long_review_s_short_middle_window_is_read_alone_not_padded():
    assert length_batches([1024, 258], max_tokens=16384) == [[1], [0]]
    assert length_batches([1024, 1000, 980], max_tokens=16384) == [[2, 1, 0]]


def test_length_batches_cover_everything_in_length_order():
    batches = length_batches(LENGTHS, max_tokens=2000)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(LENGTHS)))
    assert [LENGTHS[i] for i in flat] == sorted(LENGTHS)
    assert all(padded(b) <= 2000 for b in batches)


def test_an_example_over_the_budget_is_refused():
    with pytest.raises(ValueError, match="raise the token budget"):
        BucketSampler([10, 500], max_tokens=400, seed=0)
    with pytest.raises(ValueError, match="more than the token budget"):
        length_batches([10, 500], max_tokens=400)
