"""Named points: every value a learner or a tool looks at has one stable name, and reading a value
and replacing it go through that name (TransformerLens' `HookPoint`, nnsight's trace-and-intervene).

A `HookPoint` is the identity function with a name, placed in the forward pass where a value is
worth seeing: `decoder.2.attn.weights` is the attention weights of the decoder's third layer,
`encoder.0.ffn.hidden` the first encoder layer's feed-forward activations. Nothing happens at a
point until a caller attaches to it, for the passes run inside a `with` block:

    with lm.hooks(read=["decoder.0.attn.weights"]) as seen:         # read a value
        lm(ids)
    seen["decoder.0.attn.weights"]                                   # (B, H, T, T)

    with lm.hooks(patch={"decoder.0.attn.scores": lambda s: s * 8}):  # change it, for these passes
        lm(ids)

(`model.hooks(...)` is `attach(model, ...)`.) The names (`model.point_names()` lists a model's,
`POINTS` explains each kind), with `{stack}` `decoder`
(both models) or `encoder`, and `{i}` a layer counted from 0:

    {stack}.embed          token vectors × √d_model             (B, T, C)
    {stack}.pos            the positional rows added to them    (T, C)
    {stack}.input          their sum: what layer 0 reads        (B, T, C)
    {stack}.{i}.{sub}.in   the sublayer's input (normalised when pre-norm)     sub: attn, cross, ffn
    {stack}.{i}.{sub}.out  what the sublayer writes             (B, T, C)
    {stack}.{i}.{sub}.resid  the residual stream after it       (B, T, C)
    {stack}.{i}.{att}.q / .k / .v   each head's queries, keys, values   (B, H, T, d_k)   att: attn, cross
    {stack}.{i}.{att}.scores   Q Kᵀ / √d_k before the mask     (B, H, T_q, T_k)
    {stack}.{i}.{att}.mask     True where a query may look     (B or 1, 1, T_q, T_k)
    {stack}.{i}.{att}.weights  the softmax: attention weights  (B, H, T_q, T_k)
    {stack}.{i}.{att}.heads    each head's output, before the output projection   (B, H, T_q, d_k)
    {stack}.{i}.ffn.hidden     GELU(x W₁ + b₁)                  (B, T, d_ff)
    {stack}.norm           the last layer's output, normalised  (B, T, C)
    logits                 scores over the vocabulary           (B, T, vocab)

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
    "embed": "the token vectors (embedding rows × √d_model)",
    "pos": "the positional encoding added to them",
    "input": "token vectors + positions: what the first layer reads",
    "in": "the sublayer's input, normalised (pre-norm)",
    "q": "the queries, per head", "k": "the keys, per head", "v": "the values, per head",
    "scores": "query·key / √d_k, before the mask",
    "mask": "where each query may look (True) and may not (False)",
    "weights": "the attention weights (softmax of the masked scores)",
    "heads": "each head's output: its weighted sum of the values",
    "out": "what the sublayer writes into the residual stream",
    "resid": "the residual stream after the sublayer",
    "hidden": "the feed-forward network's hidden activations, after GELU",
    "norm": "the last layer's output, normalised",
    "logits": "a score for every token of the vocabulary",
}


class HookPoint(nn.Module):
    """The identity, with a stable name: where a value can be read or replaced (`hooks`).

    `__call__` is the forward pass itself (no `nn.Module` hook machinery): with nothing attached
    in this context it is one `ContextVar` lookup."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def __call__(self, x):
        attached = _ATTACHED.get()
        if attached is None:
            return x
        for action in attached.get(self, ()):
            x = action(x)
        return x

    def extra_repr(self) -> str:
        return repr(self.name)


def watched(*points: HookPoint) -> bool:
    """Whether any of these points has something attached in this context: a layer computes a value
    that its fast path never materialises (the attention weights) only when someone reads or patches it."""
    attached = _ATTACHED.get()
    return attached is not None and any(p in attached for p in points)


def names(model: nn.Module) -> list[str]:
    """Every point's name, in the order the modules were built (roughly the order of a forward pass)."""
    return list(points(model))


def points(model: nn.Module) -> dict[str, HookPoint]:
    """name -> the model's `HookPoint`."""
    found: dict[str, HookPoint] = {}
    for module in model.modules():
        if isinstance(module, HookPoint):
            if module.name in found and found[module.name] is not module:
                raise ValueError(f"two points of the model are named {module.name!r}")
            found[module.name] = module
    return found


def owner(model: nn.Module, name: str) -> nn.Module:
    """The layer that computes the value at point `name`, whose parameters made it: `owner(lm,
    "decoder.0.attn.in")` is the residual connection whose `.norm` normalised it, `"decoder.0.attn.q"`
    the attention whose `.in_proj` projected it, `"logits"` the embeddings whose `.lut` is the table.
    A by-hand recomputation (the app's tour) reads the weights there, without knowing the modules' paths."""
    point = _resolve(model, [name])[name]
    for module in model.modules():
        for child in module.children():
            if child is point:
                return module
            if isinstance(child, nn.ModuleDict) and any(c is point for c in child.values()):
                return module
    raise KeyError(name)  # unreachable: `_resolve` found the point among the modules


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
