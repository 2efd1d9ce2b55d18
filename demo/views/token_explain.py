"""Why did the language model write this token? One token of a text (or of the last chat
continuation) attributed to every earlier token by `model.attribute_token`, optionally against an
alternative token (no Gradio here; `demo.tabs.token_panel` shows it).

A text is read as the chat reads a prompt, `[bos] + encode(text)`, and token `position` (1-based)
is explained from the tokens before it. A chat step is explained from exactly the window the
generator read at that step (`demo.views.sampling.window_start`).
"""

import math
from dataclasses import dataclass

import torch

from demo.serving import Checkpoint, DemoError, DemoService, read_number, visitor_text
from demo.text import code_span, method_name
from demo.views.sampling import read_generated, window_start
from inspection import METHODS, attribute_token
from tokenization import prompt_ids, token_label, visible


@dataclass
class TokenExplanation:
    method: str
    token: str  # the explained token, readable
    alternative: str | None  # the contrasted token, readable
    probability: float  # p(token | context)
    alternative_probability: float | None
    highlights: list[tuple[str, float | None]]  # context tokens, scores scaled to [-1, 1]; then the token (None)
    summary: str
    notices: list[str]


def _method(method: object) -> str:
    if method not in METHODS:
        raise DemoError(f"Unknown explanation method {str(method)[:40]!r}: choose one of {', '.join(METHODS)}.")
    return method  # type: ignore[return-value]


def _alternative(tok, alternative: object, notices: list[str]) -> int | None:
    """Typed text -> its first token (None when empty). A token copied from the chat's table reads
    back as itself: the table shows a space as ␣ and a newline as ↵."""
    text, _ = visitor_text(alternative)
    text = text.replace("␣", " ").replace("↵", "\n")
    if not text:
        return None
    ids = tok.encode(text)
    if not ids:
        raise DemoError("The alternative has no tokens: type a word or a token.")
    if len(ids) > 1:
        notices.append(f"The alternative is {len(ids)} tokens; contrasting with its first, "
                       f"{code_span(visible(token_label(tok, ids[0]), show_spaces=True))}.")
    return ids[0]


def explain_ids(ckpt: Checkpoint, ids: list[int], position: int, start: int, method: object, alternative: object,
                notices: list[str] | None = None) -> TokenExplanation:
    """ids[position] explained from ids[start:position] (the window the model read)."""
    method = _method(method)
    model, tok = ckpt.require()
    notices = list(notices or [])
    alt = _alternative(tok, alternative, notices)
    if alt == ids[position]:
        raise DemoError("The alternative is the token itself: pick another one to contrast with.")
    window = torch.tensor(ids[start : position + 1], device=ckpt.device)
    r = attribute_token(model, window, position - start, method, alternative=alt)
    top = float(r.scores.abs().max())
    label = [visible(token_label(tok, i)) for i in ids[: position + 1]]
    highlights = [(t, None) for t in label[:start]] + [
        (t, round(float(s) / top, 4) if top > 0 else 0.0) for t, s in zip(label[start:position], r.scores, strict=True)]
    highlights.append((f" ⟵ {label[position]}", None))
    if start > 0:
        notices.append(f"The model read only the last {position - start} tokens before this one; earlier ones are "
                       "not shaded.")
    token, other = (visible(token_label(tok, i), show_spaces=True) for i in (ids[position], alt or 0))
    p = math.exp(r.log_prob)
    target = f"the log-probability of {code_span(token)}"
    summary = f"Why {code_span(token)} (probability {p:.4f})"
    if alt is not None:
        summary += f" rather than {code_span(other)} ({math.exp(r.alternative_log_prob):.4f})"
        target += f" minus that of {code_span(other)}"
    summary += (f", by {method_name(method)}: each earlier token's score is its share of {target} "
                f"({r.target:.2f}).")
    if r.baseline_target is not None:  # integrated gradients' completeness: the scores account for the whole change
        summary += (f" Check: the scores add up to {float(r.scores.sum()):.2f}, and replacing every earlier token by "
                    f"a blank one changes that number by {r.target - r.baseline_target:.2f} (computed at {r.steps} "
                    "points between the two): the closer the two, the more of the prediction the scores explain.")
    return TokenExplanation(method, token, other if alt is not None else None, p,
                            None if alt is None else math.exp(r.alternative_log_prob), highlights, summary, notices)


def explain_text(service: DemoService, text: object, position: object, method: object,
                 alternative: object = None) -> TokenExplanation:
    """Token `position` (1-based) of `text` as the chat reads it, `[bos] + encode(text)` (`prompt_ids`)."""
    with service.compute(heavy=True):
        ckpt = service.lm
        model, tok = ckpt.require()
        text, notices = visitor_text(text)
        ids = prompt_ids(text, tok)
        n = len(ids) - 1
        if not n:
            raise DemoError("Type a text first, then pick one of its tokens.")
        k = int(round(read_number(position, 0)))
        if not 1 <= k <= n:
            raise DemoError(f"Position {k} is outside the text's tokens: pick 1..{n}.")
        return explain_ids(ckpt, ids, k, max(0, k - model.config.block_size), method, alternative, notices)


def explain_step(service: DemoService, generated: object, step: object, method: object,
                 alternative: object = None) -> TokenExplanation:
    """Step `step` (1-based) of the last continuation, `generated` = (token ids, number generated)."""
    with service.compute(heavy=True):
        ckpt = service.lm
        model, _ = ckpt.require()
        token_ids, n_generated = read_generated(generated, model.config.vocab_size)
        k = int(round(read_number(step, 0)))
        if not 1 <= k <= n_generated:
            raise DemoError(f"Step {k} is not one of the continuation's: pick 1..{n_generated}.")
        prompt_len = len(token_ids) - n_generated
        start = window_start(prompt_len, k - 1, model.generation_window())
        return explain_ids(ckpt, token_ids, prompt_len + k - 1, start, method, alternative)
