"""The weight layout a single row is multiplied by fastest, for the one-token decode step.

Generating one token at a time, every projection multiplies one row x by a weight W (out, in),
nn.Linear's layout, in which CPU BLAS computes `out` dot products of length `in`. When the output
is the wider side (the Q/K/V projection, the feed-forward's first layer, the vocabulary
projection), the same product is faster with W stored (in, out), GPT-2's `Conv1D` layout; when the
input is wider (the feed-forward's second layer) nn.Linear's layout is the faster one, and
choosing per layer beats either layout for all (`python -m benchmarks.generate` measures the whole
effect; the copies also cost memory, so only the layers that gain get one). The transposed copy is
made on first use and remade whenever the weight changes (an optimizer step or a load bumps its
version counter); the parameters, their names and the checkpoints stay nn.Linear's.
"""

import torch


def _transposed(weight: torch.Tensor) -> torch.Tensor:
    """weight (out, in) -> the same values, shape (out, in), stored (in, out): cached on the weight
    while it is unchanged. `F.linear` with it multiplies by the contiguous (in, out) matrix."""
    key = (None if weight.is_inference() else weight._version, weight.data_ptr())  # inference tensors have none
    cached = getattr(weight, "_row_weight", None)
    if cached is None or cached[0] != key:
        with torch.inference_mode(False), torch.no_grad():  # a plain tensor, usable outside inference mode
            cached = (key, weight.t().contiguous().t())
        weight._row_weight = cached
    return cached[1]


def row_weight(weight: torch.Tensor) -> torch.Tensor:
    """weight (out, in) -> the same values in the layout a single row is faster multiplied by: on
    CPU, the cached transposed copy for a wider output; the weight itself otherwise."""
    return _transposed(weight) if weight.is_cpu and weight.size(0) > weight.size(1) else weight
