"""Scaled dot-product attention, masks and multi-head attention against independent references:
a hand computation in numpy, a worked example from the seed notes, and `nn.MultiheadAttention`."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn as nn

from model import (
    AttentionCache,
    MultiHeadAttention,
    causal_padding_mask,
    fused_attention,
    padding_mask,
    subsequent_mask,
)
from model.attention import attention, full_mask
from model.config import TransformerConfig
from model.fast import KVBuffer
from model.hooks import attach

B, H, D_K = 2, 3, 8


def qkv(t_q: int, t_k: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, t_q, D_K, generator=g), torch.randn(B, H, t_k, D_K, generator=g),
            torch.randn(B, H, t_k, D_K, generator=g))


def sdpa(q, k, v, mask=None, is_causal=False, need_weights=False):
    """The lesson's formula (`attention`, its weights read where they pass "weights") when the weights
    are wanted, else the fused kernel (`fused_attention`): -> (out, weights or None)."""
    if not need_weights:
        return fused_attention(q, k, v, mask, is_causal), None
    seen = {}
    out = attention(q, k, v, full_mask(mask, is_causal, q.size(-2), k.size(-2), q.device),
                    at=lambda name, x: seen.setdefault(name, x))
    return out, seen["weights"]


def with_weights(mha, *args, **kwargs):
    """A multi-head attention layer's output and its weights, read at its named point `hook_weights`."""
    with attach(mha, read=["hook_weights"]) as seen:
        out = mha(*args, **kwargs)
    return out, seen["hook_weights"]


def numpy_attention(q, k, v, allowed) -> tuple[np.ndarray, np.ndarray]:
    """softmax(Q Kᵀ / √d) V in float64 numpy, with a boolean `allowed` mask; all-masked rows -> 0."""
    q, k, v = (t.double().numpy() for t in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    allowed = np.broadcast_to(allowed, scores.shape)
    scores = np.where(allowed, scores, -np.inf)
    row_max = np.where(allowed.any(-1, keepdims=True), scores.max(-1, keepdims=True), 0.0)
    e = np.where(allowed, np.exp(scores - row_max), 0.0)
    total = e.sum(-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return weights @ v, weights


# --- masks -------------------------------------------------------------------------------------


def test_padding_mask_shape_and_values():
    m = padding_mask(torch.tensor([[1, 1, 0], [1, 0, 0]]))
    assert m.shape == (2, 1, 1, 3) and m.dtype == torch.bool
    assert m[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]


def test_subsequent_mask_is_lower_triangular():
    m = subsequent_mask(4)
    assert m.shape == (1, 1, 4, 4) and m.dtype == torch.bool
    assert m[0, 0].int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]


def test_causal_padding_mask_combines_both():
    m = causal_padding_mask(torch.tensor([[1, 1, 1, 0]]))
    assert m.shape == (1, 1, 4, 4)
    assert m[0, 0].int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0]]


# --- scaled dot-product attention --------------------------------------------------------------


def test_seed_worked_example_causal_softmax():
    """../shared/seeds/002_*.txt, sections 3-5: masked scores S -> weights W (printed to 3 decimals)."""
    S = torch.tensor([[0.20, 0.33, 0.37, 0.34],
                      [0.22, 0.40, 0.42, 0.31],
                      [0.29, 0.40, 0.46, 0.22],
                      [0.29, 0.37, 0.45, 0.23]])
    W = torch.tensor([[1.000, 0.000, 0.000, 0.000],
                      [0.455, 0.545, 0.000, 0.000],
                      [0.303, 0.338, 0.359, 0.000],
                      [0.238, 0.258, 0.280, 0.224]])
    q, k = (2 * S)[None, None], torch.eye(4)[None, None]  # d_k = 4: Q Kᵀ / √4 = 2S / 2 = S exactly
    v = torch.arange(16.0).view(1, 1, 4, 4)
    for kwargs in ({"is_causal": True}, {"mask": subsequent_mask(4)}):
        out, weights = sdpa(q, k, v, need_weights=True, **kwargs)
        torch.testing.assert_close(weights[0, 0], W, atol=5e-4, rtol=0)
        assert (weights[0, 0].triu(1) == 0).all()
        torch.testing.assert_close(out, weights @ v)


