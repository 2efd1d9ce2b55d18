"""The attention steps both tracks share, for one head of one layer: Q, K, V → QKᵀ → /√d_k → (the
track's mask step) → softmax. The head is recomputed from the layer's captured input
(`State.attention`) and checked against the model's captured projection and weights."""

import math

import torch

from demo.views.tour.code import CodeRef
from demo.views.tour.recompute import check, f64
from demo.views.tour.registry import Built, State, step
from demo.views.tour.show import dot, heat, num, tok


def _tail(s: State) -> str:
    return f"{tok(s.tokens[s.focus])} → {tok(s.tokens[0])}"


@step("qkv", CodeRef("model.attention.MultiHeadAttention.forward", r"q, k, v = self\.in_proj", r"_split_heads\(v\)"))
def qkv(s: State) -> Built:
    a, last = s.attention, s.focus
    row = s.head * s.d_k  # W_Q's row of this head's first query entry
    return Built(
        [heat("Q (queries)", a.q, s.tokens), heat("K (keys)", a.k, s.tokens), heat("V (values)", a.v, s.tokens)],
        [check(f"the model's Q, K, V projection ({s.where})", a.qkv, s.qkv_captured)],
        where=s.where, head=s.head + 1, n_head=s.c.n_head, d=s.d, d_k=s.d_k, n=s.n,
        token=tok(s.tokens[last]), dot=dot(s.attention_in[last], f64(s.projection.weight)[row]),
        bias=num(float(f64(s.projection.bias)[row])), q=num(float(a.q[last, 0])))


@step("scores", CodeRef("model.attention.attention", r"scores = at\(\"scores\", q @ k\.transpose"))
def scores(s: State) -> Built:
    a, last = s.attention, s.focus
    return Built([heat("QKᵀ", a.scores, s.tokens, s.tokens)], n=s.n, pair=_tail(s),
                 dot=dot(a.q[last], a.k[0]), score=num(float(a.scores[last, 0])))


@step("scaling", CodeRef("model.attention.attention", r"/ math\.sqrt"))
def scaling(s: State) -> Built:
    a, last = s.attention, s.focus
    return Built([heat("QKᵀ / √d_k", a.scaled, s.tokens, s.tokens)], d_k=s.d_k, n=s.n, pair=_tail(s),
                 score=num(float(a.scores[last, 0])), sqrt_d_k=num(math.sqrt(s.d_k)),
                 scaled=num(float(a.scaled[last, 0])))


@step("softmax", CodeRef("model.attention.attention", r"weights = scores.*softmax"))
def softmax(s: State) -> Built:
    attn, last, n = s.attention.weights, s.focus, s.n
    weights = ", ".join(f"{tok(s.tokens[j])} {num(float(attn[last, j]))}" for j in range(min(n, 6)))
    return Built(
        [heat("attention weights", attn, s.tokens, s.tokens, "weights", ~s.ok)],
        [check(f"the model's attention weights ({s.where}, head {s.head + 1})", attn, s.weights[s.head]),
         check("1 in every row's sum", attn.sum(-1), torch.ones(n, dtype=torch.float64))],
        n=n, token=tok(s.tokens[last]), weights=weights + (" …" if n > 6 else ""),
        sum=num(float(attn[last].sum())), first=tok(s.tokens[0]), first_share=f"{float(attn[:, 0].mean()):.0%}",
        last_share=f"{float(attn[last, 0]):.0%}")
