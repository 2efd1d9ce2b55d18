"""Query · key: how one head's attention weights come about, for one query token (the neuron view
of bertviz). The weights are softmax(q·k / √d_k) over the keys the query may see; this shows the
scaled dot products before the softmax, and the softmax that turns them into the weights (no
Gradio here; `demo.tabs.qk_panel` shows it).

The query and key vectors are recomputed from the attention layer's own input, caught on its way
in while `demo.views.attention` draws the maps, with the layer's own projection: the weights computed
here are checked against the model's.
"""

import math
import threading
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from demo.serving import Checkpoint, DemoService, read_number
from demo.views.attention import attention_kind, attention_maps, attention_shape, served
from inspection import attention_layers

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
    """The attention maps of `demo.views.attention`, and the (queries, memory) input of the chosen layer."""
    model, _ = ckpt.require()
    spec = attention_kind(kind)
    attn = attention_layers(model)[(spec.map_kind, layer)]
    caught, me = {}, threading.get_ident()

    def catch(module, args, kwargs):  # the model is shared: other requests' passes go by too
        if threading.get_ident() == me:
            caught["x"], caught["memory"] = args[0], args[1] if len(args) > 1 else kwargs.get("memory")

    hook = attn.register_forward_pre_hook(catch, with_kwargs=True)
    try:
        result = attention_maps(ckpt, text, kind, layer)
    finally:
        hook.remove()
    return result, attn, caught["x"], caught["memory"]


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
        result, attn, x, memory = _inputs(ckpt, text, kind, layer_i)
        notices += result.notices
        q_i = int(round(read_number(query, 0)))
        t_q = len(result.query_tokens)
        q_i += t_q if -t_q <= q_i < 0 else 0
        if not 0 <= q_i < t_q:
            notices.append(f"Query token {q_i + 1} does not exist (1 to {t_q}): showing the nearest.")
            q_i = min(max(q_i, 0), t_q - 1)

        C, d_k = attn.d_model, attn.d_model // attn.n_head
        w, b = attn.in_proj.weight, attn.in_proj.bias
        cols = slice(head_i * d_k, (head_i + 1) * d_k)
        with torch.inference_mode():
            q = F.linear(x[0, q_i], w[:C][cols], b[:C][cols]).float()  # (d_k,)
            keys = F.linear(x[0] if memory is None else memory[0], w[C:2 * C][cols],
                            b[C:2 * C][cols]).float()  # (T_k, d_k)
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
