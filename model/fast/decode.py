"""The language model's cached one-token generation step, without the layers' Python.

A cached step feeds one token through every block: a few small products each. At the shipped shape
a step is ~4 ms on a busy machine, ~3 of them the weights streaming through the products; the
layers' Python around those products (residual/dropout wrappers, sublayer closures, attention-map
bookkeeping, module calls, ~170 module attributes looked up per token) had added ~2 ms more
(`python -m benchmarks.generate`). `decode_step` runs the same products in the same order on the
same weights, with the Python done once per stream: at its first step each block's cache becomes a
`BlockStep`, the block's keys and values in a `KVBuffer` (the layers append to it as to any cache)
beside the block's own parts, bound.

It is built from the block's modules, not written again: each norm is the norm module's own
`forward` (whatever `build_norm` makes; `nn.LayerNorm` bound to its parameters once, `bound`), the
activation is the feed-forward's `activation` (likewise `nn.GELU`), the
residual order is each sublayer's `norm_first`, and each product is the `nn.Linear`'s weight and
bias (zeros where it has none), as `torch.addmm` takes them in the layout `row_weight` gives a
single row. What the step cannot follow it leaves to the layers (`can_decode`): dropout in training
mode, autograd, autocast (its out= product would not autocast), and a point of the model that someone
reads or patches (`model/hooks.py`: the step runs none of them).
`tests/test_decode_step.py` holds the step against the layers for every option.
"""

from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from ..hooks import attached
from .kv_buffer import KVBuffer
from .row_layout import row_weight


def can_decode(model: nn.Module) -> bool:
    """Whether `decode_step` computes what the layers of `model` (a DecoderOnlyLM) would: eval mode
    (dropout is the identity), no autograd, no autocast (generation stays float32), and nothing
    attached to its named points in this context (a head knocked out, a value read), and a model with
    every part (`config.parts_off`: a `training.why` model steps through its layers)."""
    return (not model.config.parts_off and not model.training and not torch.is_grad_enabled()
            and not torch.is_autocast_enabled(model.pos.pe.device.type) and not attached(model))


def decode_step(model: nn.Module, token: torch.Tensor, cache) -> torch.Tensor:
    """One cached step of a DecoderOnlyLM: (1, 1) token -> (1, vocab) logits, the position after
    the `cache.length` the cache holds; the same numbers as the layers' forward (tested to 1e-5)."""
    if not isinstance(cache.layers[0].self_attn, BlockStep):  # the stream's first step: bind once
        for layer_cache, block in zip(cache.layers, model.decoder.layers, strict=True):
            layer_cache.self_attn = BlockStep(block, layer_cache.self_attn, model.config.block_size)
    embed = model.embed
    x = F.embedding(token[0], embed.lut.weight) * embed.scale + model.pos.pe[cache.length]  # (1, C)
    for layer_cache in cache.layers:
        x = layer_cache.self_attn.step(x)
    cache.length += 1
    return torch.mm(model.decoder.norm(x), row_weight(embed.lut.weight).t())  # (1, vocab): the tied projection


def bound(module: nn.Module):
    """A norm or activation module as a function of x alone. `nn.LayerNorm.forward` and
    `nn.GELU.forward` look their parameters and settings up at every call (through
    `nn.Module.__getattr__`: ~15 us a token at the shipped shape); bound once, the same functional
    call takes the same arguments. Any other module steps through its own `forward`, so a new norm
    or activation is never skipped."""
    if type(module) is nn.LayerNorm:
        return partial(F.layer_norm, normalized_shape=module.normalized_shape, weight=module.weight,
                       bias=module.bias, eps=module.eps)
    if type(module) is nn.GELU:
        return partial(F.gelu, approximate=module.approximate)
    return module.forward


def _product(linear: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
    """An nn.Linear as `torch.addmm(bias, x, matrix)` takes it: bias (out,), matrix (in, out)."""
    bias = linear.bias if linear.bias is not None else linear.weight.new_zeros(linear.out_features)
    return bias, row_weight(linear.weight).t()


class BlockStep(KVBuffer):
    """One decoder block for one token: its keys and values so far (the `KVBuffer` it is) and its
    parts, looked up once. The Q/K/V product is written into one scratch row whose query and
    key|value views are made here (allocating the row and making the views at every product was
    measured 1-3% slower per token)."""

    def __init__(self, block: nn.Module, past, capacity: int):
        super().__init__(capacity)
        if past.k is not None:  # the prompt's keys/values, appended by the layers
            self.append(past.k, past.v)
        attn, ff = block.self_attn, block.feed_forward
        around_attn, around_ff = block.sublayer  # residual + norm around each sublayer
        self.attn_norm_first, self.attn_norm = around_attn.norm_first, bound(around_attn.norm)
        self.ff_norm_first, self.ff_norm = around_ff.norm_first, bound(around_ff.norm)
        self.qkv_b, self.qkv_m = _product(attn.in_proj)
        self.out_b, self.out_m = _product(attn.out_proj)
        self.ff_1_b, self.ff_1_m = _product(ff.w_1)
        self.activation = bound(ff.activation)
        self.ff_2_b, self.ff_2_m = _product(ff.w_2)
        C, H = attn.d_model, attn.n_head
        self.width = C
        self.qkv = self.qkv_b.new_empty(1, 3 * C)  # scratch: q | k | v
        self.q = self.qkv[:, :C].view(1, H, 1, C // H)  # (1, H, 1, d_k)
        self.kv = self.qkv[:, C:].view(2, 1, H, 1, C // H)  # keys and values, as `extend` takes them

    def step(self, x: torch.Tensor) -> torch.Tensor:
        """x: (1, C), the residual stream entering the block -> leaving it (`DecoderLayer.forward`)."""
        h = self.attn_norm(x) if self.attn_norm_first else x
        torch.addmm(self.qkv_b, h, self.qkv_m, out=self.qkv)
        k, v = self.extend(self.kv)  # (1, H, T, d_k) each
        out = F.scaled_dot_product_attention(self.q, k, v)  # one query sees every key: (1, H, 1, d_k)
        a = torch.addmm(self.out_b, out.view(1, self.width), self.out_m)
        x = x + a if self.attn_norm_first else self.attn_norm(x + a)
        h = self.ff_norm(x) if self.ff_norm_first else x
        f = torch.addmm(self.ff_2_b, self.activation(torch.addmm(self.ff_1_b, h, self.ff_1_m)), self.ff_2_m)
        return x + f if self.ff_norm_first else self.ff_norm(x + f)
