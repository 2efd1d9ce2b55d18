"""Head ablation (`inspection/ablation.py`): no head knocked out changes nothing, bit for bit; a knocked-out
head changes exactly its own share of the output projection, checked against attention computed
by hand; the batched ranking equals one ablated pass per head."""

import math

import pytest
import torch

from classifier import Reader
from inspection.ablation import Head, HeadMask, ablate, all_heads, classifier_head_effects, lm_head_effects
from model import DecoderOnlyConfig, DecoderOnlyLM, EncoderDecoder, EncoderDecoderConfig, MultiHeadAttention
from model.config import TransformerConfig
from model.hooks import attach, attached

CANDIDATES = [[5, 6], [7]]


@pytest.fixture(scope="module")
def lm() -> DecoderOnlyLM:
    torch.manual_seed(0)
    return DecoderOnlyLM(DecoderOnlyConfig(vocab_size=40, block_size=16, n_layer=3, n_head=2, d_model=16,
                                           d_ff=32)).eval()


@pytest.fixture(scope="module")
def classifier() -> EncoderDecoder:
    torch.manual_seed(1)
    return EncoderDecoder(EncoderDecoderConfig(vocab_size=40, max_src_len=16, max_tgt_len=4, n_encoder_layer=2,
                                               n_decoder_layer=2, n_head=4, d_model=16, d_ff=32,
                                               dropout=0.0)).eval()


