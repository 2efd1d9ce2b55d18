"""Building blocks: exact shapes, the formulas they claim, and parity of the encoder and decoder
layers with `nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer` holding the same weights."""

import math
from dataclasses import replace

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import model.layers
from model import (
    Decoder,
    DecoderLayer,
    DecoderOnlyConfig,
    DecoderOnlyLM,
    Embeddings,
    Encoder,
    EncoderDecoder,
    EncoderDecoderConfig,
    EncoderLayer,
    FeedForward,
    PositionalEncoding,
    SublayerConnection,
    TransformerConfig,
    padding_mask,
    sinusoidal_table,
    subsequent_mask,
)
from model.hooks import attach, names
from model.layers import attention_maps

B, S, T, C, N_HEAD, D_FF, VOCAB = 2, 7, 5, 16, 4, 32, 20
SHAPE = dict(vocab_size=VOCAB, d_model=C, n_head=N_HEAD, d_ff=D_FF, dropout=0.0)


def config(norm_first: bool = False) -> TransformerConfig:
    """The shape every layer reads; layer counts come from a model's config (see the stack tests)."""
    return TransformerConfig(**SHAPE, norm_first=norm_first)


def randomize_(module: nn.Module) -> nn.Module:
    """Non-trivial values everywhere (biases and LayerNorm affine included), so parity means something."""
    torch.manual_seed(0)
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0.0, 0.3)
    return module.eval()


def test_embeddings_scale_and_tied_logits():
    torch.manual_seed(0)
    emb = Embeddings(TransformerConfig(vocab_size=VOCAB, d_model=C, n_head=N_HEAD))
    idx = torch.tensor([[3, 0, 19], [1, 1, 2]])
    x = emb(idx)
    assert x.shape == (2, 3, C)
    torch.testing.assert_close(x, emb.lut.weight[idx] * 4.0)  # √16 = 4
    logits = emb.logits(torch.randn(2, 3, C))
    assert logits.shape == (2, 3, VOCAB)
    h = torch.randn(C)
    torch.testing.assert_close(emb.logits(h[None, None])[0, 0], emb.lut.weight @ h)


def test_sinusoidal_table_matches_paper_formula():
    d = 32
    pe = sinusoidal_table(200, d)
    assert pe.shape == (200, d)
    for pos in (0, 1, 5, 17, 100, 199):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)
    assert pe[1, :2].tolist() == pytest.approx([0.841471, 0.540302], abs=1e-6)  # sin 1, cos 1


def test_positional_encoding_adds_table_at_offset():
    pos = PositionalEncoding(DecoderOnlyConfig(vocab_size=VOCAB, d_model=C, n_head=N_HEAD, block_size=10)).eval()
    x = torch.randn(B, 3, C)
    out = pos(x, offset=4)
    assert out.shape == (B, 3, C)
    torch.testing.assert_close(out, x + sinusoidal_table(10, C)[4:7])
    assert "pe" not in pos.state_dict()  # a pure function of the config: not saved
    pos(x, offset=7)  # positions 7..9 fit exactly
    with pytest.raises(ValueError, match="exceeds max_len 10"):
        pos(x, offset=8)


def test_feed_forward_formula():
    ff = randomize_(FeedForward(config()))
    x = torch.randn(B, T, C)
    out = ff(x)
    assert out.shape == (B, T, C)
    hidden = x @ ff.w_1.weight.T + ff.w_1.bias
    assert hidden.shape == (B, T, D_FF)
    expected = 0.5 * hidden * (1 + torch.erf(hidden / math.sqrt(2)))  # exact GELU
    torch.testing.assert_close(out, expected @ ff.w_2.weight.T + ff.w_2.bias)


@pytest.mark.parametrize("norm_first", [False, True])
def test_sublayer_connection_placements(norm_first):
    sub = randomize_(SublayerConnection(config(norm_first)))
    x = torch.randn(B, T, C)
    with attach(sub, read=["hook_in", "hook_resid"]) as seen:  # names: module paths within `sub`
        out = sub(x, lambda h: 2 * h + 1)
    assert out.shape == (B, T, C)
    ln = lambda h: F.layer_norm(h, (C,), sub.norm.weight, sub.norm.bias)
    expected = x + 2 * ln(x) + 1 if norm_first else ln(x + 2 * x + 1)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(seen["hook_in"], ln(x) if norm_first else x)  # what the sublayer read
    assert seen["hook_resid"] is out


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_shapes(norm_first):
    layer = EncoderLayer(config(norm_first)).eval()
    x = torch.randn(B, S, C)
    assert layer(x).shape == (B, S, C)
    with attach(layer, read=["self_attn.hook_weights"]) as seen:
        out = layer(x, padding_mask(torch.ones(B, S)))
    assert out.shape == (B, S, C) and seen["self_attn.hook_weights"].shape == (B, N_HEAD, S, S)


