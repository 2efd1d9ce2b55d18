"""The logit lens (`inspection.logit_lens`): its last layer is the model's own prediction, and every
other layer is the final LayerNorm and unembedding applied to that layer's residual stream,
computed here by running the blocks by hand."""

from pathlib import Path

import pytest
import torch

from inspection import layer_log_probs, logit_lens
from model import DecoderOnlyConfig, DecoderOnlyLM, GenerationConfig, load_pretrained

LM_CHECKPOINT = Path(__file__).resolve().parents[1] / "checkpoints" / "lm"


def tiny_lm(norm_first: bool) -> DecoderOnlyLM:
    torch.manual_seed(0)
    config = DecoderOnlyConfig(vocab_size=40, block_size=16, n_layer=3, n_head=2, d_model=16, d_ff=32,
                               dropout=0.1, norm_first=norm_first)
    return DecoderOnlyLM(config).eval()


def by_hand(model: DecoderOnlyLM, ids: torch.Tensor) -> list[torch.Tensor]:
    """Each layer's residual stream (1, T, C): the embeddings + positions, then each block's output."""
    x = model.pos(model.embed(ids[None]))
    streams = [x]
    for layer in model.decoder.layers:
        x = layer(x)
        streams.append(x)
    return streams


@pytest.mark.parametrize("norm_first", [True, False])
def test_last_layer_is_the_models_own_next_token_distribution(norm_first):
    model = tiny_lm(norm_first)
    ids = torch.tensor([1, 5, 9, 3, 22, 17, 8])
    lens = layer_log_probs(model, ids)
    assert lens.shape == (4, 7, 40)
    with torch.no_grad():
        own = model(ids[None]).logits[0].float().softmax(-1)  # (T, V)
    torch.testing.assert_close(lens[-1].exp(), own, rtol=0, atol=1e-6)
    # and generation's distribution, through the KV cache, for the next token
    with torch.no_grad():
        step = model.next_token_logits(ids[None], model.new_cache()).float().softmax(-1)[0]
    torch.testing.assert_close(lens[-1, -1].exp(), step, rtol=0, atol=1e-6)


@pytest.mark.parametrize("norm_first", [True, False])
def test_every_layer_is_the_final_norm_and_unembedding_of_its_stream(norm_first):
    model = tiny_lm(norm_first)
    ids = torch.tensor([1, 5, 9, 3, 22])
    lens = layer_log_probs(model, ids)
    with torch.no_grad():
        for i, x in enumerate(by_hand(model, ids)):
            final_norm = model.decoder.norm(x) if norm_first else x  # post-norm: no final LayerNorm
            expected = final_norm @ model.embed.lut.weight.T  # the tied unembedding
            torch.testing.assert_close(lens[i], expected[0].log_softmax(-1), rtol=0, atol=1e-5)
    if not norm_first:
        assert isinstance(model.decoder.norm, torch.nn.Identity)


def test_top_tokens_probabilities_and_the_next_tokens_probability():
    model = tiny_lm(True)
    ids = torch.tensor([1, 5, 9, 3, 22, 17])
    lens = logit_lens(model, ids, k=3)
    full = layer_log_probs(model, ids).exp()  # (4, 6, 40)
    assert lens.layers == ["embeddings", "block 1", "block 2", "block 3"]
    assert lens.top_ids.shape == lens.top_probs.shape == (4, 6, 3)
    assert lens.next_probs.shape == (4, 5)
    assert lens.input_ids.tolist() == ids.tolist()
    torch.testing.assert_close(lens.top_probs, full.topk(3, dim=-1).values)
    assert (lens.top_probs[..., :-1] >= lens.top_probs[..., 1:]).all()
    for layer in range(4):
        for t in range(5):
            assert lens.top_probs[layer, t, 0] == full[layer, t].max()
            assert lens.next_probs[layer, t] == pytest.approx(full[layer, t, ids[t + 1]].item(), abs=1e-7)


def test_the_context_limit_is_a_clear_error():
    model = tiny_lm(True)
    with pytest.raises(ValueError, match="1 to 16 tokens"):
        logit_lens(model, torch.arange(17) % 40)
    with pytest.raises(ValueError, match="1 to 16 tokens"):
        logit_lens(model, torch.tensor([], dtype=torch.long))


def test_the_lens_leaves_the_models_mode_alone():
    model = tiny_lm(True).train()
    logit_lens(model, torch.tensor([1, 2, 3]))
    assert model.training


@pytest.mark.skipif(not (LM_CHECKPOINT / "model.safetensors").is_file(), reason="no shipped LM checkpoint")
def test_shipped_lm_last_layer_matches_its_generation():
    """On the shipped (pre-norm) LM: a greedy continuation's tokens are each the top-1 of the lens's
    last layer at the position before them, and the distributions agree to 1e-6."""
    model = load_pretrained(LM_CHECKPOINT, "cpu").eval()
    prompt = torch.tensor([[1, 400, 500, 600]])
    generated = model.generate(prompt, GenerationConfig(max_new_tokens=8, temperature=0))
    ids = torch.tensor([*prompt[0].tolist(), *generated])
    lens = logit_lens(model, ids, k=1)
    assert lens.top_ids[-1, 3:-1, 0].tolist() == generated
    with torch.no_grad():
        own = model(ids[None]).logits[0].float().softmax(-1)
    torch.testing.assert_close(layer_log_probs(model, ids)[-1].exp(), own, rtol=0, atol=1e-6)
