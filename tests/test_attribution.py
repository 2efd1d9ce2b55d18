"""Token attributions (`inspection.attribution`): each method checked against an independent
computation, and all of them on a toy classifier whose answer depends on one marker token only."""

import math

import pytest
import torch
from scipy.stats import spearmanr

from classifier import Reader
from inspection import (
    ATTRIBUTIONS,
    DESCRIPTIONS,
    METHODS,
    attribute,
    attribute_methods,
    attribution,
    erase,
    faithfulness,
    rank_correlation,
    top_count,
)
from inspection.attribution import IG_MAX_STEPS, evaluating, ig_rules, label_step_attention
from model import EncoderDecoder, EncoderDecoderConfig
from tokenization import in_word, word_ids

PAD, BOS, EOS, NEG, POS, MARKER = 0, 1, 2, 3, 4, 5
CANDIDATES = [[NEG], [POS]]  # one-token label words
FILLERS = (6, 16)  # the toy task's other tokens


def log_p(model, ids: list[int], label: int) -> float:
    """f, computed the plain way: log-softmax of `candidate_scores` on an unpadded source."""
    with torch.no_grad():
        memory = model.encode(torch.tensor([ids]))[0]
        return float(model.candidate_scores(memory, CANDIDATES)[0].log_softmax(-1)[0, label])


@pytest.fixture(scope="module")
def random_model() -> EncoderDecoder:
    torch.manual_seed(0)
    config = EncoderDecoderConfig(vocab_size=16, max_src_len=32, max_tgt_len=4, n_encoder_layer=2,
                                  n_decoder_layer=1, n_head=2, d_model=16, d_ff=32, dropout=0.0)
    return EncoderDecoder(config).eval()


def marker_batch(n: int, g: torch.Generator, marker: bool | None = None):
    """Sources of 8 filler tokens + eos; `marker` (or a coin flip per row) puts the marker token at a
    random position. The label is positive iff the marker is there -> src, tgt_in, targets, where."""
    src = torch.randint(*FILLERS, (n, 9), generator=g)
    src[:, -1] = EOS
    has = torch.rand(n, generator=g) < 0.5 if marker is None else torch.full((n,), marker)
    where = torch.randint(0, 8, (n,), generator=g)
    src[has, where[has]] = MARKER
    label = torch.where(has, POS, NEG)
    tgt_in = torch.stack([torch.full((n,), BOS), label], 1)
    return src, tgt_in, torch.stack([label, torch.full((n,), EOS)], 1), where


