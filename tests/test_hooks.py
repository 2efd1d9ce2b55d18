"""Named points (`model/hooks.py`): every value read at its name equals an independent computation
from the weights; a patch changes the pass exactly as a computation by hand says; attachments stay
in their own thread and their own model, nest, and cost nothing in the numbers when absent."""

import math
import threading

import pytest
import torch
import torch.nn.functional as F

from model import POINTS, DecoderOnlyConfig, DecoderOnlyLM, EncoderDecoder, EncoderDecoderConfig, sinusoidal_table
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
    stems = {n: [f"decoder.{i}.{s}.{p}" for i in range(2) for s, ps in {
        "attn": ("in", "q", "k", "v", "mask", "scores", "weights", "heads", "out", "resid"),
        "ffn": ("in", "hidden", "out", "resid")}.items() for p in ps] for n in ("layers",)}
    assert sorted(names) == sorted(["decoder.embed", "decoder.pos", "decoder.input", *stems["layers"],
                                    "decoder.norm", "logits"])
    assert len(names) == len(set(names)) == 3 + 2 * 14 + 2
    assert {n.rsplit(".", 1)[-1] for n in names} <= set(POINTS)  # each kind of point is described


def test_every_lm_point_read_equals_a_computation_from_the_weights(lm):
    """Forward by hand in float64 from the parameters alone, and each named value the pass recorded."""
    with torch.no_grad(), lm.hooks(read=lm.point_names()) as seen:
        logits = lm(IDS).logits
    T = IDS.size(1)
    x = lm.embed.lut.weight.double()[IDS] * math.sqrt(C)
    close(seen["decoder.embed"], x)
    close(seen["decoder.pos"], sinusoidal_table(16, C)[:T])
    x = x + sinusoidal_table(16, C)[:T].double()
    close(seen["decoder.input"], x)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i, layer in enumerate(lm.decoder.layers):
        attn_sub, ffn_sub = layer.sublayer
        h = layer_norm(x, attn_sub.norm)  # pre-norm
        close(seen[f"decoder.{i}.attn.in"], h)
        expected = by_hand_attention(h, layer.self_attn, causal)
        for point, value in expected.items():
            got = seen[f"decoder.{i}.attn.{point}"]
            if point == "scores":
                close(got.masked_fill(~causal, 0), value.masked_fill(~causal, 0))  # the masked part: unused
            else:
                close(got, value)
        assert torch.equal(seen[f"decoder.{i}.attn.mask"].expand(1, 1, T, T)[0, 0], causal)
        x = x + expected["out"]
        close(seen[f"decoder.{i}.attn.resid"], x)
        h = layer_norm(x, ffn_sub.norm)
        close(seen[f"decoder.{i}.ffn.in"], h)
        ffn = layer.feed_forward
        hidden = F.gelu(h @ ffn.w_1.weight.double().T + ffn.w_1.bias.double())
        close(seen[f"decoder.{i}.ffn.hidden"], hidden)
        out = hidden @ ffn.w_2.weight.double().T + ffn.w_2.bias.double()
        close(seen[f"decoder.{i}.ffn.out"], out)
        x = x + out
        close(seen[f"decoder.{i}.ffn.resid"], x)
    x = layer_norm(x, lm.decoder.norm)
    close(seen["decoder.norm"], x)
    close(seen["logits"], x @ lm.embed.lut.weight.double().T)
    assert seen["logits"] is logits or torch.equal(seen["logits"], logits)


