"""The linear (fused) cross-entropy gives F.cross_entropy's loss and gradients."""

import pytest
import torch
import torch.nn.functional as F

from model.fast.cross_entropy import LinearCrossEntropy, linear_cross_entropy


@pytest.mark.parametrize("n, vocab, chunk", [(37, 50, 8), (64, 1000, 1000), (5, 7, 1), (4, 3, 2**22)])
@pytest.mark.parametrize("grad_scale", [1.0, -2.5, 0.0])
def test_linear_matches_torch_on_materialised_logits(monkeypatch, n, vocab, chunk, grad_scale):
    """loss(x Wᵀ) and the gradients of x and W, against F.cross_entropy of the full logits: chunks of
    1 row, several, a last partial one and one for all; ignored rows; any incoming gradient."""
    monkeypatch.setattr("model.fast.cross_entropy.LOGITS_CHUNK_ELEMENTS", chunk * vocab)
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, 6, generator=g, dtype=torch.float64, requires_grad=True)
    w = (torch.randn(vocab, 6, generator=g, dtype=torch.float64) * 2).requires_grad_()
    targets = torch.randint(0, vocab, (n,), generator=g)
    targets[1::3] = -100
    ours_x, ours_w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    expected = F.cross_entropy(x @ w.T, targets, ignore_index=-100)
    got = linear_cross_entropy(ours_x, ours_w, targets)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)
    (expected * grad_scale).backward()
    (got * grad_scale).backward()
    torch.testing.assert_close(ours_x.grad, x.grad, atol=1e-12, rtol=0)
    torch.testing.assert_close(ours_w.grad, w.grad, atol=1e-12, rtol=0)


def test_linear_without_grad_gives_the_loss_alone():
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(20, 8, generator=g), torch.randn(30, 8, generator=g, requires_grad=True)
    targets = torch.randint(0, 30, (20,), generator=g)
    with torch.no_grad():
        loss = linear_cross_entropy(x, w, targets)
    assert loss.grad_fn is None
    torch.testing.assert_close(loss, F.cross_entropy(x @ w.detach().T, targets), atol=1e-6, rtol=0)


def test_linear_all_rows_ignored_gives_nan_like_torch():
    x, w, targets = torch.randn(3, 4), torch.randn(5, 4), torch.full((3,), -100)
    assert torch.isnan(linear_cross_entropy(x, w, targets)) and torch.isnan(F.cross_entropy(x @ w.T, targets))


def test_linear_gradcheck():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(6, 3, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 3, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([0, 4, -100, 2, 2, 1])
    assert torch.autograd.gradcheck(lambda a, b: LinearCrossEntropy.apply(a, b, targets, -100, None), (x, w))


@pytest.mark.parametrize("frozen", ["x", "weight"])
def test_linear_skips_the_gradient_of_a_frozen_input(frozen):
    """A frozen output projection (or input) gets no gradient, and the other one is still exact."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(9, 5, generator=g, dtype=torch.float64, requires_grad=frozen != "x")
    w = torch.randn(11, 5, generator=g, dtype=torch.float64, requires_grad=frozen != "weight")
    targets = torch.randint(0, 11, (9,), generator=g)
    linear_cross_entropy(x, w, targets).backward()
    trained = w if frozen == "x" else x
    expected = trained.grad.clone()
    trained.grad = None
    F.cross_entropy(x @ w.T, targets).backward()
    torch.testing.assert_close(expected, trained.grad, atol=1e-12, rtol=0)
    assert (x if frozen == "x" else w).grad is None


def test_linear_in_bfloat16_matches_torch_on_bfloat16_logits(monkeypatch):
    """The autocast path: products in bfloat16, softmax and loss in float32. Against F.cross_entropy
    of the same bfloat16 products taken up to float32 (what autocast would compute), over chunks."""
    monkeypatch.setattr("model.fast.cross_entropy.LOGITS_CHUNK_ELEMENTS", 16 * 300)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(50, 32, generator=g, requires_grad=True)
    w = torch.randn(300, 32, generator=g, requires_grad=True)
    targets = torch.randint(0, 300, (50,), generator=g)
    targets[::7] = -100
    ours_x, ours_w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    expected = F.cross_entropy((x.bfloat16() @ w.bfloat16().T).float(), targets, ignore_index=-100)
    got = linear_cross_entropy(ours_x, ours_w, targets, compute_dtype=torch.bfloat16)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    expected.backward()
    got.backward()
    assert ours_x.grad.dtype == ours_w.grad.dtype == torch.float32
    # the gradient's products run in bfloat16 (8-bit mantissa): ~1e-2 relative to the gradient's scale
    for ours, ref in ((ours_x.grad, x.grad), (ours_w.grad, w.grad)):
        assert (ours - ref).abs().max() <= 2e-2 * ref.abs().max()
