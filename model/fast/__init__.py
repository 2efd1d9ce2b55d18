"""Speed, beside the lesson: the same numbers as `model/`'s layers, in less time or memory. Nothing
here is needed to understand a Transformer; read `model/` first.

- `decode.py`: the language model's one-token generation step with its weights bound once per
  stream, built from the block modules themselves (`can_decode`, `decode_step`);
- `kv_buffer.py`: a KV cache written in place (`KVBuffer`), which that step keeps;
- `row_layout.py`: the weight layout a single row is multiplied by fastest (`row_weight`);
- `cross_entropy.py`: the loss from the hidden states, a chunk at a time, without the logits.

The lesson reaches this package at two marked two-branch `if`s: the loss (`model/outputs.py`,
`head_and_loss`) and the language model's next token (`DecoderOnlyLM.next_token_logits`).
"""

from .cross_entropy import linear_cross_entropy
from .decode import can_decode, decode_step
from .kv_buffer import KVBuffer
from .row_layout import row_weight

__all__ = ["KVBuffer", "can_decode", "decode_step", "linear_cross_entropy", "row_weight"]