def heads_by_hand(attn: MultiHeadAttention, x: torch.Tensor, causal: bool) -> torch.Tensor:
    """softmax(q kᵀ / √d_k) v for each head, from the projection weights: (B, H, T, d_k)."""
    B, T, C = x.shape
    H, d = attn.n_head, C // attn.n_head
    q, k, v = (x @ attn.in_proj.weight.T + attn.in_proj.bias).split(C, dim=-1)
    q, k, v = (t.view(B, T, H, d).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return scores.softmax(-1) @ v


@pytest.mark.parametrize("mode", ["zero", "mean"])
@pytest.mark.parametrize("causal", [False, True])
def test_a_knocked_out_head_changes_only_its_own_share(mode: str, causal: bool) -> None:
    torch.manual_seed(2)
    attn = MultiHeadAttention(TransformerConfig(vocab_size=8, d_model=16, n_head=4, dropout=0.0)).eval()
    x = torch.randn(2, 5, 16)
    heads = heads_by_hand(attn, x, causal)  # (B, H, T, d_k)
    knocked = heads.clone()
    if mode == "zero":
        knocked[:, 2] = 0.0
    else:  # each position: the head's mean over the positions it may read (all, or up to it)
        counts = torch.arange(1, 6, dtype=torch.float32)[:, None]
        knocked[:, 2] = heads[:, 2].cumsum(1) / counts if causal else heads[:, 2].mean(1, keepdim=True)
    expected = attn.out_proj(knocked.transpose(1, 2).reshape(2, 5, 16))
    with attach(attn, patch={"hook_heads": HeadMask(torch.tensor([True, True, False, True]), mode, causal)}):
        out = attn(x, is_causal=causal)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    # the change is head 2's columns of the output projection times what it no longer writes
    full = attn(x, is_causal=causal)
    w_head = attn.out_proj.weight[:, 8:12]  # (C, d_k)
    torch.testing.assert_close(full - out, (heads[:, 2] - knocked[:, 2]) @ w_head.T, atol=1e-5, rtol=1e-5)


def test_no_head_ablated_changes_nothing_bit_for_bit(lm, classifier) -> None:
    ids = torch.randint(3, 40, (2, 9))
    with torch.inference_mode():
        before = lm(ids).logits
        with ablate(lm, [], "mean"):
            assert not attached(lm)
            during = lm(ids).logits
        # a mask that keeps every head: `torch.where` passes them through
        keep_all = HeadMask(torch.ones(2, dtype=torch.bool), "mean", True)
        with lm.hooks(patch={"decoder.layers.1.self_attn.hook_heads": keep_all}):
            kept = lm(ids).logits
        tgt = torch.tensor([[1, 5, 6]])
        enc_before = classifier(ids, tgt.repeat(2, 1)).logits
        with ablate(classifier, [], "zero"):
            enc_during = classifier(ids, tgt.repeat(2, 1)).logits
    assert torch.equal(before, during) and torch.equal(before, kept) and torch.equal(enc_before, enc_during)


def test_ablate_reaches_only_the_named_layer_and_undoes_itself(lm) -> None:
    ids = torch.randint(3, 40, (1, 8))
    layers_out = [f"decoder.layers.{i}.sublayer.1.hook_resid" for i in range(3)]
    with torch.inference_mode():
        with lm.hooks(read=layers_out) as plain:
            lm(ids)
        with ablate(lm, [Head("decoder_self", 1, 0)]), lm.hooks(read=layers_out) as knocked:
            lm(ids)
    plain, knocked = [plain[n] for n in layers_out], [knocked[n] for n in layers_out]
    assert torch.equal(plain[0], knocked[0])  # below the head: untouched
    assert not torch.allclose(plain[1], knocked[1]) and not torch.allclose(plain[2], knocked[2])
    assert not attached(lm)


def test_mean_ablation_never_reads_the_future(lm) -> None:
    a = torch.randint(3, 40, (1, 10))
    b = a.clone()
    b[0, 6:] = torch.randint(3, 40, (4,))
    with torch.inference_mode(), ablate(lm, [Head("decoder_self", 0, 1), Head("decoder_self", 2, 0)], "mean"):
        la, lb = lm(a).logits, lm(b).logits
    torch.testing.assert_close(la[:, :6], lb[:, :6])


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_lm_ranking_equals_one_ablated_pass_per_head(lm, mode: str) -> None:
    ids = torch.randint(3, 40, (1, 11))
    effects = lm_head_effects(lm, ids, token=7, mode=mode)
    assert set(effects.ablated) == set(all_heads(lm)) and len(effects.ablated) == 6
    with torch.inference_mode():
        assert effects.base == pytest.approx(float(lm(ids).logits[0, -1].softmax(-1)[7]), abs=1e-6)
        for head, p in effects.ablated.items():
            with ablate(lm, [head], mode):
                assert p == pytest.approx(float(lm(ids).logits[0, -1].softmax(-1)[7]), abs=1e-6)
    assert effects.deltas()[Head("decoder_self", 0, 0)] == pytest.approx(
        effects.ablated[Head("decoder_self", 0, 0)] - effects.base)


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_classifier_ranking_equals_one_ablated_pass_per_head(classifier, mode: str) -> None:
    src = torch.randint(3, 40, (1, 12))
    effects = classifier_head_effects(classifier, src, CANDIDATES, label=1, mode=mode)
    kinds = {h.kind for h in effects.ablated}
    assert kinds == {"encoder_self", "decoder_self", "cross"} and len(effects.ablated) == 2 * 4 + 2 * 4 + 2 * 4

    def p_label():
        memory, _ = classifier.encode(src)
        return float(Reader(classifier).log_probs(memory, CANDIDATES)[0, 1].exp())

    with torch.inference_mode():
        assert effects.base == pytest.approx(p_label(), abs=1e-6)
        for head, p in effects.ablated.items():
            with ablate(classifier, [head], mode):
                assert p == pytest.approx(p_label(), abs=1e-6)


def test_bad_heads_and_modes_are_refused(lm) -> None:
    for head in (Head("decoder_self", 3, 0), Head("decoder_self", 0, 2), Head("cross", 0, 0),
                 Head("decoder_self", -1, 0)):
        with pytest.raises(ValueError, match="no head"), ablate(lm, [head]):
            pass
    with pytest.raises(ValueError, match="mode"), ablate(lm, [Head("decoder_self", 0, 0)], "noise"):
        pass
    assert not attached(lm)
