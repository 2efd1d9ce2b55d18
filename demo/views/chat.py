"""The Chat tab's computation: visitor settings made valid, and a continuation streamed token by
token (no Gradio here; `demo.tabs.chat` shows it)."""

import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from demo.serving import Checkpoint, DemoError, DemoService, read_number, visitor_text
from demo.text import end_notice, lm_openings, own_text
from model import GenerationConfig
from model.generation import MIN_TEMPERATURE
from tokenization import clean_text, fit_context, prompt_ids, token_label

MAX_NEW_TOKENS = 512
MAX_TEMPERATURE = 5.0
MIN_TOP_P = 0.01
NUM_ALTERNATIVES = 5

EMPTY_PROMPT = "Type the opening of a movie review first, e.g. *“This movie was”*."  # a model of IMDB's reviews


def empty_prompt(metrics: dict) -> str:
    """What an empty message is answered with: the opening of a movie review for a model of IMDB's, else
    of a text like the one the model was trained on (`training.run --data`), its first held-out opening
    as the example when the run recorded one."""
    name = own_text(metrics)
    if name is None:
        return EMPTY_PROMPT
    recorded = [p for p in metrics.get("sample_prompts") or [] if isinstance(p, str) and p.strip()]
    example = f", e.g. *“{' '.join(lm_openings(metrics)[0].split())}”*" if recorded else ""
    return f"Type the opening of a text like `{name}` first{example}."


@dataclass
class TokenView:
    """One generated token as shown to the visitor: its text, probability and alternatives."""

    token: str
    prob: float
    alternatives: list[tuple[str, float]]


@dataclass
class ChatUpdate:
    """The state of a streamed continuation after each new token."""

    text: str  # the continuation so far
    steps: list[TokenView]
    notices: list[str]
    done: bool = False
    seed: int | None = None
    token_ids: tuple[int, ...] = ()  # the prompt as the model read it, then the new tokens


def generation_config(vocab_size: int | None, eos_token_id: int | None, max_new_tokens=64, temperature=0.8,
                      top_k=None, top_p=None, seed=None) -> tuple[GenerationConfig, list[str]]:
    """Clamp visitor settings into a valid `GenerationConfig`, explaining every change."""
    notices = []

    n = int(round(read_number(max_new_tokens, 64)))
    if n < 1:
        notices.append("Max new tokens must be at least 1: using 1.")
        n = 1
    elif n > MAX_NEW_TOKENS:
        notices.append(f"Max new tokens is capped at {MAX_NEW_TOKENS}.")
        n = MAX_NEW_TOKENS

    t = read_number(temperature, 0.8)
    if t <= 0:
        notices.append("Temperature ≤ 0 means greedy decoding: always the most likely token.")
        t = 0.0
    elif t < MIN_TEMPERATURE:
        notices.append(f"Temperature below {MIN_TEMPERATURE:g} is greedy decoding: always the most likely token.")
        t = 0.0
    elif t > MAX_TEMPERATURE:
        notices.append(f"Temperature is capped at {MAX_TEMPERATURE:g}.")
        t = MAX_TEMPERATURE

    k = int(round(read_number(top_k, 0)))
    if k < 0:
        notices.append("Top-k below 0 is not meaningful: top-k is off.")
    top_k_used = k if k >= 1 else None  # 0 = off, as in the slider
    if top_k_used is not None and vocab_size is not None and k >= vocab_size:
        if k > vocab_size:
            notices.append(f"Top-k {k} exceeds the vocabulary ({vocab_size} tokens): top-k is off.")
        top_k_used = None

    p = read_number(top_p, 1.0)
    if p <= 0:
        notices.append(f"Top-p must be above 0 (0 would keep no token): using {MIN_TOP_P}, "
                       "which keeps only the most likely token(s).")
        p = MIN_TOP_P
    elif p > 1:
        notices.append("Top-p above 1 is the same as 1: top-p is off.")

    s = read_number(seed, -1, high=2**62)
    s = random.randrange(2**31) if s < 0 else int(s)

    config = GenerationConfig(max_new_tokens=n, temperature=t, top_k=top_k_used, top_p=None if p >= 1 else p,
                              seed=s, eos_token_id=eos_token_id, num_alternatives=NUM_ALTERNATIVES)
    return config, notices


def stream_continuation(service: DemoService, prompt: object, max_new_tokens=64, temperature=0.8, top_k=None,
                        top_p=None, seed=None, lm: Checkpoint | None = None) -> Iterator[ChatUpdate]:
    """Continue the visitor's review with the served LM (or `lm`: a snapshot of it), yielding after
    every token.

    The prompt is `[bos] + encode(text)` (`prompt_ids`), as in training. A prompt too long for the
    context keeps its *end* (the part being continued: `fit_context`), leaving room for the reply.
    Each token takes one slot of the shared compute budget and gives it back before the yield, so other
    visitors' requests interleave with a long chat. Inference mode is entered per step inside `model.stream`, never
    held across a `yield`: Gradio may resume this generator on another thread, and grad mode is
    thread-local.
    """
    ckpt = lm or service.lm
    model, tok = ckpt.require()
    text, notices = visitor_text(prompt)
    text = clean_text(text)
    if not text:
        raise DemoError(empty_prompt(service.lm.metrics))  # a snapshot's text is the served model's
    config, clamp_notices = generation_config(model.config.vocab_size, model.config.eos_token_id, max_new_tokens,
                                              temperature, top_k, top_p, seed)
    notices += clamp_notices
    block = model.config.block_size
    room = min(config.max_new_tokens, block // 2)
    whole = prompt_ids(text, tok)
    ids = tuple(fit_context(whole, block - room, keep="end"))
    if len(ids) < len(whole):
        notices.append(f"Your text is {len(whole) - 1} tokens; the model reads {block} at a time, so it "
                       f"sees only the last {len(ids) - 1} (leaving room for {room} new ones).")
    steps_iter = model.stream(torch.tensor([ids], device=ckpt.device), config)

    generated: list[int] = []
    steps: list[TokenView] = []
    while True:
        with service.compute():
            step = next(steps_iter, None)
        if step is None:
            break
        if step.token_id == config.eos_token_id:
            notices.append(end_notice(service.lm.metrics))  # a snapshot's text is the served model's
            break
        generated.append(step.token_id)
        steps.append(TokenView(token=token_label(tok, step.token_id), prob=step.prob,
                               alternatives=[(token_label(tok, i), p) for i, p in step.alternatives]))
        # a character split across tokens decodes to U+FFFD until its last byte arrives
        text_so_far = tok.decode(generated).rstrip("\ufffd")
        yield ChatUpdate(text_so_far, list(steps), list(notices), False, config.seed, (*ids, *generated))
    yield ChatUpdate(tok.decode(generated), steps, notices, True, config.seed, (*ids, *generated))


def continue_text(service: DemoService, prompt: object, **settings) -> ChatUpdate:
    """The whole continuation at once: the last update of `stream_continuation`."""
    return deque(stream_continuation(service, prompt, **settings), maxlen=1)[0]
