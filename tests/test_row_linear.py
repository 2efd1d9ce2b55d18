"""The single-row product through a transposed weight equals F.linear, and follows weight updates."""

import torch
import torch.nn.functional as F

from model.row_linear import Linear, row_linear


def test_single_row_matches_f_linear_and_caches_the_transposed_weight():
    torch.manual_seed(0)
    layer = Linear(24, 40)
    x = torch.randn(1, 1, 24)
    with torch.inference_mode():
        out = layer(x)
        assert out.shape == (1, 1, 40)
        torch.testing.assert_close(out, F.linear(x, layer.weight, layer.bias), atol=1e-6, rtol=0)
        cached = layer.weight._row_linear_t[1]
        assert cached.shape == (40, 24) and cached.t().is_contiguous() and torch.equal(cached, layer.weight)
        layer(x)
        assert layer.weight._row_linear_t[1] is cached  # made once
    torch.testing.assert_close(row_linear(x[0, 0], layer.weight), x[0, 0] @ layer.weight.t(), atol=1e-6, rtol=0)


def test_a_changed_weight_is_transposed_again():
    torch.manual_seed(1)
    layer = Linear(5, 8)
    x = torch.randn(1, 5)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.5)
    with torch.no_grad():
        before = layer(x)
    layer(torch.randn(3, 5)).sum().backward()  # training: several rows, with grad
    optimizer.step()
    with torch.no_grad():
        after = layer(x)
        expected_after = F.linear(x, layer.weight, layer.bias)
        layer.weight.copy_(torch.randn(8, 5))  # as load_state_dict does
        loaded = layer(x)
        expected_loaded = F.linear(x, layer.weight, layer.bias)
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, expected_after, atol=1e-6, rtol=0)
    torch.testing.assert_close(loaded, expected_loaded, atol=1e-6, rtol=0)


def test_with_grad_or_several_rows_it_is_f_linear():
    layer = Linear(6, 4)
    x = torch.randn(1, 6, requires_grad=True)
    layer(x).sum().backward()  # autograd flows as through nn.Linear
    assert x.grad.shape == (1, 6) and layer.weight.grad.shape == (4, 6)
    assert not hasattr(layer.weight, "_row_linear_t")  # the transposed copy is made only for no-grad rows
    with torch.no_grad():
        rows = torch.randn(2, 3, 6)
        torch.testing.assert_close(layer(rows), F.linear(rows, layer.weight, layer.bias), atol=0, rtol=0)
    assert isinstance(layer, torch.nn.Linear) and set(layer.state_dict()) == {"weight", "bias"}


def test_a_narrowing_layer_keeps_nn_linear_layout():
    """out <= in (the feed-forward's second layer): (out, in) is already the faster layout, no copy."""
    torch.manual_seed(2)
    layer = Linear(40, 24)
    x = torch.randn(1, 1, 40)
    with torch.inference_mode():
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias), atol=0, rtol=0)
    assert not hasattr(layer.weight, "_row_linear_t")
