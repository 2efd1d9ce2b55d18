"""Token-budget batches of token sequences of different lengths: a batch is padded to its longest
row, so rows of similar length go together and the batch's padded size (rows x longest row) stays
within a budget. Reading many reviews (`classifier.Reader.read_texts`, the evaluations) takes them
in length order (`length_batches`); training draws its batches from shuffled pools
(`training.bucketing.BucketSampler`), cut by the same `cut_by_budget`."""

from collections.abc import Sequence


def cut_by_budget(order: Sequence[int], lengths: Sequence[int], max_tokens: int,
                  max_rows: int | None = None, max_padding: float = 1.0) -> list[list[int]]:
    """Cut `order` (indices, in the order they should be batched) into consecutive batches whose
    padded size len(batch) * max(lengths in batch) stays <= max_tokens (and <= max_rows rows), and
    whose share of padding tokens stays <= max_padding."""
    batches: list[list[int]] = []
    current: list[int] = []
    longest = real = 0
    for i in order:
        n = int(lengths[i])
        if n > max_tokens:
            raise ValueError(f"example {i} has {n} tokens: more than the token budget {max_tokens}")
        grown, padded = max(longest, n), max(longest, n) * (len(current) + 1)
        if current and (padded > max_tokens or (max_rows and len(current) == max_rows)
                        or 1 - (real + n) / padded > max_padding):
            batches.append(current)
            current, grown, real = [], n, 0
        current.append(int(i))
        longest, real = grown, real + n
    if current:
        batches.append(current)
    return batches


MAX_PADDING = 0.25  # a reading batch at most a quarter padding: a long review's short middle window goes alone


def length_batches(lengths: Sequence[int], max_tokens: int, max_rows: int | None = None) -> list[list[int]]:
    """Evaluation batches: all indices in length order (ties by index), cut by the token budget and
    at `MAX_PADDING` (among many reviews, neighbours in length order are close and it never cuts;
    a single review's windows of 1,023 and 257 tokens are read apart, not the short one padded)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    return cut_by_budget(order, lengths, max_tokens, max_rows, MAX_PADDING)
