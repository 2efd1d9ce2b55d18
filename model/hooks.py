"""Named points: every value a learner or a tool looks at has one stable name, and reading a value
and replacing it go through that name (TransformerLens' `HookPoint`, nnsight's trace-and-intervene).

A `HookPoint` is the identity function, placed in the forward pass where a value is worth seeing;
its name is its module path (TransformerLens' convention): `decoder.layers.2.self_attn.hook_weights`
is the attention weights of the decoder's third layer, `encoder.layers.0.feed_forward.hook_hidden`
the first encoder layer's feed-forward activations, and the module the name leads to computed the
value (`model.get_submodule("decoder.layers.2.self_attn").in_proj` made its queries). Nothing
happens at a point until a caller attaches to it, for the passes run inside a `with` block:

    with lm.hooks(read=["decoder.layers.0.self_attn.hook_weights"]) as seen:        # read a value
        lm(ids)
    seen["decoder.layers.0.self_attn.hook_weights"]                                 # (B, H, T, T)

    with lm.hooks(patch={"decoder.layers.0.self_attn.hook_scores": lambda s: s * 8}):  # change it
        lm(ids)

(`model.hooks(...)` is `attach(model, ...)`.) The names (`model.point_names()` lists a model's,
`POINTS` says what each kind holds), with `{pos}` the positional encoding of a stack's input (`pos`
in the language model; `src_pos`, `tgt_pos` in the encoder-decoder), `{stack}` `decoder` (both
models) or `encoder`, `{i}` a layer counted from 0 and `{j}` its residual sublayer (0: self-attention;
then cross-attention in the encoder-decoder's decoder; last: the feed-forward network):

    {pos}.hook_embed       token vectors × √d_model             (B, T, C)
    {pos}.hook_pos         the positional rows added to them    (T, C)
    {pos}.hook_input       their sum: what layer 0 reads        (B, T, C)
    {stack}.layers.{i}.sublayer.{j}.hook_in     the sublayer's input (normalised when pre-norm)  (B, T, C)
    {stack}.layers.{i}.sublayer.{j}.hook_resid  the residual stream after it   (B, T, C)
    {stack}.layers.{i}.{att}.hook_q / _k / _v   each head's queries, keys, values   (B, H, T, d_k)
                                                att: self_attn, or cross_attn (the decoder's, reading the memory)
    {stack}.layers.{i}.{att}.hook_scores   Q Kᵀ / √d_k before the mask     (B, H, T_q, T_k)
    {stack}.layers.{i}.{att}.hook_mask     True where a query may look     (B or 1, 1, T_q, T_k)
    {stack}.layers.{i}.{att}.hook_weights  the softmax: attention weights  (B, H, T_q, T_k)
    {stack}.layers.{i}.{att}.hook_heads    each head's output, before the output projection  (B, H, T_q, d_k)
    {stack}.layers.{i}.{att}.hook_out      what the attention writes       (B, T, C)
    {stack}.layers.{i}.feed_forward.hook_hidden   GELU(x W₁ + b₁)           (B, T, d_ff)
    {stack}.layers.{i}.feed_forward.hook_out      what the network writes   (B, T, C)
    {stack}.hook_norm      the last layer's output, normalised  (B, T, C)
    embed.hook_logits      scores over the vocabulary           (B, T, vocab)

Why a context, not hooks registered on modules: the app shares one model between every visitor's
thread, so an attachment must see only the passes of the code that made it. The attachments live in
a `ContextVar`: each thread (and each asyncio task) sees its own, other threads' passes go through
untouched, and so does every pass when nothing is attached (one context lookup per point; the
tests and `benchmarks.generate` / `benchmarks.train_throughput` hold that to noise). A point is
attached to one model's `HookPoint` objects, so two models of the same shape (the forward and
backward readers) never share an attachment.
"""

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import nn

# HookPoint -> what runs there, in order: each takes the value and returns the value passed on
_ATTACHED: ContextVar[dict["HookPoint", tuple[Callable, ...]] | None] = ContextVar("attached", default=None)