@pytest.mark.parametrize("t_q, t_k", [(5, 5), (3, 7)])
def test_explicit_path_matches_numpy(t_q, t_k):
    q, k, v = qkv(t_q, t_k)
    random = torch.rand(B, 1, t_q, t_k, generator=torch.Generator().manual_seed(1)) > 0.3
    causal = np.tril(np.ones((t_q, t_k), dtype=bool), t_k - t_q)  # aligned to the end
    for kwargs, allowed in [({}, True), ({"mask": random}, random.numpy()), ({"is_causal": True}, causal)]:
        out, weights = sdpa(q, k, v, need_weights=True, **kwargs)
        ref_out, ref_w = numpy_attention(q, k, v, allowed)
        np.testing.assert_allclose(weights.numpy(), ref_w, atol=1e-6)
        np.testing.assert_allclose(out.numpy(), ref_out, atol=1e-5)


def mask_cases(t_q: int, t_k: int) -> list[tuple[torch.Tensor | None, bool]]:
    g = torch.Generator().manual_seed(2)
    key_pad = torch.ones(B, t_k, dtype=torch.long)
    key_pad[1, -2:] = 0
    random = torch.rand(B, H, t_q, t_k, generator=g) > 0.4
    return [(None, False), (None, True), (padding_mask(key_pad), False), (padding_mask(key_pad), True),
            (random, False), (random, True)]


@pytest.mark.parametrize("t_q, t_k", [(6, 6), (1, 6), (3, 7), (7, 3)])
def test_fast_path_matches_explicit_path(t_q, t_k):
    q, k, v = qkv(t_q, t_k, seed=3)
    for mask, is_causal in mask_cases(t_q, t_k):
        fast, none = sdpa(q, k, v, mask=mask, is_causal=is_causal)
        explicit, weights = sdpa(q, k, v, mask=mask, is_causal=is_causal, need_weights=True)
        assert none is None and weights.shape == (B, H, t_q, t_k)
        assert not fast.isnan().any() and not explicit.isnan().any()
        torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=0)


@pytest.mark.parametrize("t_q, t_k", [(4, 4), (3, 7), (1, 5)])
def test_is_causal_is_aligned_to_the_end(t_q, t_k):
    """Query i may see keys <= i + (t_k - t_q): a block of new queries after a KV cache."""
    q, k, v = qkv(t_q, t_k, seed=4)
    _, weights = sdpa(q, k, v, is_causal=True, need_weights=True)
    allowed = torch.ones(t_q, t_k, dtype=torch.bool).tril(t_k - t_q)
    assert (weights[..., ~allowed] == 0).all()
    assert (weights[..., allowed] > 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, t_q))
    # the same rows as the last t_q queries of a full causal pass over t_k queries
    q_full = torch.cat([torch.randn(B, H, t_k - t_q, D_K), q], dim=2)
    full, _ = sdpa(q_full, k, v, is_causal=True)
    for need_weights in (False, True):
        out, _ = sdpa(q, k, v, is_causal=True, need_weights=need_weights)
        torch.testing.assert_close(out, full[:, :, -t_q:], atol=1e-5, rtol=0)


def test_weights_rows_sum_to_one_and_masked_positions_are_zero():
    q, k, v = qkv(5, 5, seed=5)
    attention_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    for mask, is_causal in [(padding_mask(attention_mask), False), (subsequent_mask(5), False),
                            (causal_padding_mask(attention_mask), False), (padding_mask(attention_mask), True)]:
        _, weights = sdpa(q, k, v, mask=mask, is_causal=is_causal, need_weights=True)
        allowed = torch.broadcast_to(mask, weights.shape)
        if is_causal:
            allowed = allowed & subsequent_mask(5)
        assert (weights[~allowed] == 0).all()
        assert (weights[allowed] > 0).all()
        torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, 5))
    assert (weights[1, :, :, 3:] == 0).all()  # padded keys get nothing from any query


def test_fully_masked_query_row_gives_zeros_not_nan():
    q, k, v = qkv(4, 4, seed=6)
    mask = torch.ones(B, 1, 4, 4, dtype=torch.bool)
    mask[0, :, 2] = False  # query 2 of batch 0 may see nothing
    for is_causal in (False, True):
        fast, _ = sdpa(q, k, v, mask=mask, is_causal=is_causal)
        explicit, weights = sdpa(q, k, v, mask=mask, is_causal=is_causal, need_weights=True)
        for t in (fast, explicit, weights):
            assert not t.isnan().any()
            assert (t[0, :, 2] == 0).all()
        torch.testing.assert_close(weights[0, :, 3].sum(-1), torch.ones(H))
    # left padding under a causal mask: the pad query at position 0 has no visible key at all
    left_pad = causal_padding_mask(torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]))
    out, weights = sdpa(q, k, v, mask=left_pad, need_weights=True)
    assert (weights[0, :, 0] == 0).all() and (out[0, :, 0] == 0).all() and not out.isnan().any()


