"""Reading a source backwards: the permutation a backward encoder reads a padded batch in
(`EncoderDecoderConfig.reverse`), and putting its output back in the source's order. The
real tokens of each row are reversed in place and the padding stays where it is, so the same padding
mask serves both orders.
"""

import torch


def reading_order(src_mask: torch.Tensor) -> torch.Tensor:
    """(B, S) 1/0 real/pad -> (B, S) indices that put each row's real tokens last to first in the
    slots the real tokens hold, and leave the padding where it is. `reorder(x, order)` then reads
    a review backwards; the permutation is its own inverse, so the same `order` puts it back."""
    B, S = src_mask.shape
    pos = torch.arange(S, device=src_mask.device).expand(B, S)
    real = src_mask.bool()
    slots = torch.where(real, pos, S + pos).argsort(1)  # the real slots in order, then the pads'
    backwards = torch.where(real, -pos, S + pos).argsort(1)  # the real tokens last to first, then the pads
    return torch.empty_like(slots).scatter_(1, slots, backwards)


def reorder(x: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """x (B, S, C) with position i taken from position order[b, i] -> (B, S, C)."""
    return x.gather(1, order[..., None].expand_as(x))


def reorder_map(weights: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """Attention weights (B, H, S, S) computed in reading order -> the same weights between the
    source's own positions (query and key axes both permuted back)."""
    B, H, S, _ = weights.shape
    rows = weights.gather(2, order[:, None, :, None].expand(B, H, S, S))
    return rows.gather(3, order[:, None, None, :].expand(B, H, S, S))
