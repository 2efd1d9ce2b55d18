"""The tour's experiments (`inspection/experiments.py`) on the shipped models: each changes what it
says it changes (checked at the named points or by an independent computation), its output before
and after differ, and its sentence states the numbers it measured."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from classifier import Reader
from inspection import Head, layer_log_probs, lm_head_effects
from inspection.experiments import (
    CLASSIFIER_EXPERIMENTS,
    LM_EXPERIMENTS,
    Run,
    Unavailable,
    classifier_experiment,
    entropy,
    lm_experiment,
)
from model import GenerationConfig, attention_point, load_pretrained
from tokenization import BPETokenizer, prompt_ids, read_review, token_label

ROOT = Path(__file__).resolve().parents[1] / "checkpoints"
TEXT = "The film was not good at all, and the acting was"
REVIEW = "A wonderful film, but far too long. I was bored by the end."
LAYER, HEAD = 2, 1


@pytest.fixture(scope="module")
def lm():
    return load_pretrained(ROOT / "lm"), BPETokenizer.from_file(ROOT / "lm")


@pytest.fixture(scope="module")
def ids(lm):
    return torch.tensor([prompt_ids(TEXT, lm[1])])


@pytest.fixture(scope="module")
def outcomes(lm, ids):
    return {step: lm_experiment(step, *lm, ids, LAYER, HEAD) for step in LM_EXPERIMENTS}


def read(model, ids, names, patch=None):
    with torch.inference_mode(), model.hooks(read=names, patch=patch or {}) as seen:
        logits = model(ids).logits[0]
    return logits, seen


def test_at_least_twelve_lm_steps_change_the_prediction(outcomes):
    assert len(outcomes) >= 12
    for step, o in outcomes.items():
        assert o.before != o.after, step
        assert len(o.before) == len(o.after) == 5 and o.before[0][1] >= o.before[-1][1]
        assert o.change and o.verdict.endswith("."), step


def test_the_loss_in_each_sentence_is_the_one_measured(outcomes, lm, ids):
    logits, _ = read(lm[0], ids, [])
    plain = float(torch.nn.functional.cross_entropy(logits[:-1].double(), ids[0, 1:]))
    for step, o in outcomes.items():
        if "loss" in o.measures:
            assert o.measures["loss"][0] == pytest.approx(plain, abs=1e-4), step
            was, now = o.measures["loss"]
            assert f"{was:.2f} to {now:.2f} nats" in o.verdict, step


def test_unscaled_embeddings_shrink_beside_the_positions(outcomes, lm):
    before, after = outcomes["embedding"].measures["token_to_position_size"]
    assert after == pytest.approx(before / math.sqrt(lm[0].config.d_model), rel=1e-4)
    assert outcomes["embedding"].measures["loss"][1] > outcomes["embedding"].measures["loss"][0]


def test_without_positions_an_order_dependent_text_is_predicted_differently(outcomes):
    o = outcomes["position"]
    assert o.before[0][0] != o.after[0][0] and o.measures["loss"][1] > o.measures["loss"][0]


def test_skipping_the_norm_feeds_the_raw_residual_stream(outcomes, lm, ids):
    _, seen = read(lm[0], ids, [f"decoder.{LAYER - 1}.ffn.resid"])
    raw = float(seen[f"decoder.{LAYER - 1}.ffn.resid"].std())
    assert outcomes["norm"].measures["input_std"][1] == pytest.approx(raw, rel=1e-4)


def test_no_query_means_uniform_attention_over_the_past(outcomes, ids):
    T = ids.size(1)
    uniform = sum(math.log(t + 1) for t in range(T)) / T  # row t spreads over t + 1 keys
    before, after = outcomes["qkv"].measures["entropy"]
    assert after == pytest.approx(uniform, abs=1e-5) and after > before


def test_unscaled_scores_saturate_the_softmax(outcomes):
    before, after = outcomes["scaling"].measures["entropy"]
    assert after < before / 2


def test_without_the_mask_every_token_looks_ahead(lm, ids):
    model = lm[0]
    patch = {attention_point("decoder_self", i, "mask"): torch.ones_like for i in range(model.config.n_layer)}
    first = attention_point("decoder_self", 0, "weights")
    _, masked = read(model, ids, [first])
    _, seen = read(model, ids, [first], patch)
    assert (seen[first][0, :, 0, 1:] > 0).all() and (masked[first][0, :, 0, 1:] == 0).all()  # token 0 looks ahead
    # in the first layer the last token's row is unchanged: it saw every token anyway (above it, its
    # inputs have changed: the earlier positions read the future)
    torch.testing.assert_close(seen[first][0, :, -1], masked[first][0, :, -1], atol=1e-5, rtol=1e-5)


def test_the_mask_sentence_says_what_the_loss_did(outcomes):
    o = outcomes["mask"]
    was, now = o.measures["loss"]
    assert ("copy" in o.verdict) and (("thrown off" in o.verdict) == (now > was))


def test_a_hard_softmax_is_one_hot(lm, ids):
    weights = attention_point("decoder_self", LAYER, "weights")
    _, seen = read(lm[0], ids, [weights], {weights: lambda w: torch.nn.functional.one_hot(
        w.argmax(-1), w.size(-1)).to(w.dtype)})
    assert ((seen[weights] == 0) | (seen[weights] == 1)).all() and (seen[weights].sum(-1) == 1).all()


def test_knocking_out_a_head_matches_the_ablation_ranking(outcomes, lm, ids):
    effects = lm_head_effects(lm[0], ids, int(lm[0](ids).logits[0, -1].argmax()))
    o = outcomes["heads"]
    assert o.after[[t for t, _ in o.after].index(o.before[0][0])][1] == pytest.approx(
        effects.ablated[Head("decoder_self", LAYER, HEAD)], abs=1e-4)


def test_one_head_alone_leaves_the_others_silent(lm, ids):
    from inspection.ablation import HeadMask
    keep = torch.zeros(lm[0].config.n_head, dtype=torch.bool)
    keep[HEAD] = True
    heads = attention_point("decoder_self", LAYER, "heads")
    _, seen = read(lm[0], ids, [heads], {heads: HeadMask(keep, "zero", True)})
    assert (seen[heads][:, ~keep] == 0).all() and (seen[heads][:, HEAD] != 0).any()


def test_without_the_residual_the_stream_is_the_sublayer_output(lm, ids, outcomes):
    store = {}
    point = f"decoder.{LAYER}.attn"

    def keep(x):
        store["out"] = x
        return x
    _, seen = read(lm[0], ids, [f"{point}.resid"], {f"{point}.out": keep, f"{point}.resid": lambda _: store["out"]})
    torch.testing.assert_close(seen[f"{point}.resid"], store["out"])
    assert outcomes["residual"].measures["loss"][1] > outcomes["residual"].measures["loss"][0] + 1


def test_a_skipped_ffn_changes_the_guesses_it_counts(outcomes, lm, ids):
    plain, _ = read(lm[0], ids, [])
    skipped, _ = read(lm[0], ids, [], {f"decoder.{LAYER}.ffn.out": torch.zeros_like})
    assert outcomes["ffn"].measures["guesses_changed"][1] == float((plain.argmax(-1) != skipped.argmax(-1)).sum())


def test_stopping_early_is_the_logit_lens(outcomes, lm, ids):
    lens = layer_log_probs(lm[0], ids[0])[LAYER + 1, -1].exp()  # row 0: the embeddings, row l: after layer l
    top = lens.topk(5)
    assert [p for _, p in outcomes["stack"].after] == pytest.approx(top.values.tolist(), abs=1e-3)


def test_temperature_and_top_k_by_hand(outcomes, lm, ids):
    logits, _ = read(lm[0], ids, [])
    tempered = (logits[-1] / 2).softmax(-1).topk(5).values
    assert [p for _, p in outcomes["probabilities"].after] == pytest.approx(tempered.tolist(), abs=1e-4)
    top5 = logits[-1].topk(5).values.softmax(-1)
    assert [p for _, p in outcomes["sampling"].after] == pytest.approx(top5.tolist(), abs=1e-4)
    before, after = outcomes["sampling"].measures["entropy"]
    assert after == pytest.approx(float(-(top5 * top5.log()).sum()), abs=1e-4) and after < before


def sampled_by_hand(z: np.ndarray, temperature: float, top_k: int | None, top_p: float | None) -> np.ndarray:
    """The sampler's distribution written out in numpy: softmax(z / T), then the top-k mask, then the
    nucleus cut (keep a token while the mass before it is below p), renormalised; T = 0: the argmax."""
    if temperature == 0:
        return np.eye(len(z))[z.argmax()]
    z = z.astype(np.float64) / temperature
    keep = np.ones(len(z), bool) if top_k is None else z >= np.sort(z)[-top_k]
    q = np.where(keep, np.exp(z - z.max()), 0)
    q /= q.sum()
    if top_p is not None:
        order = np.argsort(-q)
        before = np.cumsum(q[order]) - q[order]
        keep[order[before >= top_p]] = False
    q = np.where(keep, np.exp(z - z.max()), 0)
    return q / q.sum()


@pytest.mark.parametrize("temperature, top_k, top_p", [(0.8, 40, 0.95), (1.5, None, 0.5), (0.5, 3, None),
                                                       (0.0, None, None), (1.0, None, None)])
def test_the_sampling_experiment_draws_from_the_settings_given(lm, ids, temperature, top_k, top_p):
    """The tour's live sampling controls: the distribution after is the sampler's at those settings."""
    model, tok = lm
    settings = GenerationConfig(temperature=temperature, top_k=top_k, top_p=top_p)
    o = LM_EXPERIMENTS["sampling"](Run(model, tok, ids, LAYER, HEAD, sampling=settings))
    logits, _ = read(model, ids, [])
    z = logits[-1].double().numpy()
    expected, own = sampled_by_hand(z, temperature, top_k, top_p), sampled_by_hand(z, 1, None, None)
    top = np.argsort(-expected)[:5]
    drawable = top[expected[top] > 0]  # past them the order of the zeros is arbitrary
    assert [t for t, _ in o.after[:len(drawable)]] == [token_label(tok, int(i)) for i in drawable]
    assert [p for _, p in o.after] == pytest.approx(expected[top].tolist(), abs=1e-4)
    assert [p for _, p in o.before] == pytest.approx(np.sort(own)[::-1][:5].tolist(), abs=1e-4)
    kept = int((expected > 0).sum())
    assert o.measures["entropy"][1] == pytest.approx(float(-(expected[expected > 0] * np.log(
        expected[expected > 0])).sum()), abs=1e-4)
    assert f"{kept:,} token{'s' if kept != 1 else ''} can still be drawn" in o.verdict
    if top_k is not None:  # the tokens the top-k mask removes, counted by hand
        assert f"top-k removes {len(z) - top_k:,} tokens" in o.verdict
    assert (o.before == o.after) == (temperature == 1 and top_k is None and top_p is None)


# -- the classifier -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def readers():
    return Reader.from_pretrained(ROOT / "sentiment"), Reader.from_pretrained(ROOT / "sentiment-backward")


@pytest.fixture(scope="module")
def review(readers):
    return torch.tensor([read_review(REVIEW, readers[0].tokenizer, readers[0].reading).ids])


@pytest.fixture(scope="module")
def verdicts(readers, review):
    return {step: classifier_experiment(step, readers[0], review, 1, 0, backward=readers[1])
            for step in CLASSIFIER_EXPERIMENTS}


def test_at_least_six_sentiment_steps_and_their_probabilities(verdicts, readers, review):
    moved = [step for step, o in verdicts.items() if o.before != o.after]
    assert len(moved) >= 6
    expected = readers[0].read(review)[0].exp()
    for step, o in verdicts.items():
        if step != "padding_mask":  # its "before" reads the review padded, with the mask (to 1e-3 of alone)
            assert list(o.before.values()) == pytest.approx(expected.tolist(), abs=1e-4)
        assert sum(o.after.values()) == pytest.approx(1, abs=1e-3)


def test_blocked_cross_attention_gives_that_token_no_weight(readers, review, verdicts):
    reader = readers[0]
    blocked = int(verdicts["cross"].change.split("(position ")[1].split(")")[0]) - 1
    names = [attention_point("cross", i, "weights") for i in range(reader.config.n_decoder_layer)]
    patch = {attention_point("cross", i, "mask"): lambda m: m & (torch.arange(review.size(1)) != blocked)
             for i in range(reader.config.n_decoder_layer)}
    with torch.inference_mode(), reader.model.hooks(read=names, patch=patch) as seen:
        after = reader.read(review)[0].exp()
    assert all((w[..., blocked] == 0).all() for w in seen.values())
    assert list(verdicts["cross"].after.values()) == pytest.approx(after.tolist(), abs=1e-4)


def test_the_end_token_sentence_matches_its_measured_effect(verdicts):
    o = verdicts["memory"]
    (was, now), = o.measures.values()
    assert ("barely moves" in o.verdict) == (abs(now - was) < 0.02)


def test_reading_order_is_the_backward_readers_own_verdict(verdicts, readers, review):
    assert list(verdicts["source_tokens"].after.values()) == pytest.approx(readers[1].read(review)[0].exp().tolist(),
                                                                            abs=1e-4)


def test_the_label_step_compares_the_fitted_temperature_with_one(verdicts, readers, review):
    reader = readers[0]
    with torch.inference_mode():
        scores = reader.model.candidate_scores(reader.encode(review)[0], reader.candidates)[0]
    assert list(verdicts["label"].after.values()) == pytest.approx(scores.softmax(-1).tolist(), abs=1e-4)


def test_unscaled_encoder_scores_lower_the_entropy(verdicts):
    before, after = verdicts["scaling"].measures["entropy"]
    assert after < before


def test_the_padding_mask_keeps_padding_out_of_the_verdict(verdicts, readers, review):
    o = verdicts["padding_mask"]
    alone = readers[0].read(review)[0].exp().tolist()
    assert list(o.before.values()) == pytest.approx(alone, abs=1e-3) and o.before != o.after


def test_without_a_backward_reader_the_reading_order_experiment_is_unavailable(readers, review):
    with pytest.raises(Unavailable, match="backward"):
        classifier_experiment("source_tokens", readers[0], review)


def test_entropy_of_one_hot_and_uniform_rows():
    assert entropy(torch.eye(3)) == 0 and entropy(torch.full((2, 4), 0.25)) == pytest.approx(math.log(4))