POINTS = {  # the last part of a name -> what the value is (the app and the docs say it in these words)
    "hook_embed": "the token vectors (embedding rows × √d_model)",
    "hook_pos": "the positional encoding added to them",
    "hook_input": "token vectors + positions: what the first layer reads",
    "hook_in": "the sublayer's input, normalised (pre-norm)",
    "hook_q": "the queries, per head", "hook_k": "the keys, per head", "hook_v": "the values, per head",
    "hook_scores": "query·key / √d_k, before the mask",
    "hook_mask": "where each query may look (True) and may not (False)",
    "hook_weights": "the attention weights (softmax of the masked scores)",
    "hook_heads": "each head's output: its weighted sum of the values",
    "hook_out": "what the sublayer writes into the residual stream",
    "hook_resid": "the residual stream after the sublayer",
    "hook_hidden": "the feed-forward network's hidden activations, after GELU",
    "hook_norm": "the last layer's output, normalised",
    "hook_logits": "a score for every token of the vocabulary",
}


class HookPoint(nn.Module):
    """The identity: where a value can be read or replaced (`hooks`), named by its module path.

    `__call__` is the forward pass itself (no `nn.Module` hook machinery): with nothing attached
    in this context it is one `ContextVar` lookup."""

    def __call__(self, x):
        attached = _ATTACHED.get()
        if attached is None:
            return x
        for action in attached.get(self, ()):
            x = action(x)
        return x


def watched(*points: HookPoint) -> bool:
    """Whether any of these points has something attached in this context: a layer computes a value
    that its fast path never materialises (the attention weights) only when someone reads or patches it."""
    attached = _ATTACHED.get()
    return attached is not None and any(p in attached for p in points)


def names(model: nn.Module) -> list[str]:
    """Every point's name, in the order the modules were registered (a layer's sublayer connections
    after its attention and feed-forward network)."""
    return list(points(model))


def points(model: nn.Module) -> dict[str, HookPoint]:
    """name (the module path within `model`) -> its `HookPoint`."""
    return {name: module for name, module in model.named_modules() if isinstance(module, HookPoint)}


def attached(model: nn.Module) -> bool:
    """Whether anything is attached to a point of `model` in this context (the fast decode step,
    which runs no points, then steps aside for the layers)."""
    active = _ATTACHED.get()
    return active is not None and any(p in active for p in points(model).values())


def _resolve(model: nn.Module, wanted: Iterable[str]) -> dict[str, HookPoint]:
    known = points(model)
    unknown = [name for name in wanted if name not in known]
    if unknown:
        stems = sorted({n.rsplit(".", 1)[-1] for n in known})
        raise KeyError(f"{type(model).__name__} has no point {unknown[0]!r}; its points end in {', '.join(stems)} "
                       f"(model.point_names() lists them all)")
    return {name: known[name] for name in wanted}


@contextmanager
def attach(model: nn.Module, read: Iterable[str] = (),
          patch: Mapping[str, Callable[[torch.Tensor], torch.Tensor]] | None = None) -> Iterator[dict]:
    """Within the block, this context's forward passes of `model` replace each point in `patch` by
    `fn(value)` and record each point in `read`: the returned dict maps its name to the last value
    that went through it (after any patch, so what the rest of the pass used). Attachments nest: an
    inner block adds its actions after the outer block's at the same point."""
    read, patch = list(read), dict(patch or {})
    seen: dict[str, torch.Tensor] = {}
    actions: dict[HookPoint, list[Callable]] = {}
    for name, point in _resolve(model, patch).items():
        actions.setdefault(point, []).append(patch[name])
    for name, point in _resolve(model, read).items():
        def record(x, name=name):
            seen[name] = x
            return x
        actions.setdefault(point, []).append(record)
    outer = _ATTACHED.get() or {}
    merged = dict(outer)
    for point, fns in actions.items():
        merged[point] = (*outer.get(point, ()), *fns)
    token = _ATTACHED.set(merged)
    try:
        yield seen
    finally:
        _ATTACHED.reset(token)
