"""Cross-entropy over a large vocabulary, from the hidden states, without the logits.

    loss = mean over kept rows of  logsumexp(z) - z[target],    d loss / d z = (softmax(z) - onehot) / n

A training step does not need the logits z = x Wᵀ, only the loss and its gradients, and at the LM's
4,096 positions x 8,192 tokens `F.cross_entropy` on materialised logits writes three (N, V) tensors
of 134 MB (the logits, their log-softmax, the gradient). `linear_cross_entropy` takes the hidden
states and the output projection, and computes each chunk's logits, loss and gradients in one go,
so the (N, V) logits and their gradient never exist. Their memory is not only written: a tensor
that large comes fresh from the OS at every step, a page fault per 4 KB, which on our CPU machine
cost more than the arithmetic (docs/log.md). Same numbers as `F.cross_entropy` (tested to 1e-6).
"""

import torch
from torch.autograd.function import once_differentiable

LOGITS_CHUNK_ELEMENTS = 2**22  # 16 MB of float32 logits per chunk: matmuls of full efficiency


class LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, ignore_index: int,
                compute_dtype: torch.dtype | None) -> torch.Tensor:
        """x: (N, C) hidden states, weight: (V, C) output projection, targets: (N,) -> the mean loss
        of the logits x Wᵀ. With a gradient wanted, it is computed here too, a chunk at a time
        (dL/dx = G W, dL/dW = Gᵀ x, G the chunk's dL/dz), and the backward pass only scales it.

        The products run in `compute_dtype` (bfloat16 under autocast; None: x's dtype); the
        log-sum-exp, the softmax and the loss in float32 at least, and dL/dW is accumulated in the
        weight's dtype."""
        V = weight.size(0)
        rows = max(1, LOGITS_CHUNK_ELEMENTS // V)
        keep = targets != ignore_index
        safe_targets = targets.masked_fill(~keep, 0)[:, None]  # (N, 1)
        n = keep.sum()
        compute = compute_dtype or x.dtype
        stats = torch.promote_types(compute, torch.float32)  # the dtype of the softmax and the loss
        exact = compute == stats == x.dtype == weight.dtype  # no casts: products write straight into place
        share = (keep.to(stats) / n)[:, None]  # (N, 1): each kept row's share of the mean, 0 for ignored rows
        want_x, want_w = ctx.needs_input_grad[:2]  # a frozen output projection needs no dL/dW
        want_grad = want_x or want_w
        xc, wc = x.to(compute), weight.to(compute)
        grad_x = torch.empty_like(x) if want_x else None
        grad_w = torch.zeros_like(weight) if want_w else None
        z_buf = xc.new_empty(min(rows, x.size(0)), V)  # one chunk's logits, reused by every chunk
        zf_buf = z_buf if exact else z_buf.new_empty(z_buf.shape, dtype=stats)
        loss = x.new_zeros((), dtype=stats)
        for start in range(0, x.size(0), rows):
            end = min(start + rows, x.size(0))
            z = torch.mm(xc[start:end], wc.t(), out=z_buf[: end - start])  # (rows, V)
            z = z if exact else zf_buf[: end - start].copy_(z)  # float32 (at least) from here on
            lse = torch.logsumexp(z, dim=1)
            loss += ((lse - z.gather(1, safe_targets[start:end])[:, 0]) * keep[start:end]).sum()
            if want_grad:
                z.sub_(lse[:, None]).exp_().mul_(share[start:end])  # softmax(z) x share
                z.scatter_add_(1, safe_targets[start:end], -share[start:end])  # - onehot x share
                g = z if exact else z.to(compute)
                if want_x:
                    if exact:
                        torch.mm(g, wc, out=grad_x[start:end])
                    else:
                        grad_x[start:end] = torch.mm(g, wc)
                if want_w:
                    if exact:
                        grad_w.addmm_(g.t(), xc[start:end])
                    else:
                        grad_w += torch.mm(g.t(), xc[start:end])
        ctx.grads = grad_x, grad_w
        return loss / n

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss: torch.Tensor):
        return *(None if g is None else g * grad_loss.to(g.dtype) for g in ctx.grads), None, None, None


def linear_cross_entropy(x: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                         ignore_index: int = -100, compute_dtype: torch.dtype | None = None) -> torch.Tensor:
    """`F.cross_entropy(x @ weight.T, targets, ignore_index=...)` for (N, C) x, (V, C) weight and (N,)
    targets, without the (N, V) logits; the products in `compute_dtype` (None: autocast's dtype under
    autocast, as autocast would run them, else x's), the loss in float32."""
    device_type = x.device.type
    if compute_dtype is None and torch.is_autocast_enabled(device_type):
        compute_dtype = torch.get_autocast_dtype(device_type)
    with torch.autocast(device_type, enabled=False):  # the casts are the function's own (see forward)
        return LinearCrossEntropy.apply(x, weight, targets, ignore_index, compute_dtype)
