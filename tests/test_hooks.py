"""Named points (`model/hooks.py`): every value read at its name equals an independent computation
from the weights; a patch changes the pass exactly as a computation by hand says; attachments stay
in their own thread and their own model, nest, and cost nothing in the numbers when absent."""

import math
import threading

import pytest
import torch
import torch.nn.functional as F

from model import (
    POINTS,
    DecoderOnlyConfig,
    DecoderOnlyLM,
    EncoderDecoder,
    EncoderDecoderConfig,
    HookPoint,
    sinusoidal_table,
)
from model.fast import can_decode
from model.hooks import attached

C, H, D_FF = 16, 4, 32
D_K = C // H


@pytest.fixture(scope="module")
def lm() -> DecoderOnlyLM:
    torch.manual_seed(0)
    return DecoderOnlyLM(DecoderOnlyConfig(vocab_size=40, block_size=16, n_layer=2, n_head=H, d_model=C,
                                           d_ff=D_FF, dropout=0.0)).eval()


@pytest.fixture(scope="module")
def seq2seq() -> EncoderDecoder:
    torch.manual_seed(1)
    return EncoderDecoder(EncoderDecoderConfig(vocab_size=40, max_src_len=16, max_tgt_len=8, n_encoder_layer=2,
                                               n_decoder_layer=2, n_head=H, d_model=C, d_ff=D_FF,
                                               dropout=0.0)).eval()


IDS = torch.tensor([[5, 9, 14, 30, 22, 8, 3]])


def layer_norm(x, norm):
    mu, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    return (x - mu) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def split(x):  # (B, T, C) -> (B, H, T, d_k)
    return x.view(x.size(0), x.size(1), H, D_K).transpose(1, 2)


def by_hand_attention(x, mha, allowed, memory=None):
    """Every value of one attention layer from its weights, in float64: q, k, v, scores, weights,
    heads, out. `allowed` (T_q, T_k) True where a query may look."""
    w, b = mha.in_proj.weight.double(), mha.in_proj.bias.double()
    q = x @ w[:C].T + b[:C]
    kv = (x if memory is None else memory) @ w[C:].T + b[C:]
    k, v = kv[..., :C], kv[..., C:]
    q, k, v = split(q), split(k), split(v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D_K)
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
    heads = weights @ v
    out = heads.transpose(1, 2).reshape(x.shape) @ mha.out_proj.weight.double().T + mha.out_proj.bias.double()
    return {"q": q, "k": k, "v": v, "scores": scores, "weights": weights, "heads": heads, "out": out}


def close(a, b):
    torch.testing.assert_close(a.double(), b.double(), atol=2e-5, rtol=1e-5)


def test_the_lm_names_every_value_of_the_lesson_once(lm):
    names = lm.point_names()
    layers = [f"decoder.layers.{i}.{module}.hook_{p}" for i in range(2) for module, ps in {
        "self_attn": ("q", "k", "v", "mask", "scores", "weights", "heads", "out"),
        "feed_forward": ("hidden", "out"), "sublayer.0": ("in", "resid"), "sublayer.1": ("in", "resid")}.items()
        for p in ps]
    assert sorted(names) == sorted(["pos.hook_embed", "pos.hook_pos", "pos.hook_input", *layers,
                                    "decoder.hook_norm", "embed.hook_logits"])
    assert len(names) == len(set(names)) == 3 + 2 * 14 + 2
    assert {n.rsplit(".", 1)[-1] for n in names} <= set(POINTS)  # each kind of point is described
    assert all(isinstance(lm.get_submodule(name), HookPoint) for name in names)  # a name is a module path


def test_every_lm_point_read_equals_a_computation_from_the_weights(lm):
    """Forward by hand in float64 from the parameters alone, and each named value the pass recorded."""
    with torch.no_grad(), lm.hooks(read=lm.point_names()) as seen:
        logits = lm(IDS).logits
    T = IDS.size(1)
    x = lm.embed.lut.weight.double()[IDS] * math.sqrt(C)
    close(seen["pos.hook_embed"], x)
    close(seen["pos.hook_pos"], sinusoidal_table(16, C)[:T])
    x = x + sinusoidal_table(16, C)[:T].double()
    close(seen["pos.hook_input"], x)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i, layer in enumerate(lm.decoder.layers):
        attn_sub, ffn_sub = layer.sublayer
        h = layer_norm(x, attn_sub.norm)  # pre-norm
        close(seen[f"decoder.layers.{i}.sublayer.0.hook_in"], h)
        expected = by_hand_attention(h, layer.self_attn, causal)
        for point, value in expected.items():
            got = seen[f"decoder.layers.{i}.self_attn.hook_{point}"]
            if point == "scores":
                close(got.masked_fill(~causal, 0), value.masked_fill(~causal, 0))  # the masked part: unused
            else:
                close(got, value)
        assert torch.equal(seen[f"decoder.layers.{i}.self_attn.hook_mask"].expand(1, 1, T, T)[0, 0], causal)
        x = x + expected["out"]
        close(seen[f"decoder.layers.{i}.sublayer.0.hook_resid"], x)
        h = layer_norm(x, ffn_sub.norm)
        close(seen[f"decoder.layers.{i}.sublayer.1.hook_in"], h)
        ffn = layer.feed_forward
        hidden = F.gelu(h @ ffn.w_1.weight.double().T + ffn.w_1.bias.double())
        close(seen[f"decoder.layers.{i}.feed_forward.hook_hidden"], hidden)
        out = hidden @ ffn.w_2.weight.double().T + ffn.w_2.bias.double()
        close(seen[f"decoder.layers.{i}.feed_forward.hook_out"], out)
        x = x + out
        close(seen[f"decoder.layers.{i}.sublayer.1.hook_resid"], x)
    x = layer_norm(x, lm.decoder.norm)
    close(seen["decoder.hook_norm"], x)
    close(seen["embed.hook_logits"], x @ lm.embed.lut.weight.double().T)
    assert seen["embed.hook_logits"] is logits or torch.equal(seen["embed.hook_logits"], logits)


