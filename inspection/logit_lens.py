"""The logit lens (nostalgebraist, 2020): what a decoder-only LM would predict if it stopped after
each layer. How a prediction forms through depth, position by position.

The residual stream after the embeddings (token embeddings + positions, the named point
`pos.hook_input`) and after each block (`model.residual_point`) is read off one forward pass, then
sent through what the model puts after its last block: the final LayerNorm and the tied
unembedding (`embed.logits`). The last row is therefore the model's own output, exactly.

    from inspection import logit_lens
    lens = logit_lens(lm, input_ids, k=5)   # input_ids: (T,) or (1, T), at most block_size tokens
    lens.layers          # ["embeddings", "block 1", ..., "block L"]
    lens.top_ids         # (L+1, T, k) the k likeliest next tokens at each layer and position
    lens.top_probs       # (L+1, T, k) their probabilities
    lens.next_probs      # (L+1, T-1) the probability each layer gives the token that actually came next

Row t is the prediction made *at* position t, i.e. for token t+1: for generated tokens at positions
p..T-1 of `input_ids`, the rows p-1..T-2 show how each of them was predicted.

Pre-norm models (`norm_first`, the shipped LM) keep an unnormalised residual stream and end with a
final LayerNorm: the lens applies that LayerNorm to every layer's stream, as it would be applied
had the model ended there. Post-norm models (the paper's layout) have no final LayerNorm (it is
`nn.Identity`): every block already ends in the LayerNorm of its last sublayer, so the lens
unembeds the block outputs as they are, which is again exactly what the model does after its last
block. Only the embeddings row of a post-norm model is unembedded without any normalisation.
"""

from dataclasses import dataclass

import torch

from model import DecoderOnlyLM, residual_point


@dataclass
class LogitLens:
    layers: list[str]  # L+1 names: "embeddings", "block 1", ..., "block L"
    input_ids: torch.Tensor  # (T,)
    top_ids: torch.Tensor  # (L+1, T, k) long
    top_probs: torch.Tensor  # (L+1, T, k) float32
    next_probs: torch.Tensor  # (L+1, T-1) float32: P(input_ids[t+1]) at position t


def layer_log_probs(model: DecoderOnlyLM, input_ids: torch.Tensor) -> torch.Tensor:
    """Next-token log-probabilities read off each layer's residual stream -> (L+1, T, vocab).
    input_ids: (T,) or (1, T)."""
    ids = input_ids.reshape(1, -1)
    if not 0 < ids.size(1) <= model.config.block_size:
        raise ValueError(f"the logit lens reads 1 to {model.config.block_size} tokens (the model's context), "
                         f"got {ids.size(1)}")
    streams = residual_stream_points(model)
    was_training = model.training
    model.eval()  # no dropout: the lens must show what the model computes
    try:
        with torch.inference_mode():
            with model.hooks(read=streams) as seen:  # only this thread's pass is read: the model may be shared
                model(ids)
            residual = torch.cat([seen[name] for name in streams])  # (L+1, T, C)
            return model.embed.logits(model.decoder.norm(residual)).float().log_softmax(-1)
    finally:
        model.train(was_training)


def residual_stream_points(model: DecoderOnlyLM) -> list[str]:
    """The named points of the residual stream: after the embeddings, then after each block (L+1 names)."""
    return ["pos.hook_input"] + [residual_point(model, "decoder", i) for i in range(model.config.n_layer)]


def logit_lens(model: DecoderOnlyLM, input_ids: torch.Tensor, k: int = 5) -> LogitLens:
    """The top-k next tokens, with their probabilities, at every layer and position (see module doc)."""
    log_probs = layer_log_probs(model, input_ids)  # (L+1, T, V)
    ids = input_ids.reshape(-1)
    top = log_probs.topk(min(k, log_probs.size(-1)), dim=-1)
    following = ids[1:].to(log_probs.device)[None, :, None].expand(log_probs.size(0), -1, 1)
    next_probs = log_probs[:, :-1].gather(-1, following).squeeze(-1).exp()
    names = ["embeddings"] + [f"block {i + 1}" for i in range(log_probs.size(0) - 1)]
    return LogitLens(names, ids.cpu(), top.indices.cpu(), top.values.exp().cpu(), next_probs.cpu())