def test_decoder_layer_shapes_with_and_without_cross_attention():
    x, memory = torch.randn(B, T, C), torch.randn(B, S, C)
    layer = DecoderLayer(config()).eval()
    assert len(layer.sublayer) == 3
    with attach(layer, read=["self_attn.hook_weights", "cross_attn.hook_weights"]) as seen:
        out = layer(x, memory=memory)
    self_w, cross_w = seen["self_attn.hook_weights"], seen["cross_attn.hook_weights"]
    assert out.shape == (B, T, C) and self_w.shape == (B, N_HEAD, T, T) and cross_w.shape == (B, N_HEAD, T, S)
    assert (self_w.triu(1) == 0).all()  # causal even without a tgt_mask

    gpt_block = DecoderLayer(config(norm_first=True), cross_attn=False).eval()
    assert gpt_block.cross_attn is None and len(gpt_block.sublayer) == 2
    assert sorted(names(gpt_block)) == sorted(
        [f"self_attn.hook_{p}" for p in ("q", "k", "v", "mask", "scores", "weights", "heads", "out")]
        + ["feed_forward.hook_hidden", "feed_forward.hook_out"]
        + [f"sublayer.{j}.hook_{p}" for j in (0, 1) for p in ("in", "resid")])  # no cross-attention points
    assert gpt_block(x).shape == (B, T, C)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_stack_shapes_and_maps(norm_first):
    enc = Encoder(EncoderDecoderConfig(**SHAPE, norm_first=norm_first, n_encoder_layer=3)).eval()
    assert len(enc.layers) == 3
    assert isinstance(enc.norm, nn.LayerNorm if norm_first else nn.Identity)
    with attention_maps(enc) as maps:
        out = enc(torch.randn(B, S, C))
    assert out.shape == (B, S, C)
    assert [(m.kind, m.layer) for m in maps] == [("encoder_self", 0), ("encoder_self", 1), ("encoder_self", 2)]
    assert all(m.weights.shape == (B, N_HEAD, S, S) for m in maps)
    with attention_maps(enc, wanted=False) as maps:
        enc(torch.randn(B, S, C))
    assert maps == []


def test_decoder_stack_shapes_and_maps():
    dec = Decoder(EncoderDecoderConfig(**SHAPE, norm_first=True, n_encoder_layer=5, n_decoder_layer=2)).eval()
    with attention_maps(dec) as maps:
        out = dec(torch.randn(B, T, C), memory=torch.randn(B, S, C))
    assert out.shape == (B, T, C)
    assert [(m.kind, m.layer) for m in maps] == [("decoder_self", 0), ("cross", 0), ("decoder_self", 1), ("cross", 1)]
    assert [m.weights.shape for m in maps] == [(B, N_HEAD, T, T), (B, N_HEAD, T, S)] * 2

    gpt = Decoder(DecoderOnlyConfig(**SHAPE, norm_first=True, n_layer=2)).eval()
    assert all(layer.cross_attn is None for layer in gpt.layers)  # a decoder-only config: GPT blocks
    with attention_maps(gpt) as maps:
        out = gpt(torch.randn(B, T, C))
    assert out.shape == (B, T, C)
    assert [(m.kind, m.layer, m.weights.shape) for m in maps] == [
        ("decoder_self", 0, (B, N_HEAD, T, T)), ("decoder_self", 1, (B, N_HEAD, T, T))]


def test_layers_read_every_field_from_the_config():
    c = replace(config(norm_first=True), dropout=0.25)
    layer = DecoderLayer(c)
    assert (layer.self_attn.d_model, layer.self_attn.n_head) == (C, N_HEAD)
    assert (layer.feed_forward.w_1.in_features, layer.feed_forward.w_1.out_features) == (C, D_FF)
    assert all(sub.norm_first and sub.dropout.p == 0.25 and sub.norm.normalized_shape == (C,)
               for sub in layer.sublayer)
    p = [a.attention_weight_dropout for a in (layer.self_attn, layer.cross_attn)]
    assert p == [0.25, 0.25]  # attention_dropout=None: `dropout`
    layer = DecoderLayer(replace(c, attention_dropout=0.0))
    p = [a.attention_weight_dropout for a in (layer.self_attn, layer.cross_attn)]
    assert p == [0.0, 0.0] and layer.sublayer[0].dropout.p == 0.25