def test_encoder_decoder_points_read_equal_a_computation_from_the_weights(seq2seq):
    """Cross-attention's values from the decoder's normed input and the encoder's memory; the
    padding mask of the source reaches both attentions that read it."""
    src = torch.tensor([[5, 9, 14, 30, 22, 0, 0]])
    src_mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0]])
    tgt = torch.tensor([[1, 6, 7]])
    enc, dec = "encoder.layers.0", "decoder.layers.1"
    wanted = ["src_pos.hook_input", f"{enc}.sublayer.0.hook_in", f"{enc}.self_attn.hook_weights",
              f"{enc}.self_attn.hook_mask", "encoder.hook_norm", "tgt_pos.hook_input", f"{dec}.sublayer.1.hook_in",
              *(f"{dec}.cross_attn.hook_{p}" for p in ("q", "k", "weights", "out"))]
    assert set(wanted) <= set(seq2seq.point_names())
    with torch.no_grad(), seq2seq.hooks(read=wanted) as seen:
        seq2seq(src, tgt, src_mask=src_mask)
    keys = src_mask[0].bool()[None, :].expand(7, 7)
    expected = by_hand_attention(seen[f"{enc}.sublayer.0.hook_in"].double(), seq2seq.encoder.layers[0].self_attn, keys)
    close(seen[f"{enc}.self_attn.hook_weights"], expected["weights"])
    assert (seen[f"{enc}.self_attn.hook_weights"][..., 5:] == 0).all()
    assert seen[f"{enc}.self_attn.hook_mask"].shape == (1, 1, 1, 7)  # one row of keys, broadcast over the queries
    cross = seq2seq.decoder.layers[1].cross_attn
    expected = by_hand_attention(seen[f"{dec}.sublayer.1.hook_in"].double(), cross,
                                 src_mask[0].bool()[None, :].expand(3, 7), memory=seen["encoder.hook_norm"].double())
    for point in ("q", "k", "weights", "out"):
        close(seen[f"{dec}.cross_attn.hook_{point}"], expected[point])


def test_patching_one_heads_weights_to_uniform_changes_the_output_as_computed_by_hand(lm, seq2seq):
    """Head 2 of the LM's layer 1 attends equally to every key it may see: its output becomes the
    running mean of its values (the mean of v over keys 0..t), the other heads are untouched, and
    the layer's output is the output projection of that by hand. The same on the encoder-decoder's
    cross-attention, where the uniform weights over the real (unpadded) source keys give the mean
    of their values."""
    T = IDS.size(1)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    uniform = causal.double() / causal.sum(-1, keepdim=True)  # (T, T): 1/(t+1) on keys 0..t

    def flatten_head_2(w):
        w = w.clone()
        w[:, 2] = uniform.to(w.dtype)
        return w

    attn, attn_in = "decoder.layers.1.self_attn", "decoder.layers.1.sublayer.0.hook_in"
    with torch.no_grad():
        with lm.hooks(read=[attn_in, f"{attn}.hook_heads"]) as plain:
            before = lm(IDS).logits
        with lm.hooks(patch={f"{attn}.hook_weights": flatten_head_2},
                      read=[attn_in, *(f"{attn}.hook_{p}" for p in ("v", "heads", "out"))]) as seen:
            after = lm(IDS).logits
    close(seen[attn_in], plain[attn_in])  # the patch is above the point read
    v = seen[f"{attn}.hook_v"][0, 2].double()  # (T, d_k)
    running_mean = v.cumsum(0) / torch.arange(1, T + 1, dtype=torch.float64)[:, None]
    close(seen[f"{attn}.hook_heads"][0, 2], running_mean)
    for h in (0, 1, 3):  # the others as before (the fused kernel then, the formula now: to rounding)
        close(seen[f"{attn}.hook_heads"][0, h], plain[f"{attn}.hook_heads"][0, h])
    expected = by_hand_attention(seen[attn_in].double(), lm.decoder.layers[1].self_attn, causal)
    expected["heads"][0, 2] = running_mean
    mha = lm.decoder.layers[1].self_attn
    out = expected["heads"].transpose(1, 2).reshape(1, T, C) @ mha.out_proj.weight.double().T
    close(seen[f"{attn}.hook_out"], out + mha.out_proj.bias.double())
    assert not torch.allclose(before, after)

    src = torch.tensor([[5, 9, 14, 30, 22, 0, 0]])
    src_mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0]])
    real = src_mask[0].bool()

    def flatten_cross(w):
        w = w.clone()
        w[:, 2] = real.to(w.dtype) / real.sum()
        return w

    cross = "decoder.layers.0.cross_attn"
    with torch.no_grad(), seq2seq.hooks(patch={f"{cross}.hook_weights": flatten_cross},
                                        read=[f"{cross}.hook_v", f"{cross}.hook_heads"]) as seen:
        seq2seq(src, torch.tensor([[1, 6, 7]]), src_mask=src_mask)
    v = seen[f"{cross}.hook_v"][0, 2].double()  # (S, d_k): the memory's values
    close(seen[f"{cross}.hook_heads"][0, 2], v[real].mean(0).expand(3, D_K))


