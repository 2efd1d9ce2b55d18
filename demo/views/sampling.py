"""Sampling made visible: for one step of a chat, the model's next-token distribution, the same
after the temperature, which tokens top-k and top-p removed, the renormalised distribution the
token was drawn from (`model.sampling_distribution`, the sampler's own), and the drawn token's
rank (no Gradio here; `demo.tabs.sampling_panel` shows it).

The step's logits are recomputed from the chat's token ids over the window `model.stream` read
at that step, so they are the generator's, not a re-sampling.
"""

from dataclasses import dataclass

import torch

from demo.serving import DemoError, DemoService, read_number
from demo.views.chat import generation_config
from model import GenerationConfig, sampling_distribution
from tokenization import token_label, visible

SHOWN_TOKENS = 20  # the most likely tokens listed, and the drawn one if it is not among them
NOTHING_YET = "Generate a continuation first, then pick one of its steps."


@dataclass
class SampledToken:
    token: str
    rank: int  # 1 = the model's most likely token
    model: float  # softmax(logits): the model's own probability, temperature 1, nothing removed
    tempered: float  # softmax(logits / temperature)
    removed_by: str  # "", "top-k" or "top-p"
    sampled: float  # what the draw used: tempered, filtered, renormalised (0 if removed)
    drawn: bool


@dataclass
class SamplingView:
    step: int  # 1-based, as the chat's table numbers them
    config: GenerationConfig
    rows: list[SampledToken]  # the SHOWN_TOKENS most likely, then the drawn token if it is further down
    drawn_rank: int
    kept: int  # tokens the draw could pick
    removed_by_top_k: int
    removed_by_top_p: int
    notices: list[str]


def window_start(prompt_len: int, step: int, window: int) -> int:
    """The first position `model.stream` reads for new token `step` (0-based) after a prompt of
    `prompt_len`: a prompt over the window keeps its last `window` tokens; a sequence that outgrows
    it drops its oldest half once and goes on from there."""
    start, end = max(0, prompt_len - window), prompt_len
    for _ in range(step + 1):
        if end - start > window:
            start = end - max(1, window // 2)
        end += 1
    return start


def step_logits(model, token_ids: list[int], n_generated: int, step: int) -> torch.Tensor:
    """The logits (V,) the generator drew new token `step` (0-based) from."""
    prompt_len = len(token_ids) - n_generated
    end = prompt_len + step
    start = window_start(prompt_len, step, model.generation_window())
    ids = torch.tensor([token_ids[start:end]], device=next(model.parameters()).device)
    with torch.inference_mode():
        return model(ids).logits[0, -1].float()


def read_generated(generated: object, vocab_size: int) -> tuple[list[int], int]:
    """The chat's state (token ids, number generated) checked: ids in the vocabulary, at least one
    generated (a visitor's script may send anything)."""
    try:
        token_ids, n_generated = generated  # type: ignore[misc]
        token_ids, n_generated = [int(t) for t in token_ids], int(n_generated)
    except (TypeError, ValueError):
        raise DemoError(NOTHING_YET) from None
    if not 0 < n_generated <= len(token_ids) or not all(0 <= t < vocab_size for t in token_ids):
        raise DemoError(NOTHING_YET)
    return token_ids, n_generated


def sampling_view(service: DemoService, generated: object, step: object, temperature=0.8, top_k=None,
                  top_p=None) -> SamplingView:
    """Step `step` (1-based) of the last continuation, `generated` = (token ids, number generated),
    with the sampling settings it was generated with (clamped as the chat clamps them)."""
    with service.compute():
        model, tok = service.lm.require()
        token_ids, n_generated = read_generated(generated, model.config.vocab_size)
        n = int(round(read_number(step, 1)))
        notices = []
        if not 1 <= n <= n_generated:
            notices.append(f"Step {n} does not exist (1 to {n_generated}): showing the nearest.")
            n = min(max(n, 1), n_generated)
        config, clamped = generation_config(model.config.vocab_size, None, 1, temperature, top_k, top_p, 0)
        notices += clamped
        logits = step_logits(model, token_ids, n_generated, n - 1)
        drawn = token_ids[len(token_ids) - n_generated + n - 1]
        model_p = logits.softmax(-1)
        order = model_p.argsort(descending=True)
        ranks = torch.empty_like(order)
        ranks[order] = torch.arange(1, order.numel() + 1)
        if config.greedy:
            notices.append("Temperature 0 is greedy decoding: the most likely token is taken, nothing is drawn.")
            tempered = sampled = torch.nn.functional.one_hot(order[0], logits.numel()).float()
            after_k = torch.ones_like(logits, dtype=torch.bool)
        else:
            tempered = (logits / config.temperature).softmax(-1)
            sampled = sampling_distribution(logits, config)
            after_k = sampling_distribution(logits, GenerationConfig(temperature=config.temperature,
                                                                     top_k=config.top_k)) > 0
        kept = sampled > 0
        shown = order[:SHOWN_TOKENS].tolist()
        if drawn not in shown:
            shown.append(drawn)
        def removed_by(i: int) -> str:
            return "" if kept[i] else "greedy" if config.greedy else "top-k" if not after_k[i] else "top-p"

        rows = [SampledToken(visible(token_label(tok, i), show_spaces=True), int(ranks[i]), float(model_p[i]),
                             float(tempered[i]), removed_by(i), float(sampled[i]), i == drawn) for i in shown]
        by_p = 0 if config.greedy else int((after_k & ~kept).sum())
        return SamplingView(n, config, rows, int(ranks[drawn]), int(kept.sum()), int((~after_k).sum()), by_p, notices)