def test_a_norm_variant_is_chosen_in_one_place(monkeypatch):
    """Every norm of both models comes from `build_norm`: swapping it swaps them all."""
    monkeypatch.setattr(model.layers, "build_norm", lambda c: nn.RMSNorm(c.d_model))
    lm = DecoderOnlyLM(DecoderOnlyConfig(**SHAPE, n_layer=2, block_size=8))
    s2s = EncoderDecoder(EncoderDecoderConfig(**SHAPE, norm_first=True, n_encoder_layer=2, n_decoder_layer=1))
    for m, expected in ((lm, 2 * 2 + 1), (s2s, 2 * 2 + 1 + 1 * 3 + 1)):  # sublayers + the final norm per stack
        assert not any(isinstance(x, nn.LayerNorm) for x in m.modules())
        assert sum(isinstance(x, nn.RMSNorm) for x in m.modules()) == expected


# --- parity with PyTorch's own layers ----------------------------------------------------------


def copy_attention(ours, ref: nn.MultiheadAttention) -> None:
    ref.in_proj_weight.copy_(ours.in_proj.weight)
    ref.in_proj_bias.copy_(ours.in_proj.bias)
    ref.out_proj.weight.copy_(ours.out_proj.weight)
    ref.out_proj.bias.copy_(ours.out_proj.bias)


def copy_common(ours, ref, norms) -> None:
    """Self-attention, feed-forward, and our sublayer norms in order onto ref's `norms`."""
    copy_attention(ours.self_attn, ref.self_attn)
    ref.linear1.load_state_dict(ours.feed_forward.w_1.state_dict())
    ref.linear2.load_state_dict(ours.feed_forward.w_2.state_dict())
    for sub, norm in zip(ours.sublayer, norms, strict=True):
        norm.load_state_dict(sub.norm.state_dict())


SRC_KEEP = torch.tensor([[1] * S, [1] * (S - 3) + [0] * 3])  # batch 1 has 3 padded source positions


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch(norm_first):
    ours = randomize_(EncoderLayer(config(norm_first)))
    ref = nn.TransformerEncoderLayer(C, N_HEAD, D_FF, dropout=0.0, activation="gelu", batch_first=True,
                                     norm_first=norm_first).eval()
    with torch.no_grad():
        copy_common(ours, ref, [ref.norm1, ref.norm2])
    x = torch.randn(B, S, C)
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=0)
    out = ours(x, padding_mask(SRC_KEEP))
    ref_out = ref(x, src_key_padding_mask=SRC_KEEP == 0)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first):
    ours = randomize_(DecoderLayer(config(norm_first)))
    ref = nn.TransformerDecoderLayer(C, N_HEAD, D_FF, dropout=0.0, activation="gelu", batch_first=True,
                                     norm_first=norm_first).eval()
    with torch.no_grad():
        copy_common(ours, ref, [ref.norm1, ref.norm2, ref.norm3])
        copy_attention(ours.cross_attn, ref.multihead_attn)
    x, memory = torch.randn(B, T, C), torch.randn(B, S, C)
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(T)  # float, -inf above the diagonal
    ref_out = ref(x, memory, tgt_mask=tgt_mask, memory_key_padding_mask=SRC_KEEP == 0)
    out = ours(x, memory=memory, memory_mask=padding_mask(SRC_KEEP))
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
    with attach(ours, read=["self_attn.hook_weights", "cross_attn.hook_weights"]) as seen:
        out = ours(x, tgt_mask=subsequent_mask(T), memory=memory, memory_mask=padding_mask(SRC_KEEP))
    self_w, cross_w = seen["self_attn.hook_weights"], seen["cross_attn.hook_weights"]
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
    assert (self_w.triu(1) == 0).all() and (cross_w[1, :, :, S - 3 :] == 0).all()


def test_post_init_scales_residual_projections_by_their_stack_depth():
    """GPT-2's init: weights ~ N(0, 0.02), except the projections writing into the residual stream
    (attention out_proj, FFN w_2), ~ N(0, 0.02/√(2·n)) with n the layers of their own stack."""
    torch.manual_seed(0)
    cfg = EncoderDecoderConfig(vocab_size=VOCAB, d_model=64, n_head=4, d_ff=128, n_encoder_layer=8,
                               n_decoder_layer=2)
    m = EncoderDecoder(cfg)

    def std(stack, ends):
        return torch.cat([p.flatten() for n, p in stack.named_parameters() if n.endswith(ends)]).std().item()

    residual = ("out_proj.weight", "w_2.weight")
    assert std(m.encoder, residual) == pytest.approx(0.02 / math.sqrt(2 * 8), rel=0.03)
    assert std(m.decoder, residual) == pytest.approx(0.02 / math.sqrt(2 * 2), rel=0.03)
    for stack in (m.encoder, m.decoder):
        assert std(stack, ("in_proj.weight", "w_1.weight")) == pytest.approx(0.02, rel=0.03)
    assert m.embed.lut.weight.std().item() == pytest.approx(0.02, rel=0.03)