def test_nothing_attached_changes_nothing_and_the_fast_decode_steps_aside_only_while_attached(lm):
    with torch.no_grad():
        plain = lm(IDS).logits
        assert can_decode(lm) and not attached(lm)
        with lm.hooks(read=["decoder.layers.0.self_attn.hook_weights"]) as seen:  # the explicit formula: same numbers
            read = lm(IDS).logits
            assert attached(lm) and not can_decode(lm)
        with lm.hooks(patch={"decoder.layers.0.feed_forward.hook_out": lambda x: x}):  # an identity patch
            identity = lm(IDS).logits
        assert not attached(lm) and can_decode(lm)
    torch.testing.assert_close(read, plain, atol=1e-5, rtol=0)
    assert torch.equal(identity, plain) and seen["decoder.layers.0.self_attn.hook_weights"].shape == (1, H, 7, 7)


def test_patches_nest_in_order_and_end_with_their_block(lm):
    calls, out, hidden = [], "decoder.layers.0.feed_forward.hook_out", "decoder.layers.0.feed_forward.hook_hidden"
    with torch.no_grad():
        with lm.hooks(patch={out: lambda x: calls.append("outer") or x * 2}):
            with lm.hooks(patch={out: lambda x: calls.append("inner") or x + 1}, read=[out, hidden]) as seen:
                lm(IDS)
            lm(IDS)
        lm(IDS)
    assert calls == ["outer", "inner", "outer"]
    ffn = lm.decoder.layers[0].feed_forward
    close(seen[out], ffn.w_2(seen[hidden]) * 2 + 1)  # read after both patches


def test_an_attachment_sees_only_its_own_thread_and_its_own_model(lm):
    """The app serves every visitor from one model: a patch in one thread never reaches another's
    pass, and a model of the same shape (another reader) never sees it either."""
    twin = DecoderOnlyLM(lm.config).eval()
    twin.load_state_dict(lm.state_dict())
    with torch.no_grad():
        plain = lm(IDS).logits
    inside, other_thread = threading.Event(), {}

    def visitor():
        inside.wait()
        with torch.no_grad():
            other_thread["logits"] = lm(IDS).logits
            other_thread["attached"] = attached(lm)

    thread = threading.Thread(target=visitor)
    thread.start()
    with torch.no_grad(), lm.hooks(patch={"decoder.layers.0.self_attn.hook_heads": torch.zeros_like}):
        inside.set()
        thread.join()
        patched, twin_logits = lm(IDS).logits, twin(IDS).logits
        assert not attached(twin)
    assert torch.equal(other_thread["logits"], plain) and not other_thread["attached"]
    assert torch.equal(twin_logits, plain) and not torch.allclose(patched, plain)


def test_an_unknown_name_is_refused_with_the_names_it_could_be(lm):
    with pytest.raises(KeyError, match=r"no point 'decoder\.layers\.9\.self_attn\.hook_weights'.*point_names"), \
            lm.hooks(read=["decoder.layers.9.self_attn.hook_weights"]):
        pass
    with pytest.raises(KeyError, match="no point 'src_pos.hook_input'"), lm.hooks(patch={"src_pos.hook_input": abs}):
        pass
    assert not attached(lm)


def test_a_points_name_leads_to_the_module_whose_weights_made_it(lm, seq2seq):
    """A name is a module path: the module above the point computed its value (no lookup table)."""
    def parent(model, name):
        return model.get_submodule(name.rpartition(".")[0])
    assert parent(lm, "decoder.layers.0.self_attn.hook_q") is lm.decoder.layers[0].self_attn
    assert parent(lm, "decoder.layers.1.sublayer.1.hook_in") is lm.decoder.layers[1].sublayer[1]
    assert parent(lm, "embed.hook_logits") is lm.embed and parent(lm, "decoder.hook_norm") is lm.decoder
    assert parent(seq2seq, "decoder.layers.0.cross_attn.hook_weights") is seq2seq.decoder.layers[0].cross_attn
    assert parent(seq2seq, "src_pos.hook_input") is seq2seq.src_pos
