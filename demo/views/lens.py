"""The Chat tab's look inside: the logit lens (`inspection.logit_lens`) over the generated tokens, i.e.
what each layer would predict at each position, if the model stopped there."""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from demo.serving import DemoError, DemoService
from inspection import logit_lens
from tokenization import token_label, visible

MAX_LENS_POSITIONS = 256  # generated tokens shown (the last ones): the chat's most, in a scroll box
TOP_K = 5
NOTHING_GENERATED = "Generate a continuation first: the logit lens shows how each of its tokens was predicted."


@dataclass
class LensView:
    layers: list[str]  # "embeddings", "block 1", ..., "block L"
    tokens: list[str]  # the generated tokens shown, one per column
    top_tokens: list[list[list[str]]]  # (L+1, N, k): each layer's k likeliest next tokens at each column
    top_probs: np.ndarray  # (L+1, N, k)
    token_probs: np.ndarray  # (L+1, N): the probability each layer gave the token that was generated
    notices: list[str]


def lens_view(service: DemoService, token_ids: Sequence[int], n_generated: int) -> LensView:
    """`token_ids`: the prompt as the model read it (start token first), then `n_generated` new tokens.

    Column j shows the prediction made at the position before generated token j, i.e. how that
    token came about, layer by layer. Only the last `block_size` tokens are read (the model's
    context), and the last `MAX_LENS_POSITIONS` generated tokens shown."""
    with service.compute(batched=True):
        ckpt = service.lm
        model, tok = ckpt.require()
        if not token_ids or n_generated < 1:
            raise DemoError(NOTHING_GENERATED)
        ids = list(token_ids)[-model.config.block_size:]
        n = min(n_generated, len(ids) - 1, MAX_LENS_POSITIONS)
        notices = []
        if n < n_generated:
            notices.append(f"The logit lens shows the last {n} of the {n_generated} generated tokens.")
        with torch.inference_mode():
            lens = logit_lens(model, torch.tensor(ids, device=ckpt.device), k=TOP_K)
        rows = slice(len(ids) - 1 - n, len(ids) - 1)  # predictions made at the positions before each shown token
        label = {i: visible(token_label(tok, i), show_spaces=True) for i in {*ids, *lens.top_ids.flatten().tolist()}}
        return LensView(
            layers=list(lens.layers),
            tokens=[label[i] for i in ids[-n:]],
            top_tokens=[[[label[i] for i in cell] for cell in row] for row in lens.top_ids[:, rows].tolist()],
            top_probs=lens.top_probs[:, rows].float().cpu().numpy(),
            token_probs=lens.next_probs[:, rows].float().cpu().numpy(),
            notices=notices)
