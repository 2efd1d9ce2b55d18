"""How faithful is an attribution? ERASER's deletion tests (DeYoung et al., 2020) and rank
agreement between methods, for the scores of `inspection.attribution`.

`erase` reads P(label) once a method's top tokens are deleted (or all but them kept);
`faithfulness` turns that into comprehensiveness and sufficiency (AOPC over `ERASER_FRACTIONS`);
`rank_correlation` is Spearman's rho of two methods' scores.
"""

import math
from collections.abc import Sequence

import torch

from model import EncoderDecoder

from .attribution import Attribution, deletion_log_probs, explained, special_mask

ERASER_FRACTIONS = (0.01, 0.05, 0.10, 0.20, 0.50)  # the top-k% bins of ERASER's AOPC


def top_count(fraction: float, n: int) -> int:
    """How many of `n` tokens "the top `fraction`" deletes: ceil(fraction * n), so on a short review
    several fractions delete the same tokens (the app says so rather than read the test)."""
    if not 0 <= fraction <= 1:
        raise ValueError(f"fractions are in [0, 1], got {fraction}")
    return math.ceil(fraction * n - 1e-9)  # tolerance: 0.1 * 10 is 1.0000000000000002


def erase(model: EncoderDecoder, src_ids: torch.Tensor, candidates: list[list[int]], scores: torch.Tensor,
          label: int, fractions: Sequence[float] = ERASER_FRACTIONS, keep: bool = False) -> torch.Tensor:
    """P(label) after deleting the top fraction of tokens by `scores` (or, with `keep`, deleting
    all but them), one row per fraction -> (F,). The live deletion test: a faithful explanation's
    top tokens carry the prediction. Top k% means ceil(k% of the review's tokens), special tokens
    never counted or deleted (`top_count`); ties go to the earlier token. src_ids: (S,) or (1, S), unpadded."""
    ids = src_ids.reshape(-1)
    s = scores.reshape(-1).to(ids.device).float()
    if s.numel() != ids.numel():
        raise ValueError(f"{s.numel()} scores for {ids.numel()} tokens")
    model = explained(model)
    deletable = ~special_mask(model, ids)  # (S,)
    eligible = deletable.nonzero().flatten()
    order = eligible[torch.sort(s[eligible], descending=True, stable=True).indices]  # best first
    drops = []
    for frac in fractions:
        top = torch.zeros_like(ids, dtype=torch.bool)
        top[order[: top_count(frac, len(eligible))]] = True
        drops.append(top if not keep else ~top & deletable)
    was_training = model.training
    model.eval()
    try:
        return deletion_log_probs(model, ids, drops, candidates, label).exp().cpu()
    finally:
        model.train(was_training)


def faithfulness(model: EncoderDecoder, src_ids: torch.Tensor, candidates: list[list[int]], result: Attribution,
                 fractions: Sequence[float] = ERASER_FRACTIONS) -> dict[str, float]:
    """ERASER's comprehensiveness (P(label) lost when the top tokens are deleted: higher is more
    faithful) and sufficiency (P(label) lost when only they are kept: lower is more faithful),
    each an AOPC: the mean over the `fractions` bins."""
    p = float(result.probabilities[result.label])
    deleted = erase(model, src_ids, candidates, result.scores, result.label, fractions)
    kept = erase(model, src_ids, candidates, result.scores, result.label, fractions, keep=True)
    return {"comprehensiveness": float((p - deleted).mean()), "sufficiency": float((p - kept).mean())}


def rank_correlation(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman's rank correlation of two score vectors (ties get their average rank): how much
    two methods agree on the order of the tokens. NaN when either vector is constant."""
    ra, rb = _ranks(a.reshape(-1).double()), _ranks(b.reshape(-1).double())
    if ra.numel() != rb.numel():
        raise ValueError(f"cannot correlate {ra.numel()} scores with {rb.numel()}")
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = float((ra.square().sum() * rb.square().sum()).sqrt())
    return float((ra * rb).sum()) / denom if denom > 0 else math.nan


def _ranks(x: torch.Tensor) -> torch.Tensor:
    ranks = torch.empty_like(x)
    ranks[x.argsort(stable=True)] = torch.arange(x.numel(), dtype=x.dtype)
    values, inverse = torch.unique(x, return_inverse=True)
    total = torch.zeros_like(values).index_add_(0, inverse, ranks)
    return (total / torch.bincount(inverse).to(x.dtype))[inverse]
