"""Why this token? (`inspection.token_attribution`): the classifier's attribution methods on one token
of a tiny random `DecoderOnlyLM`, checked against plain forward passes."""

import math

import pytest
import torch

from inspection import METHODS, attribute_token, token_faithfulness
from inspection.attribution import IG_ABS_TOLERANCE, IG_MAX_STEPS, IG_TOLERANCE
from model import DecoderOnlyConfig, DecoderOnlyLM

IDS = torch.tensor([1, 5, 9, 3, 12, 7, 14, 4, 10, 6, 11, 8])  # bos + ordinary tokens (3..15)
POSITION = 8  # explain IDS[8] = 10 from IDS[:8]
ALTERNATIVE = 13


@pytest.fixture(scope="module")
def lm() -> DecoderOnlyLM:
    torch.manual_seed(0)
    config = DecoderOnlyConfig(vocab_size=16, block_size=16, n_layer=2, n_head=2, d_model=16, d_ff=32, dropout=0.0)
    return DecoderOnlyLM(config).eval()


def log_p(lm, context: torch.Tensor, token: int) -> float:
    """log p(token | context), the plain way: one forward pass, last position."""
    with torch.no_grad():
        return float(lm(context[None]).logits[0, -1].float().log_softmax(-1)[token])


@pytest.mark.parametrize("method", METHODS)
def test_one_score_per_earlier_token(lm, method):
    r = attribute_token(lm, IDS, POSITION, method)
    assert r.scores.shape == (POSITION,)
    assert r.scores.dtype == torch.float32 and torch.isfinite(r.scores).all()
    assert r.token == int(IDS[POSITION]) and r.window_start == 0
    assert r.target == pytest.approx(log_p(lm, IDS[:POSITION], r.token), abs=1e-5)


@pytest.mark.parametrize("method", METHODS)
def test_later_tokens_are_never_attributed(lm, method):
    """The explained token and everything after it are not context: changing them changes nothing."""
    changed = IDS.clone()
    changed[POSITION + 1 :] = 3
    a = attribute_token(lm, IDS, POSITION, method)
    b = attribute_token(lm, changed, POSITION, method)
    torch.testing.assert_close(a.scores, b.scores, rtol=0, atol=0)


def test_tokens_before_the_window_score_zero():
    """The model saw only the last block_size tokens; those before score 0, the rest as if alone."""
    torch.manual_seed(0)
    small = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=16, block_size=5, n_layer=1, n_head=2, d_model=16, d_ff=32,
                                            dropout=0.0)).eval()
    r = attribute_token(small, IDS, POSITION, "occlusion")
    alone = attribute_token(small, IDS[POSITION - 5 :], 5, "occlusion")
    assert r.window_start == POSITION - 5
    assert (r.scores[: POSITION - 5] == 0).all()
    torch.testing.assert_close(r.scores[POSITION - 5 :], alone.scores)


def test_integrated_gradients_completeness(lm):
    """Scores sum to f(context) - f(pad context) within the method's stated tolerance; f(pad context)
    is the plain forward pass on pads."""
    r = attribute_token(lm, IDS, POSITION, "integrated_gradients")
    pads = torch.full((POSITION,), lm.config.pad_token_id)
    assert r.baseline_target == pytest.approx(log_p(lm, pads, r.token), abs=1e-5)
    gap = r.target - r.baseline_target
    assert abs(float(r.scores.sum()) - gap) <= max(IG_TOLERANCE * abs(gap), IG_ABS_TOLERANCE)


def test_occlusion_deletes_each_token(lm):
    """Each ordinary token's score is f(context) - f(context without it); bos is never deleted."""
    r = attribute_token(lm, IDS, POSITION, "occlusion")
    context = IDS[:POSITION]
    full = log_p(lm, context, r.token)
    for j in range(1, POSITION):
        without = torch.cat([context[:j], context[j + 1 :]])
        assert float(r.scores[j]) == pytest.approx(full - log_p(lm, without, r.token), abs=1e-5)
    assert r.scores[0] == 0


@pytest.mark.parametrize("method", ["attention", "rollout"])
def test_attention_methods_are_distributions_over_the_context(lm, method):
    r = attribute_token(lm, IDS, POSITION, method)
    assert (r.scores >= 0).all()
    assert float(r.scores.sum()) == pytest.approx(1.0, abs=1e-5)


def test_attention_is_the_last_positions_row(lm):
    with torch.no_grad():
        maps = lm(IDS[None, :POSITION], output_attentions=True).attentions
    expected = torch.stack([m.weights[0, :, -1] for m in maps]).mean((0, 1))
    torch.testing.assert_close(attribute_token(lm, IDS, POSITION, "attention").scores, expected)


@pytest.mark.parametrize("method", ["grad_x_input", "occlusion", "integrated_gradients"])
def test_contrastive_is_the_difference_of_the_two_tokens(lm, method):
    """f = log p(token) - log p(alternative) is linear in the two log-probs, and so are these methods
    (integrated gradients at a fixed number of nodes)."""
    steps = {"steps": IG_MAX_STEPS, "max_steps": IG_MAX_STEPS}
    both = attribute_token(lm, IDS, POSITION, method, alternative=ALTERNATIVE, **steps)
    chosen = attribute_token(lm, IDS, POSITION, method, **steps)
    other_ids = IDS.clone()
    other_ids[POSITION] = ALTERNATIVE
    other = attribute_token(lm, other_ids, POSITION, method, **steps)
    assert both.target == pytest.approx(chosen.log_prob - other.log_prob, abs=1e-5)
    assert both.alternative_log_prob == pytest.approx(other.log_prob, abs=1e-6)
    torch.testing.assert_close(both.scores, chosen.scores - other.scores, rtol=0, atol=1e-5)


def test_bad_requests_say_what_is_wrong(lm):
    with pytest.raises(ValueError, match="unknown attribution method"):
        attribute_token(lm, IDS, POSITION, "shap")
    for position in (0, len(IDS), -1):
        with pytest.raises(ValueError, match="outside 1..11"):
            attribute_token(lm, IDS, position, "random")
    with pytest.raises(ValueError, match="vocabulary"):
        attribute_token(lm, IDS, POSITION, "random", alternative=16)


def test_token_faithfulness_deletes_and_keeps_the_top_tokens(lm):
    """Comprehensiveness/sufficiency at one bin (50%), against deletions made by hand: the top half
    of the 7 ordinary context tokens is 4 (ceil), bos is never deleted."""
    r = attribute_token(lm, IDS, POSITION, "occlusion")
    context = IDS[:POSITION]
    top = set((r.scores[1:].argsort(descending=True, stable=True)[:4] + 1).tolist())
    deleted = torch.tensor([t for i, t in enumerate(context.tolist()) if i not in top])
    kept = torch.tensor([t for i, t in enumerate(context.tolist()) if i == 0 or i in top])
    p = math.exp(r.log_prob)
    got = token_faithfulness(lm, IDS, r, (0.5,))
    assert got["comprehensiveness"] == pytest.approx(p - math.exp(log_p(lm, deleted, r.token)), abs=1e-5)
    assert got["sufficiency"] == pytest.approx(p - math.exp(log_p(lm, kept, r.token)), abs=1e-5)
