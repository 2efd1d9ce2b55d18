"""A single row multiplied through the transposed weight `row_weight` gives equals F.linear, and
follows weight updates; the layers themselves stay plain nn.Linear."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import DecoderOnlyConfig, DecoderOnlyLM, GenerationConfig
from model.fast import row_weight


def test_single_row_matches_f_linear_and_caches_the_transposed_weight():
    torch.manual_seed(0)
    layer = nn.Linear(24, 40)
    x = torch.randn(1, 1, 24)
    with torch.inference_mode():
        out = F.linear(x, row_weight(layer.weight), layer.bias)
        assert out.shape == (1, 1, 40)
        torch.testing.assert_close(out, F.linear(x, layer.weight, layer.bias), atol=1e-6, rtol=0)
        cached = layer.weight._row_weight[1]
        assert cached.shape == (40, 24) and cached.t().is_contiguous() and torch.equal(cached, layer.weight)
        assert row_weight(layer.weight) is cached  # made once
    torch.testing.assert_close(F.linear(x[0, 0], row_weight(layer.weight)), x[0, 0] @ layer.weight.t(),
                               atol=1e-6, rtol=0)


def test_a_changed_weight_is_transposed_again():
    torch.manual_seed(1)
    layer = nn.Linear(5, 8)
    x = torch.randn(1, 5)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.5)
    with torch.no_grad():
        before = F.linear(x, row_weight(layer.weight), layer.bias)
    layer(torch.randn(3, 5)).sum().backward()  # training: several rows, with grad
    optimizer.step()
    with torch.no_grad():
        after = F.linear(x, row_weight(layer.weight), layer.bias)
        expected_after = F.linear(x, layer.weight, layer.bias)
        layer.weight.copy_(torch.randn(8, 5))  # as load_state_dict does
        loaded = F.linear(x, row_weight(layer.weight), layer.bias)
        expected_loaded = F.linear(x, layer.weight, layer.bias)
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, expected_after, atol=1e-6, rtol=0)
    torch.testing.assert_close(loaded, expected_loaded, atol=1e-6, rtol=0)


def test_only_the_decode_step_makes_the_copies_and_the_layers_stay_nn_linear():
    """Training and multi-row passes use the weights as they are; a cached generation binds the
    copies once, for the wider-output products only (Q/K/V, the feed-forward's first layer)."""
    torch.manual_seed(2)
    lm = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=30, block_size=8, n_layer=1, n_head=2, d_model=8, d_ff=16))
    lm(torch.randint(0, 30, (2, 6)), targets=torch.randint(0, 30, (2, 6))).loss.backward()  # autograd flows
    assert all(p.grad is not None for p in lm.parameters())
    assert not any(hasattr(p, "_row_weight") for p in lm.parameters())
    block = lm.decoder.layers[0]
    linears = [block.self_attn.in_proj, block.self_attn.out_proj, block.feed_forward.w_1, block.feed_forward.w_2]
    assert all(type(layer) is nn.Linear and set(layer.state_dict()) == {"weight", "bias"} for layer in linears)
    lm.eval().generate(torch.tensor([[1, 2]]), GenerationConfig(max_new_tokens=3, temperature=0))
    copied = [hasattr(layer.weight, "_row_weight") for layer in linears]
    assert copied == [True, False, True, False]  # (24, 8), (8, 8), (16, 8), (8, 16): out > in only


def test_a_narrowing_layer_keeps_nn_linear_layout():
    """out <= in (the feed-forward's second layer): (out, in) is already the faster layout, no copy."""
    torch.manual_seed(2)
    layer = nn.Linear(40, 24)
    with torch.inference_mode():
        assert row_weight(layer.weight) is layer.weight
    assert not hasattr(layer.weight, "_row_weight")
