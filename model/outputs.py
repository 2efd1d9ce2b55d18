"""What both models return from `forward`, and the one loss they compute."""

from dataclasses import dataclass

import torch

from .cross_entropy import chunked_cross_entropy, linear_cross_entropy
from .layers import AttentionMap, Embeddings

IGNORE_INDEX = -100  # a target position with this id adds nothing to the loss (padding, a prompt)


@dataclass
class ModelOutput:
    logits: torch.Tensor | None  # (B, T, vocab); None when asked for the loss only
    loss: torch.Tensor | None = None
    attentions: list[AttentionMap] | None = None
    encoder_hidden_state: torch.Tensor | None = None  # (B, S, C): an encoder-decoder's memory


def token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the positions whose target is not IGNORE_INDEX.

    logits: (B, T, vocab), targets: (B, T). Computed in float32 even under autocast: a float16
    log-softmax over 8,192 classes loses the small probabilities the loss is made of. Chunked
    (`model/cross_entropy.py`): `F.cross_entropy`'s numbers without its three (B·T, vocab) temporaries.
    """
    return chunked_cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), IGNORE_INDEX)


def head_and_loss(embed: Embeddings, x: torch.Tensor, targets: torch.Tensor | None,
                  loss_only: bool = False) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The tied output projection of hidden states x (B, T, C) and, given targets, the loss.

    With `loss_only` (a training step's call) the loss comes straight from the hidden states
    (`linear_cross_entropy`) and the logits are None: they are never stored. Under autocast its
    products run in the autocast dtype and its loss in float32, as autocast would run them."""
    if targets is not None and loss_only:
        device_type = x.device.type
        compute = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else x.dtype
        with torch.autocast(device_type, enabled=False):
            return None, linear_cross_entropy(x.flatten(0, 1), embed.lut.weight, targets.flatten(), IGNORE_INDEX,
                                              compute)
    logits = embed.logits(x)  # (B, T, vocab)
    return logits, token_loss(logits, targets) if targets is not None else None
