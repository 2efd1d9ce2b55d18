"""Both models end to end: output and attention-map shapes, the loss, causality, and invariance
to padding marked in the attention masks."""

import pytest
import torch
import torch.nn.functional as F

from model import DecoderOnlyConfig, DecoderOnlyLM, EncoderDecoder, EncoderDecoderConfig, resolve_device
from model.encoder_decoder import memory_mask
from training.transfer import init_from, shape_from

VOCAB, PAD = 50, 0


def tiny_lm(norm_first: bool = True) -> DecoderOnlyLM:
    torch.manual_seed(0)
    config = DecoderOnlyConfig(vocab_size=VOCAB, block_size=16, n_layer=2, n_head=2, d_model=16, d_ff=32,
                               dropout=0.0, norm_first=norm_first)
    return DecoderOnlyLM(config).eval()


def tiny_seq2seq(norm_first: bool = False) -> EncoderDecoder:
    torch.manual_seed(0)
    config = EncoderDecoderConfig(vocab_size=VOCAB, max_src_len=16, max_tgt_len=12, n_encoder_layer=3,
                                  n_decoder_layer=2, n_head=2, d_model=16, d_ff=32, dropout=0.0,
                                  norm_first=norm_first)
    return EncoderDecoder(config).eval()


def ids(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(3, VOCAB, shape, generator=torch.Generator().manual_seed(seed))


def test_lm_logits_loss_and_attention_shapes():
    model = tiny_lm()
    x = ids(3, 10)
    out = model(x)
    assert out.logits.shape == (3, 10, VOCAB) and out.loss is None and out.attentions is None
    targets = ids(3, 10, seed=1)
    targets[0, :4] = -100
    out = model(x, targets=targets, output_attentions=True)
    keep = targets != -100
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits[keep], targets[keep]))
    assert [(m.kind, m.layer, m.weights.shape) for m in out.attentions] == [
        ("decoder_self", 0, (3, 2, 10, 10)), ("decoder_self", 1, (3, 2, 10, 10))]
    assert all((m.weights.triu(1) == 0).all() for m in out.attentions)


@pytest.mark.parametrize("kind", ["lm", "seq2seq"])
def test_loss_only_gives_the_same_loss_and_gradients_without_logits(kind):
    """`loss_only`, a training step's call, skips the logits: same loss, same gradient on every
    weight (the tied output projection included), and logits None."""
    model = (tiny_lm() if kind == "lm" else tiny_seq2seq()).train()
    targets = ids(2, 6, seed=2)
    targets[1, 3:] = -100
    inputs = {"input_ids": ids(2, 6)} if kind == "lm" else {"src_ids": ids(2, 9), "tgt_ids": ids(2, 6, seed=1)}
    full = model(**inputs, targets=targets)
    full.loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    fused = model(**inputs, targets=targets, loss_only=True)
    fused.loss.backward()
    assert fused.logits is None and full.logits.shape == (2, 6, VOCAB)
    torch.testing.assert_close(fused.loss, full.loss, atol=1e-6, rtol=0)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, grads[name], atol=1e-6, rtol=0, msg=name)


def test_seq2seq_logits_loss_and_attention_shapes():
    model = tiny_seq2seq()
    src, tgt = ids(2, 9), ids(2, 6, seed=1)
    memory, maps = model.encode(src)
    assert memory.shape == (2, 9, 16) and maps == []
    logits, maps = model.decode(tgt, memory)
    assert logits.shape == (2, 6, VOCAB) and maps == []
    out = model(src, tgt, targets=ids(2, 6, seed=2), output_attentions=True)
    assert out.logits.shape == (2, 6, VOCAB) and out.loss.shape == ()
    assert [(m.kind, m.layer, m.weights.shape) for m in out.attentions] == [
        ("encoder_self", 0, (2, 2, 9, 9)), ("encoder_self", 1, (2, 2, 9, 9)), ("encoder_self", 2, (2, 2, 9, 9)),
        ("decoder_self", 0, (2, 2, 6, 6)), ("cross", 0, (2, 2, 6, 9)),
        ("decoder_self", 1, (2, 2, 6, 6)), ("cross", 1, (2, 2, 6, 9))]