def test_fully_masked_row_has_finite_gradients():
    q, k, v = (t.requires_grad_() for t in qkv(3, 3, seed=7))
    mask = causal_padding_mask(torch.tensor([[0, 1, 1], [1, 1, 1]]))
    for need_weights in (False, True):
        out, _ = sdpa(q, k, v, mask=mask, need_weights=need_weights)
        grads = torch.autograd.grad(out.sum(), (q, k, v))
        assert all(g.isfinite().all() for g in grads)


# --- multi-head attention ----------------------------------------------------------------------

C, N_HEAD = 12, 3
MHA_CONFIG = TransformerConfig(vocab_size=8, d_model=C, n_head=N_HEAD, dropout=0.0)


def test_attention_dropout_is_checked_and_falls_back_to_dropout():
    assert TransformerConfig(dropout=0.2).attention_weight_dropout == 0.2
    assert TransformerConfig(dropout=0.2, attention_dropout=0.0).attention_weight_dropout == 0.0
    assert TransformerConfig(dropout=0.0, attention_dropout=0.3).attention_weight_dropout == 0.3
    with pytest.raises(ValueError, match=r"^attention_dropout must be between 0.0 and 0.99, got 1.0$"):
        TransformerConfig(attention_dropout=1.0)
    with pytest.raises(ValueError, match="attention_dropout must be a finite float"):
        TransformerConfig(attention_dropout="0.1")


def test_attention_dropout_alone_decides_whether_training_mode_draws_in_attention():
    """In training mode, with `attention_dropout=0` the layer gives what evaluation mode gives, whatever
    `dropout` is (that one acts outside the layer, on sub-layer outputs); with `attention_dropout>0`
    two calls on the same input differ from each other and from evaluation mode."""
    x, memory = torch.randn(2, 7, C), torch.randn(2, 5, C)
    for attention_dropout, same in ((0.0, True), (0.5, False)):
        torch.manual_seed(0)
        mha = MultiHeadAttention(replace(MHA_CONFIG, dropout=0.5, attention_dropout=attention_dropout))
        expected = mha.eval()(x, memory)
        mha.train()
        first, second = mha(x, memory), mha(x, memory)
        assert torch.allclose(first, expected, atol=1e-6) is same and torch.allclose(first, second) is same


def mha_pair(seed: int = 0) -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    """Ours with non-zero biases, and nn.MultiheadAttention holding the very same weights."""
    torch.manual_seed(seed)
    ours = MultiHeadAttention(MHA_CONFIG).eval()
    with torch.no_grad():
        ours.in_proj.bias.normal_()
        ours.out_proj.bias.normal_()
    ref = nn.MultiheadAttention(C, N_HEAD, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.in_proj.weight)
        ref.in_proj_bias.copy_(ours.in_proj.bias)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ours, ref


