"""What both models return from `forward`, and the one loss they compute."""

from dataclasses import dataclass

import torch

from .cross_entropy import chunked_cross_entropy
from .layers import AttentionMap

IGNORE_INDEX = -100  # a target position with this id adds nothing to the loss (padding, a prompt)


@dataclass
class ModelOutput:
    logits: torch.Tensor  # (B, T, vocab)
    loss: torch.Tensor | None = None
    attentions: list[AttentionMap] | None = None


def token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the positions whose target is not IGNORE_INDEX.

    logits: (B, T, vocab), targets: (B, T). Computed in float32 even under autocast: a float16
    log-softmax over 8,192 classes loses the small probabilities the loss is made of. Chunked
    (`model/cross_entropy.py`): `F.cross_entropy`'s numbers without its three (B·T, vocab) temporaries.
    """
    return chunked_cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), IGNORE_INDEX)
