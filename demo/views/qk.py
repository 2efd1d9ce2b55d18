"""Query · key: how one head's attention weights come about, for one query token (the neuron view
of bertviz). The weights are softmax(q·k / √d_k) over the keys the query may see; this shows the
scaled dot products before the softmax, and the softmax that turns them into the weights (no
Gradio here; `demo.tabs.qk_panel` shows it).

The query and key vectors are read at the layer's named points (`….q`, `….k`, `model/hooks.py`)
while `demo.views.attention` draws the maps; the weights computed here from them are checked
against the model's.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from demo.serving import Checkpoint, DemoService, read_number
from demo.views.attention import attention_kind, attention_maps, attention_shape, served
from model import attention_point

MISMATCH = 1e-3  # recomputed weights further than this from the model's get a notice


@dataclass
class QueryKeyView:
    title: str
    layer: int
    head: int
    query: int  # index into query_tokens
    query_token: str
    key_tokens: list[str]
    scores: np.ndarray  # (T_k,) q·k/√d_k; NaN where the mask hides the key
    weights: np.ndarray  # (T_k,) the softmax of the scores: the head's attention weights for this query
    notices: list[str]


def _inputs(ckpt: Checkpoint, text: object, kind: str, layer: int):
    """The attention maps of `demo.views.attention`, and the chosen layer's queries and keys (1, H, T, d_k)."""
    model, _ = ckpt.require()
    spec = attention_kind(kind)
    q, k = (attention_point(spec.map_kind, layer, part) for part in ("q", "k"))
    with model.hooks(read=[q, k]) as seen:  # this request's pass only: the model is shared
        result = attention_maps(ckpt, text, kind, layer)
    return result, seen[q], seen[k]


def query_key(service: DemoService, text: object, kind: str = "lm_self", layer: object = 0, head: object = 0,
              query: object = 0) -> QueryKeyView:
    """q·k/√d_k for one head and one query token (0-based `layer`, `head`, `query`, clamped and said;
    a negative `query` counts from the end, as Python's indices do)."""
    ckpt = served(service, kind)
    with service.compute():
        n_layers, n_heads = attention_shape(ckpt, kind)
        notices = []
        values = []
        for name, value, size in (("Layer", layer, n_layers), ("Head", head, n_heads)):
            i = int(round(read_number(value, 0)))
            if not 0 <= i < size:
                notices.append(f"{name} {i + 1} does not exist (1 to {size}): showing the nearest.")
                i = min(max(i, 0), size - 1)
            values.append(i)
        layer_i, head_i = values
        result, q_all, k_all = _inputs(ckpt, text, kind, layer_i)
        notices += result.notices
        q_i = int(round(read_number(query, 0)))
        t_q = len(result.query_tokens)
        q_i += t_q if -t_q <= q_i < 0 else 0
        if not 0 <= q_i < t_q:
            notices.append(f"Query token {q_i + 1} does not exist (1 to {t_q}): showing the nearest.")
            q_i = min(max(q_i, 0), t_q - 1)

        d_k = q_all.size(-1)
        with torch.inference_mode():
            q, keys = q_all[0, head_i, q_i].float(), k_all[0, head_i].float()  # (d_k,), (T_k, d_k)
            scores = (keys @ q / math.sqrt(d_k)).cpu().numpy()
        if result.causal:  # a query sees the keys up to its own position (aligned to the end)
            scores[q_i + 1 + len(result.key_tokens) - t_q:] = np.nan
        visible = ~np.isnan(scores)
        weights = np.zeros_like(scores)
        weights[visible] = torch.tensor(scores[visible]).softmax(-1).numpy()
        model_weights = result.all_weights[layer_i, head_i, q_i]
        gap = float(np.abs(weights - model_weights).max())
        if gap > MISMATCH:  # e.g. a model served in bfloat16: say so rather than pass the numbers off as exact
            notices.append(f"These float32 weights differ from the ones the model used by up to {gap:.3f}.")
        return QueryKeyView(result.title, layer_i, head_i, q_i, result.query_tokens[q_i], result.key_tokens, scores,
                            weights, notices)
