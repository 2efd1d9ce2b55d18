"""Autoregressive generation shared by both models: greedy, temperature, top-k and top-p sampling,
streamed one token at a time with the model's probability of each token and its alternatives.

A model plugs in by implementing `next_token_logits(tokens, cache, **inputs) -> (1, vocab)`:
with a `KVCache` it feeds only the tokens it has not seen yet; without one it recomputes the
whole sequence (the slow reference the tests compare the cache against).
"""

from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from .layers import LayerCache


@dataclass
class KVCache:
    """Everything a model keeps between steps: per-layer keys/values and how many positions they
    cover; an encoder-decoder also keeps the encoded source (`memory`) and its mask."""

    layers: list[LayerCache]
    length: int = 0
    memory: torch.Tensor | None = None
    src_mask: torch.Tensor | None = None

    @classmethod
    def empty(cls, n_layer: int) -> "KVCache":
        return cls([LayerCache() for _ in range(n_layer)])

    def reset(self) -> None:
        """Forget the decoder keys/values (the encoded source stays valid)."""
        self.layers = [LayerCache(cross_attn=layer.cross_attn) for layer in self.layers]
        self.length = 0


@dataclass
class GenerationConfig:
    """`temperature <= 0` means greedy decoding; `top_k`/`top_p` of None switch that filter off."""

    max_new_tokens: int = 64
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    eos_token_id: int | None = None
    num_alternatives: int = 5
    use_cache: bool = True

    def __post_init__(self):
        if self.max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {self.max_new_tokens}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be >= 1 or None, got {self.top_k}")
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1] or None, got {self.top_p}")


@dataclass
class TokenStep:
    """One generated token: its id, the model's probability of it (temperature 1, before any
    filtering, so it reads as what the model believes) and the most likely alternatives."""

    token_id: int
    prob: float
    alternatives: list[tuple[int, float]] = field(default_factory=list)


def filter_logits(logits: torch.Tensor, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """Set to -inf every logit outside the top-k and outside the smallest nucleus of mass top_p."""
    logits = logits.clone()  # (V,)
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k).values[-1]
        logits[logits < kth] = float("-inf")
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(descending=True)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        drop = cumulative - sorted_logits.softmax(-1) >= top_p  # mass before this token already >= p
        logits[order[drop]] = float("-inf")
    return logits


def select_token(logits: torch.Tensor, config: GenerationConfig, generator: torch.Generator | None) -> int:
    if config.temperature <= 0:
        return int(logits.argmax())
    filtered = filter_logits(logits.float() / config.temperature, config.top_k, config.top_p)
    return int(torch.multinomial(filtered.softmax(-1), 1, generator=generator))


class GenerationMixin:
    """Adds `stream` and `generate` to a model that implements `next_token_logits`."""

    def new_cache(self) -> KVCache:
        raise NotImplementedError

    @torch.inference_mode()
    def stream(self, input_ids: torch.Tensor, config: GenerationConfig | None = None,
               **inputs) -> Iterator[TokenStep]:
        """Yield one `TokenStep` per new token. input_ids: (1, T) prompt (the decoder's start
        tokens for an encoder-decoder, whose source goes in `inputs`)."""
        config = config or GenerationConfig()
        if input_ids.dim() != 2 or input_ids.size(0) != 1 or input_ids.size(1) == 0:
            raise ValueError(f"stream() takes one non-empty sequence of shape (1, T), got {tuple(input_ids.shape)}")
        generator = None
        if config.seed is not None:
            generator = torch.Generator(device=input_ids.device).manual_seed(config.seed)
        cache = self.new_cache() if config.use_cache else None
        tokens = input_ids
        for _ in range(config.max_new_tokens):
            logits = self.next_token_logits(tokens, cache, **inputs)[0]  # (V,)
            token = select_token(logits, config, generator)
            probs = logits.float().softmax(-1)
            top = torch.topk(probs, min(config.num_alternatives, probs.size(-1)))
            yield TokenStep(token, float(probs[token]),
                            [(int(i), float(p)) for p, i in zip(top.values, top.indices, strict=True)])
            if token == config.eos_token_id:
                return
            tokens = torch.cat([tokens, tokens.new_tensor([[token]])], dim=1)

    def generate(self, input_ids: torch.Tensor, config: GenerationConfig | None = None, **inputs) -> list[int]:
        """The new token ids, as a list (the end-of-sequence token included if one was produced)."""
        return [step.token_id for step in self.stream(input_ids, config, **inputs)]
