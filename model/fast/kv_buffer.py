"""A KV cache that writes each step's keys and values in place, for the one-token decode step.

The lesson's `AttentionCache` appends with `torch.cat`, which copies, and allocates anew, the whole
past at every token. `KVBuffer` keeps keys and values stacked in one preallocated buffer of
`capacity` positions (doubled if a sequence outruns it), so a step copies only its new positions; a
step whose new keys and values lie side by side, as the fused Q/K/V product returns them, writes
both with one copy (`extend`). `k`/`v` are views of the filled part. It has `AttentionCache`'s
interface (`k`, `v`, `append`, `reset`), so the layers use it as they use the plain one.
"""

import torch


class KVBuffer:
    def __init__(self, capacity: int = 0):
        self.capacity = capacity
        self.k: torch.Tensor | None = None  # (B, H, T_past, d_k), a view of the buffer
        self.v: torch.Tensor | None = None
        self._kv: torch.Tensor | None = None  # (2, B, H, capacity, d_k): keys, values

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """k/v: (B, H, T_new, d_k) -> every key/value so far, (B, H, T_past + T_new, d_k)."""
        return self.extend(torch.stack((k, v)))

    def extend(self, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """kv: (2, B, H, T_new, d_k), the new keys and values stacked -> every key/value so far."""
        start = 0 if self.k is None else self.k.size(2)
        end = start + kv.size(3)
        buf = self._kv
        if buf is None or end > buf.size(3) or buf.shape[1:3] != kv.shape[1:3] or buf.dtype != kv.dtype:
            size = max(end, self.capacity, 2 * buf.size(3) if start else 0)
            grown = kv.new_empty(*kv.shape[:3], size, kv.size(4))
            if start:
                grown.narrow(3, 0, start).copy_(buf.narrow(3, 0, start))
            self._kv = buf = grown
        buf.narrow(3, start, end - start).copy_(kv)
        self.k, self.v = buf.narrow(3, 0, end).unbind()
        return self.k, self.v

    def reset(self) -> None:
        """Forget the keys/values; the buffer stays allocated for the next sequence."""
        self.k = self.v = None