def test_mha_shapes_self_cross_and_cache():
    mha = MultiHeadAttention(MHA_CONFIG).eval()
    x, memory = torch.randn(2, 5, C), torch.randn(2, 7, C)
    out = mha(x)
    assert out.shape == (2, 5, C)
    out, weights = with_weights(mha, x)
    assert out.shape == (2, 5, C) and weights.shape == (2, N_HEAD, 5, 5)
    out, weights = with_weights(mha, x, memory)
    assert out.shape == (2, 5, C) and weights.shape == (2, N_HEAD, 5, 7)

    cache = AttentionCache()
    for t in range(1, 4):
        out, weights = with_weights(mha, x[:, t - 1 : t], is_causal=True, cache=cache)
        assert out.shape == (2, 1, C) and weights.shape == (2, N_HEAD, 1, t)
        assert cache.k.shape == cache.v.shape == (2, N_HEAD, t, C // N_HEAD)


def test_mha_self_attention_cache_matches_full_pass():
    mha = MultiHeadAttention(MHA_CONFIG).eval()
    x = torch.randn(2, 6, C)
    full = mha(x, is_causal=True)
    cache = AttentionCache()
    first = mha(x[:, :4], is_causal=True, cache=cache)  # a 4-token prompt, then one token at a time
    steps = [first] + [mha(x[:, t : t + 1], is_causal=True, cache=cache) for t in (4, 5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-6, rtol=0)


@pytest.mark.parametrize("capacity", [0, 3, 16])
def test_kv_buffer_writes_in_place_and_grows(capacity):
    """The fast path's cache (`model.fast.KVBuffer`): keys/values equal the concatenation of every
    append, as the lesson's `AttentionCache` keeps them, whatever the preallocated capacity; within
    the capacity they are written into one buffer (no copy of the past per step), and a reset keeps
    that buffer for the next sequence."""
    cache = KVBuffer(capacity)
    chunks = [qkv(t, t, seed=t)[1:] for t in (4, 1, 1, 3, 1)]  # a prompt, then steps
    for i, (k, v) in enumerate(chunks):
        pointer = None if cache.k is None else cache.k.data_ptr()
        all_k, all_v = cache.append(k, v)
        torch.testing.assert_close(all_k, torch.cat([c[0] for c in chunks[: i + 1]], dim=2), atol=0, rtol=0)
        torch.testing.assert_close(all_v, torch.cat([c[1] for c in chunks[: i + 1]], dim=2), atol=0, rtol=0)
        assert cache.k is all_k and cache.k.shape == (B, H, sum(c[0].size(2) for c in chunks[: i + 1]), D_K)
        if capacity == 16 and pointer is not None:
            assert all_k.data_ptr() == pointer  # the same buffer: written in place
    pointer = cache.k.data_ptr()
    cache.reset()
    assert cache.k is None and cache.v is None
    k, v = chunks[1]
    all_k, all_v = cache.append(k, v)
    assert torch.equal(all_k, k) and torch.equal(all_v, v) and all_k.data_ptr() == pointer
    cache.reset()
    k, v = k[:1], v[:1]  # another batch size after a reset gets its own buffers
    all_k, all_v = cache.append(k, v)
    assert torch.equal(all_k, k) and torch.equal(all_v, v)


def test_mha_cross_attention_cache_is_filled_once():
    mha = MultiHeadAttention(MHA_CONFIG).eval()
    x, memory = torch.randn(1, 3, C), torch.randn(1, 7, C)
    full = mha(x, memory)
    cache = AttentionCache()
    first = mha(x[:, :1], memory, cache=cache)
    k = cache.k
    assert k.shape == (1, N_HEAD, 7, C // N_HEAD)
    rest = mha(x[:, 1:], memory, cache=cache)
    assert cache.k is k  # the memory's keys/values were not recomputed
    torch.testing.assert_close(torch.cat([first, rest], dim=1), full, atol=1e-6, rtol=0)


def test_mha_matches_torch_self_attention():
    ours, ref = mha_pair()
    x = torch.randn(2, 5, C)
    key_keep = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    causal = ~subsequent_mask(5)[0, 0]  # torch: True = not allowed
    cases = [({}, {}), ({"mask": padding_mask(key_keep)}, {"key_padding_mask": key_keep == 0}),
             ({"is_causal": True}, {"attn_mask": causal})]
    for our_kwargs, ref_kwargs in cases:
        out, weights = with_weights(ours, x, **our_kwargs)
        ref_out, ref_w = ref(x, x, x, average_attn_weights=False, **ref_kwargs)
        torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
        torch.testing.assert_close(weights, ref_w, atol=1e-5, rtol=0)
        _, ref_avg = ref(x, x, x, **ref_kwargs)
        torch.testing.assert_close(weights.mean(1), ref_avg, atol=1e-5, rtol=0)
        fast = ours(x, **our_kwargs)
        torch.testing.assert_close(fast, ref_out, atol=1e-5, rtol=0)


def test_mha_matches_torch_cross_attention():
    ours, ref = mha_pair(seed=1)
    x, memory = torch.randn(2, 4, C), torch.randn(2, 6, C)
    src_keep = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    for our_mask, key_padding_mask in [(None, None), (padding_mask(src_keep), src_keep == 0)]:
        out, weights = with_weights(ours, x, memory, mask=our_mask)
        ref_out, ref_w = ref(x, memory, memory, key_padding_mask=key_padding_mask, average_attn_weights=False)
        torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
        torch.testing.assert_close(weights, ref_w, atol=1e-5, rtol=0)
        _, ref_avg = ref(x, memory, memory, key_padding_mask=key_padding_mask)
        torch.testing.assert_close(weights.mean(1), ref_avg, atol=1e-5, rtol=0)
        if our_mask is not None:
            assert (weights[1, :, :, 4:] == 0).all()
