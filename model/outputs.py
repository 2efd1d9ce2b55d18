"""What both models return from `forward`, and the loss they are trained on."""

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import fast
from .embeddings import Embeddings
from .hooks import watched
from .layers import AttentionMap

IGNORE_INDEX = -100  # a target position with this id adds nothing to the loss (padding, a prompt)


@dataclass
class ModelOutput:
    logits: torch.Tensor | None  # (B, T, vocab); None when asked for the loss only
    loss: torch.Tensor | None = None
    attentions: list[AttentionMap] | None = None
    encoder_hidden_state: torch.Tensor | None = None  # (B, S, C): an encoder-decoder's memory


def head_and_loss(embed: Embeddings, x: torch.Tensor, targets: torch.Tensor | None,
                  loss_only: bool = False) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The tied output projection of hidden states x (B, T, C) -> logits (B, T, vocab) and, given
    targets (B, T), the mean next-token cross-entropy over the positions whose target is not
    IGNORE_INDEX:

        loss = mean over kept positions t of  -log softmax(logits[t])[targets[t]]

    taken in float32 even under autocast: a bfloat16 log-softmax over 8,192 classes loses the small
    probabilities the loss is made of.

    ALTERNATIVE, for speed (`model/fast`, same numbers, tested): with `loss_only` (a training step's
    call) the loss comes straight from x a chunk of rows at a time, so the (B, T, vocab) logits are
    never stored and come back None; unless someone reads or patches them at their named point."""
    if targets is not None and loss_only and not watched(embed.hook_logits):  # fast: the logits never exist
        return None, fast.linear_cross_entropy(x.flatten(0, 1), embed.lut.weight, targets.flatten(), IGNORE_INDEX)
    logits = embed.logits(x)  # (B, T, vocab)
    if targets is None:
        return logits, None
    return logits, F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX)
