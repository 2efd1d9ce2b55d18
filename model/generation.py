"""Autoregressive generation shared by both models: greedy, temperature, top-k and top-p sampling,
streamed one token at a time with the model's probability of each token and its alternatives.

A model plugs in by implementing `next_token_logits(tokens, cache, **inputs) -> (1, vocab)`:
with a `KVCache` it feeds only the tokens it has not seen yet; without one it recomputes the
whole sequence (the slow reference the tests compare the cache against). A model whose
positions are bounded says so with `generation_window()`, and `stream` slides the window.
"""

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

import torch

from .layers import LayerCache

MIN_TEMPERATURE = 1e-5  # below this, sampling is greedy decoding (and logits / t could overflow)


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
        """Forget the decoder keys/values (the encoded source stays valid, the buffers are reused)."""
        for layer in self.layers:
            layer.self_attn.reset()
        self.length = 0


@dataclass
class GenerationConfig:
    """`temperature` below `MIN_TEMPERATURE` (0 included) means greedy decoding; `top_k`/`top_p`
    of None switch that filter off."""

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
        if not math.isfinite(self.temperature):
            raise ValueError(f"temperature must be a finite number (0 = greedy), got {self.temperature}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be >= 1 or None, got {self.top_k}")
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1] or None, got {self.top_p}")
        if self.num_alternatives < 0:
            raise ValueError(f"num_alternatives must be >= 0, got {self.num_alternatives}")

    @property
    def greedy(self) -> bool:
        return self.temperature < MIN_TEMPERATURE


@dataclass
class TokenStep:
    """One generated token: its id, the model's probability of it (temperature 1, before any
    filtering, so it reads as what the model believes) and the most likely alternatives.

    Both are computed from the step's logits, with one softmax, only when first read: a caller
    that wants only the tokens (`generate`) pays for neither.
    """

    token_id: int
    logits: torch.Tensor = field(repr=False)  # (V,) the model's scores at this step
    num_alternatives: int = 5

    @cached_property
    def probs(self) -> torch.Tensor:
        return self.logits.float().softmax(-1)  # (V,)

    @property
    def prob(self) -> float:
        return float(self.probs[self.token_id])

    @cached_property
    def alternatives(self) -> list[tuple[int, float]]:
        top = torch.topk(self.probs, min(self.num_alternatives, self.probs.size(-1)))
        return list(zip(top.indices.tolist(), top.values.tolist(), strict=True))


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


def sampling_distribution(logits: torch.Tensor, config: GenerationConfig) -> torch.Tensor:
    """What a sampled step draws from: the logits over the temperature, top-k and top-p applied,
    renormalised -> (V,) probabilities (zero where a filter removed the token). Greedy decoding draws
    nothing: all the mass is on the most likely token, the one `select_token` takes."""
    if config.greedy:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.size(-1)).float()
    return filter_logits(logits.float() / config.temperature, config.top_k, config.top_p).softmax(-1)


def select_token(logits: torch.Tensor, config: GenerationConfig, generator: torch.Generator | None) -> int:
    if config.greedy:
        return int(logits.argmax())
    return int(torch.multinomial(sampling_distribution(logits, config), 1, generator=generator))


class GenerationMixin:
    """Adds `stream` and `generate` to a model that implements `next_token_logits`."""

    def new_cache(self) -> KVCache:
        raise NotImplementedError

    def generation_window(self) -> int | None:
        """The most tokens one step may read (the model's context), or None for no limit."""
        return None

    @torch.inference_mode()
    def stream(self, input_ids: torch.Tensor, config: GenerationConfig | None = None,
               **inputs) -> Iterator[TokenStep]:
        """Yield one `TokenStep` per new token. input_ids: (1, T) prompt (the decoder's start
        tokens for an encoder-decoder, whose source goes in `inputs`).

        Past the model's window W, the oldest half of the window is dropped once and the rest
        re-encoded, which buys W/2 cheap cached steps: bounded work per token, where keeping
        exactly the last W tokens would re-encode the whole window at every step. A prompt
        longer than W keeps its last W tokens. With or without the cache, every step reads the
        same window, so both give the same tokens.
        """
        config = config or GenerationConfig()
        if input_ids.dim() != 2 or input_ids.size(0) != 1 or input_ids.size(1) == 0:
            raise ValueError(f"stream() takes one non-empty sequence of shape (1, T), got {tuple(input_ids.shape)}")
        generator = None
        if config.seed is not None:
            generator = torch.Generator(device=input_ids.device).manual_seed(config.seed)
        cache = self.new_cache() if config.use_cache else None
        window = self.generation_window()
        end = input_ids.size(1)
        tokens = input_ids.new_empty(1, end + config.max_new_tokens)  # (1, T_max), written in place
        tokens[:, :end] = input_ids
        start = 0 if window is None else max(0, end - window)
        for _ in range(config.max_new_tokens):
            if window is not None and end - start > window:
                start = end - max(1, window // 2)
                if cache is not None:
                    cache.reset()
            logits = self.next_token_logits(tokens[:, start:end], cache, **inputs)[0]  # (V,)
            token = select_token(logits, config, generator)
            yield TokenStep(token, logits, config.num_alternatives)
            if token == config.eos_token_id:
                return
            tokens[0, end] = token
            end += 1

    def generate(self, input_ids: torch.Tensor, config: GenerationConfig | None = None, **inputs) -> list[int]:
        """The new token ids, as a list (the end-of-sequence token included if one was produced)."""
        return [step.token_id for step in self.stream(input_ids, config, **inputs)]
