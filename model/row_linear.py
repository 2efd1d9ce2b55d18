"""A linear layer that reads its weight in the faster layout when it is given a single row.

Generating one token at a time, every projection multiplies one row x by a weight W (out, in),
nn.Linear's layout, in which CPU BLAS computes `out` dot products of length `in`. When the output
is the wider side (the Q/K/V projection, the feed-forward's first layer, the vocabulary
projection), the same product is faster with W stored (in, out), GPT-2's `Conv1D` layout; when the
input is wider (the feed-forward's second layer) nn.Linear's layout is the faster one, and
choosing per layer beats either layout for all (`python -m benchmarks.generate` measures the whole
effect; the copies also cost memory, so only the layers that gain get one). So for a single row of
a wide-output layer, without autograd, on CPU, the product goes through a transposed copy of the
weight, made on first use and remade whenever the weight changes (an optimizer step or a load
bumps its version counter). Everything else (training, multi-row passes, GPUs) is plain `F.linear`; the parameters,
their names and the checkpoints are nn.Linear's.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def _transposed(weight: torch.Tensor) -> torch.Tensor:
    """weight (out, in) -> the same values, shape (out, in), stored (in, out): cached on the weight
    while it is unchanged. `F.linear` with it multiplies by the contiguous (in, out) matrix."""
    key = (None if weight.is_inference() else weight._version, weight.data_ptr())  # inference tensors have none
    cached = getattr(weight, "_row_linear_t", None)
    if cached is None or cached[0] != key:
        with torch.inference_mode(False), torch.no_grad():  # a plain tensor, usable outside inference mode
            cached = (key, weight.t().contiguous().t())
        weight._row_linear_t = cached
    return cached[1]


def row_weight(weight: torch.Tensor) -> torch.Tensor:
    """weight (out, in) -> the same values in the layout a single row is faster multiplied by: on
    CPU, the cached transposed copy for a wider output; the weight itself otherwise."""
    return _transposed(weight) if weight.is_cpu and weight.size(0) > weight.size(1) else weight


def row_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`F.linear(x, weight, bias)`, x: (..., in) -> (..., out); one row on CPU without grad, to a
    wider output, is faster."""
    if x.numel() != x.shape[-1] or torch.is_grad_enabled():
        return F.linear(x, weight, bias)
    return F.linear(x, row_weight(weight), bias)


class Linear(nn.Linear):
    """nn.Linear whose single-row, no-grad CPU product uses `row_linear`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return row_linear(x, self.weight, self.bias)