@pytest.fixture(scope="module")
def marker_model() -> EncoderDecoder:
    """A tiny classifier trained (a few seconds on CPU) on a task where only the marker matters."""
    torch.manual_seed(1)  # seeds 1-4 all give 8/8 below; with seed 0 grad x input finds 5 of the 8 markers
    config = EncoderDecoderConfig(vocab_size=16, max_src_len=16, max_tgt_len=4, n_encoder_layer=1,
                                  n_decoder_layer=1, n_head=2, d_model=32, d_ff=64, dropout=0.0)
    model = EncoderDecoder(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        src, tgt_in, targets, _ = marker_batch(32, g)
        loss = model(src, tgt_in, targets=targets).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05
    return model.eval()


def test_methods_are_the_benchmark_names():
    assert METHODS == ("attention", "rollout", "grad_x_input", "integrated_gradients", "occlusion", "random")


def test_every_registered_method_has_a_description_the_app_shows():
    from demo.text import EXPLAIN_INTRO, METHOD_NAMES

    assert tuple(DESCRIPTIONS) == tuple(ATTRIBUTIONS) == METHODS
    for name, line in DESCRIPTIONS.items():
        assert line.strip() and "\n" not in line
        assert f"**{METHOD_NAMES[name]}** ({line})" in EXPLAIN_INTRO


@pytest.mark.parametrize("method", METHODS)
def test_every_method_scores_each_token_for_the_written_label(random_model, method):
    ids = [7, 9, 11, 6, 13, EOS]
    result = attribute(random_model, torch.tensor(ids), CANDIDATES, method)
    with torch.no_grad():
        probs = random_model.candidate_scores(random_model.encode(torch.tensor([ids]))[0], CANDIDATES)[0].softmax(-1)[0]
    assert result.method == method
    assert result.scores.shape == (6,) and result.scores.dtype == torch.float32
    assert result.label == int(probs.argmax())
    torch.testing.assert_close(result.probabilities, probs, rtol=0, atol=1e-6)
    assert result.target == pytest.approx(log_p(random_model, ids, result.label), abs=1e-6)
    assert torch.isfinite(result.scores).all()


def test_attention_is_the_label_steps_cross_attention(random_model):
    ids = torch.tensor([[7, 9, 11, 6, 13, EOS]])
    result = attribute(random_model, ids, CANDIDATES, "attention", label=1)
    with torch.no_grad():
        maps = random_model(ids, torch.tensor([[BOS, POS]]), output_attentions=True).attentions
    cross = [m.weights[0, :, 0, :] for m in maps if m.kind == "cross"]  # 1 layer: (H, S)
    torch.testing.assert_close(result.scores, cross[0].mean(0))
    assert result.scores.sum().item() == pytest.approx(1.0, abs=1e-5)


def test_rollout_multiplies_residual_attention_through_the_encoder(random_model):
    ids = torch.tensor([[7, 9, 11, 6, 13, EOS]])
    result = attribute(random_model, ids, CANDIDATES, "rollout", label=0)
    with torch.no_grad():
        maps = random_model(ids, torch.tensor([[BOS, NEG]]), output_attentions=True).attentions
    enc = [m.weights[0].mean(0).double() for m in maps if m.kind == "encoder_self"]  # 2 x (S, S)
    cross = next(m.weights[0, :, 0, :] for m in maps if m.kind == "cross").mean(0).double()
    eye = torch.eye(6, dtype=torch.float64)
    a1, a2 = (0.5 * (a + eye) for a in enc)  # rows already sum to 1
    expected = cross @ a2 @ a1  # the label reads layer 2's output, which mixes layer 1's, which mixes the input
    torch.testing.assert_close(result.scores.double(), expected, rtol=1e-5, atol=1e-6)
    assert result.scores.sum().item() == pytest.approx(1.0, abs=1e-5)  # attention flow is conserved


def test_grad_x_input_is_the_derivative_of_scaling_each_embedding(random_model):
    """score_i = ∂f/∂x_i · x_i = d/dε f(x with x_i scaled by 1 + ε) at 0: a central difference."""
    model = random_model
    ids = torch.tensor([[7, 9, 11, 6, 13, EOS]])
    result = attribute(model, ids, CANDIDATES, "grad_x_input", label=1)
    eps = 1e-2
    with torch.no_grad():
        x = model.embed(ids)

        def f(scale: torch.Tensor) -> float:
            memory, _ = model.encode(None, inputs_embeds=x * scale[None, :, None])
            return float(model.candidate_scores(memory, CANDIDATES)[0].log_softmax(-1)[0, 1])

        for i in range(6):
            bump = torch.ones(6)
            bump[i] = 1 + eps
            down = torch.ones(6)
            down[i] = 1 - eps
            assert result.scores[i].item() == pytest.approx((f(bump) - f(down)) / (2 * eps), rel=2e-2, abs=1e-4)


def test_integrated_gradients_is_complete_at_64_steps(marker_model):
    src, _, _, _ = marker_batch(4, torch.Generator().manual_seed(1), marker=True)
    for row in src:
        result = attribute(marker_model, row, CANDIDATES, "integrated_gradients", steps=64)
        pads = [PAD] * len(row)
        assert result.baseline_target == pytest.approx(log_p(marker_model, pads, result.label), abs=1e-5)
        gap = result.target - result.baseline_target
        assert abs(gap) > 1.0  # the all-pad baseline does not predict "positive": a real test
        assert result.scores.sum().item() == pytest.approx(gap, rel=0.05)
        assert result.steps == 64


def test_integrated_gradients_adds_nodes_until_complete(marker_model):
    row = marker_batch(1, torch.Generator().manual_seed(1), marker=True)[0][0]
    coarse = attribute(marker_model, row, CANDIDATES, "integrated_gradients", steps=1, max_steps=1)
    refined = attribute(marker_model, row, CANDIDATES, "integrated_gradients", steps=1, max_steps=64)
    gap = refined.target - refined.baseline_target
    assert coarse.steps == 1 and abs(coarse.scores.sum().item() - gap) > 0.05 * abs(gap)  # one node is not enough
    assert refined.steps in (2, 4, 8, 16, 32, 64)
    assert abs(refined.scores.sum().item() - gap) <= 0.05 * abs(gap)
    again = attribute(marker_model, row, CANDIDATES, "integrated_gradients", steps=refined.steps, max_steps=1)
    torch.testing.assert_close(refined.scores, again.scores)  # the refined answer is the plain one at that count


def test_ig_rules_default_ladder_and_doubling():
    default = ig_rules()
    assert [len(r.nodes) for r in default] == [7, 15, IG_MAX_STEPS]
    assert set(default[0].nodes.tolist()) < set(default[1].nodes.tolist())  # Kronrod reuses Gauss's 7
    assert [len(r.nodes) for r in ig_rules(3, 20)] == [3, 6, 12, 20]
    assert [len(r.nodes) for r in ig_rules(64)] == [64]
    with pytest.raises(ValueError, match="at least one step"):
        ig_rules(0)


def test_integrated_gradients_ladder_reuses_the_gauss_nodes(marker_model, monkeypatch):
    row = marker_batch(1, torch.Generator().manual_seed(1), marker=True)[0][0]
    monkeypatch.setattr(attribution, "IG_ABS_TOLERANCE", 1e9)  # any rule will do: the first one is used
    first = attribute(marker_model, row, CANDIDATES, "integrated_gradients")
    assert (first.steps, first.passes) == (7, 7)
    monkeypatch.setattr(attribution, "IG_ABS_TOLERANCE", 0.0)
    monkeypatch.setattr(attribution, "IG_TOLERANCE", 0.0)  # no rule will do: all are tried, the last is used
    last = attribute(marker_model, row, CANDIDATES, "integrated_gradients")
    assert (last.steps, last.passes) == (IG_MAX_STEPS, 15 + IG_MAX_STEPS)  # not 7 + 15 + 32: the 7 were reused
    plain = attribute(marker_model, row, CANDIDATES, "integrated_gradients", steps=IG_MAX_STEPS, max_steps=IG_MAX_STEPS)
    torch.testing.assert_close(last.scores, plain.scores)
    # the Kronrod rule's answer, by hand: its weights times gradient·(x - x0) at its own 15 nodes
    kronrod = ig_rules()[1]
    x = marker_model.embed(row[None]).detach()
    x0 = marker_model.embed(torch.full_like(row[None], PAD)).detach()
    expected = torch.zeros(row.numel())
    for a, w in zip(kronrod.nodes.tolist(), kronrod.weights.tolist(), strict=True):
        point = (x0 + a * (x - x0)).requires_grad_()
        memory, _ = marker_model.encode(None, inputs_embeds=point)
        f = Reader(marker_model).log_probs(memory, CANDIDATES)[0, first.label]
        (grad,) = torch.autograd.grad(f, point)
        expected += w * ((x - x0) * grad).sum(-1)[0]
    monkeypatch.setattr(attribution, "ig_rules", lambda steps, max_steps: [kronrod])
    torch.testing.assert_close(attribute(marker_model, row, CANDIDATES, "integrated_gradients").scores, expected,
                               rtol=1e-4, atol=1e-6)


def test_occlusion_equals_manual_deletion(random_model):
    ids = [7, 9, 11, 6, 13, 8, EOS]
    result = attribute(random_model, torch.tensor(ids), CANDIDATES, "occlusion", label=0)
    full = log_p(random_model, ids, 0)
    for i in range(6):
        assert result.scores[i].item() == pytest.approx(full - log_p(random_model, ids[:i] + ids[i + 1:], 0), abs=1e-5)
    assert result.scores[6].item() == 0.0  # the end token is never deleted


def test_occlusion_of_long_sources_deletes_runs_of_words(random_model):
    ids = [7, 9, 11, 6, 13, 8, 10, EOS]
    words = [0, 0, 1, 2, 2, 3, 4, 5]  # 5 words + the end token; 3 units allowed -> 2 words per unit
    result = attribute(random_model, torch.tensor(ids), CANDIDATES, "occlusion", label=1, word_ids=words, max_units=3)
    full = log_p(random_model, ids, 1)
    for unit in ([0, 1, 2], [3, 4, 5], [6]):
        kept = [t for i, t in enumerate(ids) if i not in unit]
        for i in unit:
            assert result.scores[i].item() == pytest.approx(full - log_p(random_model, kept, 1), abs=1e-5)


def test_padded_positions_score_zero(random_model):
    ids = torch.tensor([[7, 9, 11, EOS, PAD, PAD]])
    padded = attribute(random_model, ids, CANDIDATES, "grad_x_input", src_mask=torch.tensor([[1, 1, 1, 1, 0, 0]]))
    plain = attribute(random_model, ids[:, :4], CANDIDATES, "grad_x_input")
    torch.testing.assert_close(padded.scores[:4], plain.scores)
    assert padded.scores[4:].tolist() == [0.0, 0.0]


def test_attribute_methods_equals_one_call_per_method_with_one_source_pass(random_model, monkeypatch):
    ids = torch.tensor([7, 9, 11, 6, 13, 8, 10, EOS])
    alone = {m: attribute(random_model, ids, CANDIDATES, m, label=1) for m in METHODS}
    calls = []
    encode = random_model.encode
    monkeypatch.setattr(random_model, "encode", lambda *a, **kw: calls.append(kw) or encode(*a, **kw))
    together = attribute_methods(random_model, ids, CANDIDATES, ("attention", "rollout", "random"), label=1)
    assert list(together) == ["attention", "rollout", "random"]
    assert len(calls) == 1 and calls[0]["output_attentions"]  # one pass serves the label, attention and rollout
    both = attribute_methods(random_model, ids, CANDIDATES, METHODS, label=1)
    for m in METHODS:
        torch.testing.assert_close(both[m].scores, alone[m].scores, rtol=1e-5, atol=1e-6)
        assert (both[m].label, both[m].target, both[m].steps) == (1, alone[m].target, alone[m].steps)


def test_random_is_seeded(random_model):
    ids = torch.tensor([7, 9, 11, 6, 13, EOS])
    a, b = (attribute(random_model, ids, CANDIDATES, "random", seed=s).scores for s in (0, 1))
    torch.testing.assert_close(a, attribute(random_model, ids, CANDIDATES, "random", seed=0).scores)
    assert not torch.equal(a, b)


def test_every_gradient_method_and_occlusion_find_the_marker(marker_model):
    src, _, _, where = marker_batch(8, torch.Generator().manual_seed(1), marker=True)
    firsts = {}
    for method in ("grad_x_input", "integrated_gradients", "occlusion", "random"):
        firsts[method] = 0
        for i, row in enumerate(src):
            result = attribute(marker_model, row, CANDIDATES, method, seed=i)
            assert result.label == 1  # "positive": the model saw the marker
            firsts[method] += int(result.scores[:-1].argmax()) == int(where[i])  # the end token aside
    assert firsts["grad_x_input"] == firsts["integrated_gradients"] == firsts["occlusion"] == 8
    assert firsts["random"] <= 2  # chance is 1 in 8 per review


def test_erase_equals_manual_deletion_and_keeping(random_model):
    ids = [7, 9, 11, 6, 13, 8, 10, 12, 14, 15, EOS]
    scores = torch.tensor([0.1, 0.9, 0.3, 0.8, 0.2, 0.7, 0.0, 0.4, 0.6, 0.5, 99.0])  # eos is never counted
    deleted = erase(random_model, torch.tensor(ids), CANDIDATES, scores, 1, (0.1, 0.2, 0.5))
    kept = erase(random_model, torch.tensor(ids), CANDIDATES, scores, 1, (0.1, 0.2, 0.5), keep=True)
    by_score = [1, 3, 5, 8, 9]  # the top half of the 10 review tokens, best first
    for j, k in enumerate((1, 2, 5)):  # ceil(10%, 20%, 50% of 10)
        top = set(by_score[:k])
        rest = [t for i, t in enumerate(ids) if i not in top]
        only = [t for i, t in enumerate(ids) if i in top or t == EOS]
        assert deleted[j].item() == pytest.approx(math.exp(log_p(random_model, rest, 1)), abs=1e-6)
        assert kept[j].item() == pytest.approx(math.exp(log_p(random_model, only, 1)), abs=1e-6)


def test_faithfulness_is_the_mean_probability_drop(random_model):
    ids = torch.tensor([7, 9, 11, 6, 13, 8, 10, 12, 14, 15, EOS])
    result = attribute(random_model, ids, CANDIDATES, "occlusion")
    p = result.probabilities[result.label].item()
    drops = faithfulness(random_model, ids, CANDIDATES, result, (0.1, 0.5))
    deleted = erase(random_model, ids, CANDIDATES, result.scores, result.label, (0.1, 0.5))
    kept = erase(random_model, ids, CANDIDATES, result.scores, result.label, (0.1, 0.5), keep=True)
    assert drops["comprehensiveness"] == pytest.approx(p - deleted.mean().item(), abs=1e-6)
    assert drops["sufficiency"] == pytest.approx(p - kept.mean().item(), abs=1e-6)


def test_rank_correlation_is_spearman_with_ties():
    a = torch.tensor([0.3, 0.1, 0.1, 0.9, 0.5, 0.5, 0.2])
    b = torch.tensor([1.0, 2.0, 0.0, 5.0, 4.0, 3.0, 3.0])
    assert rank_correlation(a, b) == pytest.approx(spearmanr(a.numpy(), b.numpy()).statistic, abs=1e-12)
    assert rank_correlation(a, a) == pytest.approx(1.0)
    assert rank_correlation(a, -a) == pytest.approx(-1.0)
    assert math.isnan(rank_correlation(a, torch.ones(7)))


def test_word_ids_split_on_spaces_and_punctuation():
    assert word_ids(["This", " movie", " was", "n't", " great", "!", "!", " Lo", "ved", " it", "."]) == \
        [0, 1, 2, 2, 3, 4, 5, 6, 6, 7, 8]


def test_a_token_reads_inside_its_word():
    tokens = ["<s>", "ne", "g", "ative", " film", "."]
    assert [in_word(tokens, i) for i in range(6)] == ["<s>", "[ne]gative", "ne[g]ative", "neg[ative]", " film", "."]


def test_the_top_fraction_counts_tokens_as_erase_deletes_them():
    assert [top_count(f, 10) for f in (0.05, 0.1, 0.2, 0.5)] == [1, 1, 2, 5]  # 0.1 * 10: one token, not two
    assert [top_count(f, 5) for f in (0.05, 0.1, 0.2)] == [1, 1, 1]  # a short review: one measurement
    with pytest.raises(ValueError, match="fractions are in"):
        top_count(1.5, 10)


def test_bad_requests_say_what_is_wrong(random_model):
    ids = torch.tensor([7, 9, EOS])
    with pytest.raises(ValueError, match="unknown attribution method"):
        attribute(random_model, ids, CANDIDATES, "saliency")
    with pytest.raises(ValueError, match="empty"):
        attribute(random_model, torch.tensor([], dtype=torch.long), CANDIDATES, "random")
    with pytest.raises(ValueError, match="label 5"):
        attribute(random_model, ids, CANDIDATES, "random", label=5)


def test_attribution_leaves_the_models_mode_alone(random_model):
    random_model.train()
    try:
        attribute(random_model, torch.tensor([7, 9, EOS]), CANDIDATES, "occlusion")
        assert random_model.training
    finally:
        random_model.eval()


@torch.inference_mode()
def test_one_scoring_pass_gives_the_probabilities_and_the_label_steps_attention(random_model):
    """`label_log_probs_and_maps` equals `label_log_probs`, and its maps give each candidate's
    first-step cross-attention as a decoder pass over that candidate alone does (the attention
    method's former second pass); candidates of different lengths, so padded rows are covered."""
    candidates = [[NEG, 7, 8], [POS]]  # width 4: the second candidate is padded
    ids = torch.tensor([[7, 9, 11, 6, 13, EOS]])
    memory, _ = random_model.encode(ids)
    log_probs, maps = Reader(random_model).log_probs_and_maps(memory, candidates)
    torch.testing.assert_close(log_probs, Reader(random_model).log_probs(memory, candidates), rtol=0, atol=1e-6)
    assert log_probs.shape == (1, 2) and [m.weights.shape for m in maps if m.kind == "cross"] == [(2, 2, 4, 6)]
    for label, cand in enumerate(candidates):
        _, alone = random_model.decode(torch.tensor([[BOS, *cand]]), memory, output_attentions=True)
        expected = torch.stack([m.weights[0, :, 0, :] for m in alone if m.kind == "cross"]).mean((0, 1))  # (S,)
        torch.testing.assert_close(label_step_attention(maps, label), expected, rtol=0, atol=1e-6)
        assert label_step_attention(maps, label).shape == (6,)


def test_evaluating_switches_only_the_training_modules_and_restores_them(random_model):
    """Eval mode inside; outside, each module's own mode again (a mixed model stays mixed), and a
    model already in eval mode is left untouched."""
    random_model.encoder.train()
    try:
        before = {name: m.training for name, m in random_model.named_modules()}
        assert any(before.values()) and not all(before.values())
        with evaluating(random_model):
            assert not any(m.training for m in random_model.modules())
        assert {name: m.training for name, m in random_model.named_modules()} == before
    finally:
        random_model.eval()
    with evaluating(random_model):
        assert not any(m.training for m in random_model.modules())
    assert not any(m.training for m in random_model.modules())