def test_encoder_decoder_points_read_equal_a_computation_from_the_weights(seq2seq):
    """Cross-attention's values from the decoder's normed input and the encoder's memory; the
    padding mask of the source reaches both attentions that read it."""
    src = torch.tensor([[5, 9, 14, 30, 22, 0, 0]])
    src_mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0]])
    tgt = torch.tensor([[1, 6, 7]])
    wanted = ["encoder.input", "encoder.0.attn.in", "encoder.0.attn.weights", "encoder.0.attn.mask", "encoder.norm",
              "decoder.input", "decoder.1.cross.in", "decoder.1.cross.q", "decoder.1.cross.k",
              "decoder.1.cross.weights", "decoder.1.cross.out"]
    assert set(wanted) <= set(seq2seq.point_names())
    with torch.no_grad(), seq2seq.hooks(read=wanted) as seen:
        seq2seq(src, tgt, src_mask=src_mask)
    keys = src_mask[0].bool()[None, :].expand(7, 7)
    expected = by_hand_attention(seen["encoder.0.attn.in"].double(), seq2seq.encoder.layers[0].self_attn, keys)
    close(seen["encoder.0.attn.weights"], expected["weights"])
    assert (seen["encoder.0.attn.weights"][..., 5:] == 0).all()
    assert seen["encoder.0.attn.mask"].shape == (1, 1, 1, 7)  # one row of keys, broadcast over the queries
    cross = seq2seq.decoder.layers[1].cross_attn
    expected = by_hand_attention(seen["decoder.1.cross.in"].double(), cross, src_mask[0].bool()[None, :].expand(3, 7),
                                 memory=seen["encoder.norm"].double())
    for point in ("q", "k", "weights", "out"):
        close(seen[f"decoder.1.cross.{point}"], expected[point])


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

    with torch.no_grad():
        with lm.hooks(read=["decoder.1.attn.in", "decoder.1.attn.heads"]) as plain:
            before = lm(IDS).logits
        with lm.hooks(patch={"decoder.1.attn.weights": flatten_head_2},
                      read=["decoder.1.attn.in", "decoder.1.attn.v", "decoder.1.attn.heads", "decoder.1.attn.out"]
                      ) as seen:
            after = lm(IDS).logits
    close(seen["decoder.1.attn.in"], plain["decoder.1.attn.in"])  # the patch is above the point read
    v = seen["decoder.1.attn.v"][0, 2].double()  # (T, d_k)
    running_mean = v.cumsum(0) / torch.arange(1, T + 1, dtype=torch.float64)[:, None]
    close(seen["decoder.1.attn.heads"][0, 2], running_mean)
    for h in (0, 1, 3):  # the others as before (the fused kernel then, the formula now: to rounding)
        close(seen["decoder.1.attn.heads"][0, h], plain["decoder.1.attn.heads"][0, h])
    expected = by_hand_attention(seen["decoder.1.attn.in"].double(), lm.decoder.layers[1].self_attn, causal)
    expected["heads"][0, 2] = running_mean
    mha = lm.decoder.layers[1].self_attn
    out = expected["heads"].transpose(1, 2).reshape(1, T, C) @ mha.out_proj.weight.double().T
    close(seen["decoder.1.attn.out"], out + mha.out_proj.bias.double())
    assert not torch.allclose(before, after)

    src = torch.tensor([[5, 9, 14, 30, 22, 0, 0]])
    src_mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0]])
    real = src_mask[0].bool()

    def flatten_cross(w):
        w = w.clone()
        w[:, 2] = real.to(w.dtype) / real.sum()
        return w

    with torch.no_grad(), seq2seq.hooks(patch={"decoder.0.cross.weights": flatten_cross},
                                        read=["decoder.0.cross.v", "decoder.0.cross.heads"]) as seen:
        seq2seq(src, torch.tensor([[1, 6, 7]]), src_mask=src_mask)
    v = seen["decoder.0.cross.v"][0, 2].double()  # (S, d_k): the memory's values
    close(seen["decoder.0.cross.heads"][0, 2], v[real].mean(0).expand(3, D_K))


def test_nothing_attached_changes_nothing_and_the_fast_decode_steps_aside_only_while_attached(lm):
    with torch.no_grad():
        plain = lm(IDS).logits
        assert can_decode(lm) and not attached(lm)
        with lm.hooks(read=["decoder.0.attn.weights"]) as seen:  # the explicit formula: same numbers
            read = lm(IDS).logits
            assert attached(lm) and not can_decode(lm)
        with lm.hooks(patch={"decoder.0.ffn.out": lambda x: x}):  # an identity patch
            identity = lm(IDS).logits
        assert not attached(lm) and can_decode(lm)
    torch.testing.assert_close(read, plain, atol=1e-5, rtol=0)
    assert torch.equal(identity, plain) and seen["decoder.0.attn.weights"].shape == (1, H, 7, 7)


def test_patches_nest_in_order_and_end_with_their_block(lm):
    calls = []
    with torch.no_grad():
        with lm.hooks(patch={"decoder.0.ffn.out": lambda x: calls.append("outer") or x * 2}):
            with lm.hooks(patch={"decoder.0.ffn.out": lambda x: calls.append("inner") or x + 1},
                          read=["decoder.0.ffn.out", "decoder.0.ffn.hidden"]) as seen:
                lm(IDS)
            lm(IDS)
        lm(IDS)
    assert calls == ["outer", "inner", "outer"]
    ffn = lm.decoder.layers[0].feed_forward
    close(seen["decoder.0.ffn.out"], ffn.w_2(seen["decoder.0.ffn.hidden"]) * 2 + 1)  # read after both patches


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
    with torch.no_grad(), lm.hooks(patch={"decoder.0.attn.heads": torch.zeros_like}):
        inside.set()
        thread.join()
        patched, twin_logits = lm(IDS).logits, twin(IDS).logits
        assert not attached(twin)
    assert torch.equal(other_thread["logits"], plain) and not other_thread["attached"]
    assert torch.equal(twin_logits, plain) and not torch.allclose(patched, plain)


def test_an_unknown_name_is_refused_with_the_names_it_could_be(lm):
    with pytest.raises(KeyError, match=r"no point 'decoder\.9\.attn\.weights'.*point_names"), \
            lm.hooks(read=["decoder.9.attn.weights"]):
        pass
    with pytest.raises(KeyError, match="no point 'encoder.input'"), lm.hooks(patch={"encoder.input": abs}):
        pass
    assert not attached(lm)


def test_the_owner_of_a_point_holds_the_weights_that_made_it(lm, seq2seq):
    assert lm.point_owner("decoder.0.attn.q") is lm.decoder.layers[0].self_attn
    assert lm.point_owner("decoder.1.ffn.in") is lm.decoder.layers[1].sublayer[1]
    assert lm.point_owner("logits") is lm.embed and lm.point_owner("decoder.norm") is lm.decoder
    assert seq2seq.point_owner("decoder.0.cross.weights") is seq2seq.decoder.layers[0].cross_attn
    assert seq2seq.point_owner("encoder.input") is seq2seq.src_pos
