"""Parity with the field's library, as the layers have parity tests against torch's modules: our
integrated gradients, gradient × input and occlusion against Captum's IntegratedGradients
(Gauss-Legendre, same nodes and pad baseline), InputXGradient and FeatureAblation (a feature
"ablated" = the token deleted, as our occlusion does), on the tiny classifier and the tiny LM."""

import pytest
import torch
from captum.attr import FeatureAblation, InputXGradient, IntegratedGradients

from classifier import Reader
from inspection import attribute, attribute_token
from model import DecoderOnlyConfig, DecoderOnlyLM, EncoderDecoder, EncoderDecoderConfig

CANDIDATES = [[3], [4]]
SRC = torch.tensor([9, 5, 12, 7, 14, 6, 11, 2])  # ordinary tokens + eos
LM_IDS = torch.tensor([1, 5, 9, 3, 12, 7, 14, 4, 10])  # bos + ordinary tokens; explain the last one
STEPS = 16


@pytest.fixture(scope="module")
def classifier() -> EncoderDecoder:
    torch.manual_seed(0)
    config = EncoderDecoderConfig(vocab_size=16, max_src_len=16, max_tgt_len=4, n_encoder_layer=2,
                                  n_decoder_layer=1, n_head=2, d_model=16, d_ff=32, dropout=0.0)
    return EncoderDecoder(config).eval()


@pytest.fixture(scope="module")
def lm() -> DecoderOnlyLM:
    torch.manual_seed(0)
    config = DecoderOnlyConfig(vocab_size=16, block_size=16, n_layer=2, n_head=2, d_model=16, d_ff=32, dropout=0.0)
    return DecoderOnlyLM(config).eval()


def classifier_f(model, label):
    """f(embeddings (B, S, C)) -> (B,): log P(label) among the candidates, as our methods explain."""
    return lambda x: Reader(model).log_probs(model.encode(None, inputs_embeds=x)[0], CANDIDATES)[:, label]


def lm_f(lm, token):
    """f(embeddings (B, T, C)) -> (B,): log p(token | context)."""
    return lambda x: lm(None, inputs_embeds=x).logits[:, -1].float().log_softmax(-1)[:, token]


def deleting(f_of_ids, ids, protected):
    """FeatureAblation's forward: a keep mask (B, S) in, f of each row with its 0-positions deleted
    (protected positions, the special tokens, never are) -> (B,)."""
    def forward(keep):
        return torch.cat([f_of_ids(ids[(k > 0) | protected][None]) for k in keep])
    return forward


def models(classifier, lm):
    """(ours(method, **kw) -> scores, f of embeddings, f of ids (1, S), ids, embed) for each model."""
    label = attribute(classifier, SRC, CANDIDATES, "random").label
    token = int(LM_IDS[-1])
    f_clf = classifier_f(classifier, label)
    f_lm = lm_f(lm, token)
    return [
        (lambda m, **kw: attribute(classifier, SRC, CANDIDATES, m, **kw).scores, f_clf,
         lambda ids: f_clf(classifier.embed(ids)), SRC, classifier.embed),
        (lambda m, **kw: attribute_token(lm, LM_IDS, len(LM_IDS) - 1, m, **kw).scores, f_lm,
         lambda ids: f_lm(lm.embed(ids)), LM_IDS[:-1], lm.embed),
    ]


def test_integrated_gradients_match_captum(classifier, lm):
    for ours, f, _, ids, embed in models(classifier, lm):
        with torch.no_grad():
            x, x0 = embed(ids[None]), embed(torch.zeros_like(ids)[None])
        theirs = IntegratedGradients(f).attribute(x, baselines=x0, n_steps=STEPS, method="gausslegendre")
        torch.testing.assert_close(ours("integrated_gradients", steps=STEPS, max_steps=STEPS), theirs.sum(-1)[0],
                                   rtol=1e-4, atol=1e-5)


def test_grad_x_input_matches_captum(classifier, lm):
    for ours, f, _, ids, embed in models(classifier, lm):
        with torch.no_grad():
            x = embed(ids[None]).requires_grad_()
        torch.testing.assert_close(ours("grad_x_input"), InputXGradient(f).attribute(x).sum(-1)[0],
                                   rtol=1e-4, atol=1e-5)


def test_occlusion_matches_captum_feature_ablation(classifier, lm):
    for (ours, _, f_ids, ids, _), special in zip(models(classifier, lm), (SRC == 2, LM_IDS[:-1] == 1), strict=True):
        keep = torch.ones(1, ids.numel())
        with torch.no_grad():
            theirs = FeatureAblation(deleting(f_ids, ids, special)).attribute(keep, baselines=0.0)
        torch.testing.assert_close(ours("occlusion"), theirs[0], rtol=1e-4, atol=1e-5)
