"""The model's math written out again by hand, in float64, from the values the model captured
(`demo.views.tour.capture`): LayerNorm, the linear layers, one head's attention, the softmax, GELU,
the sinusoids, the sampler's cut. A step compares what it recomputes with what the model computed
(`check`); a mismatch is shown in the step, and the tests fail on it: what the tour teaches is what
the model computes."""

import math
from dataclasses import dataclass

import numpy as np
import torch

from model.generation import GenerationConfig

TOLERANCE = 1e-4  # |recomputed - captured| allowed, relative to the captured values' size (float32 passes)


def f64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", torch.float64)


@dataclass
class Check:
    """A value recomputed in the tour against the model's own: equal within `tolerance`."""

    what: str  # "the model's attention weights", as a sentence names it
    error: float  # the largest absolute difference
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.error <= self.tolerance

    def sentence(self) -> str:
        if self.ok:
            return f"✓ Recomputed here by hand: equals {self.what} (largest difference {self.error:.1e})."
        return (f"⚠️ Mismatch: recomputed by hand, this differs from {self.what} by {self.error:.3g} (more than "
                f"{self.tolerance:.0e}). The tour's arithmetic and the model disagree here.")


def check(what: str, mine: torch.Tensor, theirs: torch.Tensor) -> Check:
    """`mine` against the model's `theirs` (same shape; -inf where both are -inf counts as equal)."""
    mine, theirs = mine.double(), theirs.double()
    if mine.shape != theirs.shape:
        return Check(what + f" (shape {tuple(mine.shape)} against {tuple(theirs.shape)})", math.inf, 0.0)
    both_inf = torch.isinf(mine) & torch.isinf(theirs) & (mine.sign() == theirs.sign())
    error = (mine - theirs).abs().masked_fill(both_inf, 0.0)
    scale = float(theirs.masked_fill(torch.isinf(theirs), 0.0).abs().max()) if theirs.numel() else 0.0
    return Check(what, float(error.max()) if error.numel() else 0.0, TOLERANCE * max(1.0, scale))


def layer_norm(x: torch.Tensor, norm: torch.nn.Module) -> torch.Tensor:
    """γ ⊙ (x − mean) / √(variance + ε) + β over the last dimension (the biased variance, as the paper's)."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * f64(norm.weight) + f64(norm.bias)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return x @ f64(weight).T + (0 if bias is None else f64(bias))


def gelu(x: torch.Tensor) -> torch.Tensor:
    """x · Φ(x), Φ the standard normal's distribution function (the exact GELU)."""
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def softmax(scores: torch.Tensor) -> torch.Tensor:
    """exp(s − max) / Σ exp(s − max) per row; a row with every entry −∞ gives zeros, as the model's does."""
    top = scores.max(-1, keepdim=True).values
    e = torch.exp(scores - torch.where(torch.isinf(top), 0.0, top))
    total = e.sum(-1, keepdim=True)
    return torch.where(total > 0, e / total.clamp(min=1e-300), 0.0)


def sinusoids(n: int, d: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same), written out with numpy."""
    pos, i = np.arange(n)[:, None], np.arange(0, d, 2)[None, :]
    angle = pos / 10000 ** (i / d)
    pe = np.zeros((n, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return torch.from_numpy(pe)


def embed(table: torch.Tensor, ids: list[int], d_model: int) -> torch.Tensor:
    """The embedding rows of `ids` × √d_model, plus the sinusoids of their positions: what layer 0 reads."""
    return f64(table)[torch.tensor(ids)] * math.sqrt(d_model) + sinusoids(len(ids), d_model)


def head_qkv(qkv: torch.Tensor, head: int, n_head: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The (T, 3C) projection -> head `head`'s Q, K, V, (T, d_k) each."""
    c = qkv.size(-1) // 3
    d_k = c // n_head
    return tuple(qkv[:, part * c + head * d_k: part * c + (head + 1) * d_k] for part in range(3))


def allowed(t_q: int, t_k: int, key_mask: torch.Tensor | None, is_causal: bool) -> torch.Tensor:
    """(T_q, T_k) True where a query may look: real keys, and with `is_causal` no later position."""
    ok = torch.ones(t_q, t_k, dtype=torch.bool) if key_mask is None else key_mask.expand(t_q, t_k).clone()
    if is_causal:
        ok &= torch.ones(t_q, t_k, dtype=torch.bool).tril(t_k - t_q)
    return ok


def masked(scores: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    return scores.masked_fill(~ok, -math.inf)


@dataclass
class HeadAttention:
    """One head's self-attention recomputed from the layer's input `x` (T, C) and its projection."""

    qkv: torch.Tensor  # (T, 3C): every head's Q, K, V, as the projection writes them
    q: torch.Tensor  # (T, d_k) each: this head's share
    k: torch.Tensor
    v: torch.Tensor
    scores: torch.Tensor  # Q Kᵀ (T, T)
    scaled: torch.Tensor  # / √d_k
    weights: torch.Tensor  # softmax of the masked scores


def head_attention(x: torch.Tensor, proj: torch.nn.Module, head: int, n_head: int, ok: torch.Tensor) -> HeadAttention:
    """Q, K, V = x W + b; S = Q Kᵀ; S / √d_k; masked where `ok` is False; softmax."""
    qkv = linear(x, proj.weight, proj.bias)
    q, k, v = head_qkv(qkv, head, n_head)
    scores = q @ k.T
    scaled = scores / math.sqrt(q.size(-1))
    return HeadAttention(qkv, q, k, v, scores, scaled, softmax(masked(scaled, ok)))


def sampled_by_hand(logits: torch.Tensor, config: GenerationConfig) -> torch.Tensor:
    """The distribution a draw uses: logits / T, the top-k kept, then the smallest set of the most
    likely whose probabilities reach top-p, renormalised."""
    z = logits / config.temperature
    order = z.argsort(descending=True)
    keep = torch.zeros_like(z, dtype=torch.bool)
    keep[order[:config.top_k]] = True
    p = softmax(z.masked_fill(~keep, -math.inf))
    ranked = p[order]
    before = ranked.cumsum(0) - ranked  # the mass of the more likely tokens
    keep[order[before >= config.top_p]] = False
    return softmax(z.masked_fill(~keep, -math.inf))