def test_num_parameters_counts_tied_embedding_once():
    model = tiny_lm()
    # qkv in_proj, out_proj, w_1, w_2, two LayerNorms
    per_layer = (16 * 48 + 48) + (16 * 16 + 16) + (16 * 32 + 32) + (32 * 16 + 16) + 2 * (16 + 16)
    assert model.num_parameters() == VOCAB * 16 + 2 * per_layer + 2 * 16  # + final LayerNorm


@pytest.mark.parametrize("norm_first", [True, False])
def test_lm_is_causal(norm_first):
    model = tiny_lm(norm_first)
    x = ids(2, 12)
    logits = model(x).logits
    for t in (0, 4, 10):
        changed = x.clone()
        changed[:, t + 1 :] = ids(2, 11 - t, seed=t + 1)
        new = model(changed).logits
        torch.testing.assert_close(new[:, : t + 1], logits[:, : t + 1], atol=1e-5, rtol=0)
        assert not torch.allclose(new[:, t + 1 :], logits[:, t + 1 :], atol=1e-3)


@pytest.mark.parametrize("norm_first", [False, True])
def test_seq2seq_decoder_is_causal(norm_first):
    model = tiny_seq2seq(norm_first)
    src, tgt = ids(2, 8), ids(2, 10, seed=1)
    logits = model(src, tgt).logits
    for t in (0, 5):
        changed = tgt.clone()
        changed[:, t + 1 :] = ids(2, 9 - t, seed=t + 2)
        new = model(src, changed).logits
        torch.testing.assert_close(new[:, : t + 1], logits[:, : t + 1], atol=1e-5, rtol=0)
        assert not torch.allclose(new[:, t + 1 :], logits[:, t + 1 :], atol=1e-3)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_ignores_masked_padding(norm_first):
    model = tiny_seq2seq(norm_first)
    src, tgt = ids(2, 6), ids(2, 4, seed=1)
    memory, _ = model.encode(src)
    logits = model(src, tgt).logits
    padded = torch.cat([src, torch.full((2, 3), PAD)], dim=1)
    src_mask = torch.tensor([[1] * 6 + [0] * 3] * 2)
    padded_memory, _ = model.encode(padded, src_mask)
    torch.testing.assert_close(padded_memory[:, :6], memory, atol=1e-5, rtol=0)
    torch.testing.assert_close(model(padded, tgt, src_mask=src_mask).logits, logits, atol=1e-5, rtol=0)
    # without the mask the pads leak in: the test is not vacuous
    assert (model.encode(padded)[0][:, :6] - memory).abs().max() > 1e-3

    # a batch of two lengths equals each sequence encoded alone
    short = ids(1, 4, seed=3)
    batch = torch.cat([src[:1], torch.cat([short, torch.full((1, 2), PAD)], dim=1)])
    batch_mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2])
    out = model(batch, tgt[:1].expand(2, -1), src_mask=batch_mask).logits
    torch.testing.assert_close(out[0], logits[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(out[1], model(short, tgt[:1]).logits[0], atol=1e-5, rtol=0)


def test_the_source_mask_is_made_the_attention_mask_once_and_both_attentions_read_it():
    """`src_mask` (B, S) 1/0 at the model; (B, 1, 1, S) bool in the layers, the same for the encoder's
    self-attention and the decoder's cross-attention."""
    src_mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    made = memory_mask(src_mask)
    assert made.shape == (2, 1, 1, 4) and made.dtype == torch.bool
    assert made[:, 0, 0].tolist() == [[True, True, True, False], [True, True, False, False]]
    assert memory_mask(None) is None
    model = tiny_seq2seq()
    points = ["encoder.layers.0.self_attn.hook_mask", "decoder.layers.1.cross_attn.hook_mask"]
    with torch.no_grad(), model.hooks(read=points) as seen:
        model(ids(2, 4), ids(2, 3, seed=1), src_mask=src_mask)
    assert all(torch.equal(seen[name], made) for name in points)


def test_lm_ignores_masked_padding():
    model = tiny_lm()
    x = ids(2, 7)
    logits = model(x).logits
    torch.testing.assert_close(model(x, attention_mask=torch.ones(2, 7)).logits, logits, atol=1e-5, rtol=0)
    padded = torch.cat([x, torch.full((2, 4), PAD)], dim=1)
    attention_mask = torch.tensor([[1] * 7 + [0] * 4] * 2)
    out = model(padded, attention_mask=attention_mask, output_attentions=True)
    torch.testing.assert_close(out.logits[:, :7], logits, atol=1e-5, rtol=0)
    assert all((m.weights[..., 7:] == 0).all() for m in out.attentions)  # no query looks at a pad

    short = ids(1, 3, seed=1)
    batch = torch.cat([x[:1], torch.cat([short, torch.full((1, 4), PAD)], dim=1)])
    out = model(batch, attention_mask=torch.tensor([[1] * 7, [1] * 3 + [0] * 4])).logits
    torch.testing.assert_close(out[0], logits[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(out[1, :3], model(short).logits[0], atol=1e-5, rtol=0)


def test_lm_left_padding_gives_finite_logits():
    """A left pad under the causal mask sees no key at all: its row must be zeros, not NaN."""
    model = tiny_lm()
    x = torch.cat([torch.full((1, 2), PAD), ids(1, 5)], dim=1)
    out = model(x, attention_mask=torch.tensor([[0, 0, 1, 1, 1, 1, 1]]), output_attentions=True)
    assert out.logits.isfinite().all()
    assert all((m.weights[0, :, :2] == 0).all() for m in out.attentions)


def test_lm_rejects_sequences_longer_than_block_size():
    with pytest.raises(ValueError, match="exceeds max_len 16"):
        tiny_lm()(ids(1, 17))


def test_an_lm_started_from_a_trained_lm_predicts_what_it_does_and_refuses_another_shape():
    """`--task lm --init-from`: the continued run's step 0 is the trained model, weight for weight."""
    trained = tiny_lm()
    with torch.no_grad():
        trained.decoder.layers[0].feed_forward.w_1.weight.add_(1.0)  # not what a fresh init of seed 0 gives
    assert shape_from(DecoderOnlyLM, trained, VOCAB) == dict(n_layer=2, n_head=2, d_model=16, d_ff=32, block_size=16,
                                                            norm_first=True, reverse=False)
    assert shape_from(DecoderOnlyLM, trained, VOCAB + 1) is None  # another tokenizer's LM
    assert shape_from(DecoderOnlyLM, tiny_seq2seq(), VOCAB) is None  # no LM at all
    torch.manual_seed(1)
    fresh = DecoderOnlyLM(DecoderOnlyConfig(**{**vars(trained.config), "dropout": 0.1})).eval()
    x = ids(2, 9)
    assert not torch.equal(fresh(x).logits, trained(x).logits)
    init_from(fresh, trained)
    assert torch.equal(fresh(x).logits, trained(x).logits)
    deeper = DecoderOnlyLM(DecoderOnlyConfig(**{**vars(trained.config), "n_layer": 3}))
    with pytest.raises(ValueError, match="n_layer is 2 there, 3 here"):
        init_from(deeper, trained)
    with pytest.raises(ValueError, match="from a 'encoder_decoder' checkpoint"):
        init_from(fresh, tiny_seq2seq())


def test_eval_mode_is_deterministic_with_dropout():
    torch.manual_seed(0)
    config = DecoderOnlyConfig(vocab_size=VOCAB, block_size=16, n_layer=2, n_head=2, d_model=16, d_ff=32,
                               dropout=0.5)
    model = DecoderOnlyLM(config)
    x = ids(2, 8)
    assert not torch.equal(model(x).logits, model(x).logits)  # training: dropout is on
    model.eval()
    assert torch.equal(model(x).logits, model(x).logits)


def test_resolve_device():
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device(" CPU ") == "cpu"
    for bad in ("tpu", "cuda:x", "cuda:-1", ""):
        with pytest.raises(ValueError, match=f"device must be auto, cpu, cuda or cuda:N, not '{bad}'"):
            resolve_device(bad)
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        assert resolve_device("cuda") == "cuda" and resolve_device(f"cuda:{count - 1}") == f"cuda:{count - 1}"
        with pytest.raises(ValueError, match=f"device cuda:{count}: there .* only {count} CUDA"):
            resolve_device(f"cuda:{count}")
    else:
        for name in ("cuda", "cuda:0", "CUDA:1"):
            with pytest.raises(ValueError, match=f"device {name.lower()}: no CUDA device is available"):
                resolve_device(name)

