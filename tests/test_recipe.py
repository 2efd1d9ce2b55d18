"""Fine-tuning options: each checked for exactly what it does."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from datasets import Dataset

from classifier import Reading
from model import EncoderDecoder, EncoderDecoderConfig
from tokenization import BPETokenizer, source_ids
from training import evidence
from training.bucketing import BucketSampler
from training.data import PairSet
from training.errors import UsageError
from training.recipe import (
    Recipe,
    ShortExamples,
    apply_unfreezing,
    average_state_dicts,
    layer_depth,
    param_groups,
    shout,
    smoothed_loss,
    training_loss,
)
from training.schedules import lr_at, stlr, wsd_decay_start
from training.tasks import TASKS, TaskOptions
from training.training_args import TrainConfig


def tiny(seed: int = 0) -> EncoderDecoder:
    torch.manual_seed(seed)
    return EncoderDecoder(EncoderDecoderConfig(vocab_size=40, n_encoder_layer=2, n_decoder_layer=1, n_head=2,
                                               d_model=16, d_ff=32, max_src_len=16, max_tgt_len=8, dropout=0.0,
                                               norm_first=True))


def batch() -> dict:
    g = torch.Generator().manual_seed(0)
    src_mask = torch.ones(3, 10, dtype=torch.long)
    src_mask[1, 7:] = 0
    targets = torch.randint(4, 40, (3, 3), generator=g)
    targets[2, 2] = -100
    return {"src_ids": torch.randint(4, 40, (3, 10), generator=g), "src_mask": src_mask,
            "tgt_ids": torch.randint(4, 40, (3, 3), generator=g), "targets": targets}


def test_layer_wise_lr_scales_and_weight_decay():
    model = tiny()
    groups = param_groups(model, weight_decay=0.1, layer_decay=0.5)
    scale = {id(p): g["lr_scale"] for g in groups for p in g["params"]}
    decay = {id(p): g["weight_decay"] for g in groups for p in g["params"]}
    expected = {"decoder": 1.0, "encoder.norm": 1.0, "encoder.layers.1": 0.5, "encoder.layers.0": 0.25, "embed": 0.125}
    for name, p in model.named_parameters():
        assert scale[id(p)] == next(v for k, v in expected.items() if name.startswith(k)), name
        assert decay[id(p)] == (0.1 if p.dim() >= 2 else 0.0), name
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    assert layer_depth("encoder.layers.11.ffn.w", 12) == 1 and layer_depth("decoder.layers.0.x", 12) == 0


def test_gradual_unfreezing_leaves_frozen_parameters_without_gradient():
    model = tiny()
    top = ("decoder", "encoder.norm")
    for step, trainable_prefixes in [(0, top), (19, (*top, "encoder.layers.1")), (20, (*top, "encoder.layers")),
                                     (30, ("",))]:
        model.zero_grad(set_to_none=True)
        apply_unfreezing(model, step, every=10)
        model(**batch()).loss.backward()
        for name, p in model.named_parameters():
            assert (p.grad is not None) == name.startswith(trainable_prefixes), (step, name)
    assert apply_unfreezing(model, 0, every=0) == 4  # off: everything trains


def test_smoothed_loss_by_hand():
    logits, targets = torch.randn(2, 3, 7), torch.tensor([[1, 2, -100], [0, 6, 3]])
    smoothing = 0.2
    log_p = logits.log_softmax(-1)
    terms = [(1 - smoothing) * -log_p[b, t, targets[b, t]] + smoothing * -log_p[b, t].mean()
             for b in range(2) for t in range(3) if targets[b, t] != -100]
    assert smoothed_loss(logits, targets, smoothing).item() == pytest.approx(torch.stack(terms).mean().item(), rel=1e-6)
    model = tiny()
    # the training loss (the fused `linear_cross_entropy`) is the lesson's `F.cross_entropy`, to float32 rounding
    expected = model(**batch()).loss.item()
    assert training_loss(model, model, batch(), Recipe()).item() == pytest.approx(expected, rel=1e-6)


def test_adversarial_perturbation_is_the_normalised_gradient_of_the_given_size():
    model, b = tiny(), batch()
    eps = 0.5
    total = training_loss(model, model, b, Recipe(adversarial_eps=eps))
    embeds = model.embed(b["src_ids"]).detach().requires_grad_()

    def loss_at(e):
        memory, _ = model.encode(None, b["src_mask"], inputs_embeds=e)
        logits = model.decode(b["tgt_ids"], memory, b["src_mask"])[0]
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), b["targets"].flatten(), ignore_index=-100)

    clean = loss_at(embeds)
    clean.backward()
    g = embeds.grad * b["src_mask"][..., None]  # only the review's real tokens move
    r = torch.stack([eps * g[i] / g[i].norm() for i in range(3)])
    assert total.item() == pytest.approx((clean + loss_at(embeds + r)).item(), rel=1e-5)
    # the normalised gradient rises more than random directions of the same size
    noise = torch.randn(20, *g.shape) * b["src_mask"][..., None]
    random_rises = [loss_at(embeds + eps * n / n.flatten(1).norm(dim=1)[:, None, None]) for n in noise]
    assert (total - clean).item() > max(random_rises).item() > clean.item()
    model.zero_grad()
    total.backward()
    assert model.embed.lut.weight.grad is not None


def test_averaged_weights_are_the_mean():
    states = [tiny(seed).state_dict() for seed in range(3)]
    averaged = average_state_dicts(states)
    for name in states[0]:
        torch.testing.assert_close(averaged[name], (states[0][name] + states[1][name] + states[2][name]) / 3)


@pytest.fixture(scope="module")
def tokenizer():
    return BPETokenizer.train(["Good film. Bad plot! Great acting? The end."] * 20, vocab_size=300)


def test_short_crops_are_one_to_three_contiguous_sentences(tokenizer):
    review = "One two three. Four five! Six seven eight? Nine ten eleven. Twelve."
    parts = ["One two three.", "Four five!", "Six seven eight?", "Nine ten eleven.", "Twelve."]
    crops = ShortExamples([review], tokenizer, max_len=64, crop_prob=0.5)
    rng = np.random.default_rng(0)
    seen = {crops.crop(0, rng) for _ in range(300)}
    allowed = {" ".join(parts[s : s + k]) for k in (1, 2, 3) for s in range(len(parts) - k + 1)}
    assert seen == allowed  # every contiguous run of one to three sentences, and nothing else


def test_crop_probability_and_encoding(tokenizer):
    texts = ["Good film. Bad plot! Great acting."] * 400
    pairs = PairSet([[7, 8, 9, 2]] * 400, [[5, 6]] * 400, [1] * 400)
    crops = ShortExamples(texts, tokenizer, max_len=12, crop_prob=0.25)
    out = crops.replace(pairs, list(range(400)), np.random.default_rng(1))
    replaced = [s for s in out.sources if s != pairs.sources[0]]
    assert 70 < len(replaced) < 130 and all(s[-1] == tokenizer.eos_id and len(s) <= 12 for s in replaced)
    assert out.targets == pairs.targets and out.labels == pairs.labels  # a crop keeps its review's label
    again = crops.replace(pairs, list(range(400)), np.random.default_rng(1))
    assert again.sources == out.sources  # a function of the rng
    off = ShortExamples(texts, tokenizer, 12).replace(pairs, [0, 1], np.random.default_rng(1))
    assert off.sources == pairs.sources[:2]


def test_evidence_snippets_replace_the_fraction_asked_for_with_their_own_labels(tokenizer):
    texts = ["Good film. Bad plot! Great acting."] * 2000
    pairs = PairSet([[7, 8, 9, 2]] * 2000, [[5]] * 2000, [1] * 2000)
    snippets = (["Superb acting throughout.", "A dreadful waste", "Good"], [1, 0, 1])  # none is a crop
    label_targets = [[30, 31], [32]]
    short = ShortExamples(texts, tokenizer, 64, crop_prob=0.2, evidence=snippets, evidence_prob=0.3,
                          label_targets=label_targets)
    out = short.replace(pairs, list(range(2000)), np.random.default_rng(2))
    encoded = {tuple(tokenizer.encode(t, add_eos=True)): (y, t) for t, y in zip(*snippets, strict=True)}
    from_evidence = [i for i, s in enumerate(out.sources) if tuple(s) in encoded]
    assert 0.26 < len(from_evidence) / 2000 < 0.34  # --evidence-prob 0.3
    for i in from_evidence:
        label = encoded[tuple(out.sources[i])][0]
        assert out.labels[i] == label and out.targets[i] == label_targets[label]
    assert {encoded[tuple(out.sources[i])][1] for i in from_evidence} == set(snippets[0])  # drawn from all of them
    cropped = [i for i, s in enumerate(out.sources) if s != pairs.sources[i] and i not in from_evidence]
    assert 0.16 < len(cropped) / 2000 < 0.24 and all(out.labels[i] == 1 for i in cropped)  # --crop-prob 0.2
    # the crops drawn are those of crops alone: evidence draws come after them
    alone = ShortExamples(texts, tokenizer, 64, crop_prob=0.2).replace(pairs, list(range(2000)),
                                                                       np.random.default_rng(2))
    assert [out.sources[i] for i in cropped] == [s for s in alone.sources if s != pairs.sources[0]]


def test_recipe_rejects_bad_options():
    with pytest.raises(ValueError, match="layer-decay"):
        Recipe(layer_decay=0)
    for bad in (dict(evidence_prob=0.5), dict(evidence=("e.jsonl",)),
                dict(crop_prob=0.6, evidence_prob=0.5, evidence=("e.jsonl",))):
        with pytest.raises(ValueError, match="--evidence-prob must be in"):
            Recipe(**bad)
    with pytest.raises(ValueError, match="schedule"):
        Recipe(schedule="one-cycle")


def test_slanted_triangular_schedule_by_hand():
    """ULMFiT's eq. 3 with cut 10 of 100 steps and ratio 32: lr/32 at the start and the end, the
    peak at the cut, straight lines between (the trainer takes the cut from --warmup-steps)."""
    peak = 0.01
    assert stlr(0, peak, 10, 100) == pytest.approx(peak / 32)
    assert stlr(5, peak, 10, 100) == pytest.approx(peak * (1 + 0.5 * 31) / 32)
    assert stlr(10, peak, 10, 100) == pytest.approx(peak)
    assert stlr(55, peak, 10, 100) == pytest.approx(peak * (1 + 0.5 * 31) / 32)
    assert stlr(100, peak, 10, 100) == pytest.approx(peak / 32)
    cfg = TrainConfig(lr=peak, warmup_steps=10, max_steps=100, recipe=Recipe(schedule="stlr"))
    assert [lr_at(s, cfg) for s in (0, 10, 100)] == pytest.approx([peak / 32, peak, peak / 32])


def test_warmup_stable_decay_schedule_by_hand():
    """wsd with warmup 10 of 100 steps, the last 20% decaying in the (1 - sqrt) shape to a floor of 0.1:
    the cosine schedule's warmup, the peak from step 9 to step 80, then peak x (0.1 + 0.9 (1 - sqrt(p)))."""
    peak = 0.01
    cfg = TrainConfig(lr=peak, warmup_steps=10, max_steps=100, min_lr_ratio=0.1, recipe=Recipe(schedule="wsd"))
    assert wsd_decay_start(10, 100, 0.2) == 80
    assert lr_at(0, cfg) == pytest.approx(peak / 10) and lr_at(4, cfg) == pytest.approx(peak * 5 / 10)
    assert [lr_at(s, cfg) for s in (9, 10, 50, 79, 80)] == pytest.approx([peak] * 5)
    assert lr_at(85, cfg) == pytest.approx(peak * (0.1 + 0.9 * (1 - math.sqrt(5 / 20))))  # 0.0055
    assert lr_at(95, cfg) == pytest.approx(peak * (0.1 + 0.9 * (1 - math.sqrt(15 / 20))))
    assert lr_at(100, cfg) == pytest.approx(peak * 0.1)
    assert lr_at(20, replace(cfg, warmup_steps=0)) == peak
    half = replace(cfg, recipe=Recipe(schedule="wsd", decay_fraction=0.5))
    assert lr_at(49, half) == peak and lr_at(75, half) == pytest.approx(peak * (0.1 + 0.9 * (1 - math.sqrt(0.5))))
    # the decay is at least one step, never inside the warmup
    assert wsd_decay_start(10, 100, 0.001) == 99 and wsd_decay_start(50, 60, 0.2) == 50
    # until the decay starts the rate does not depend on where the run ends (what lets a run re-fit its end)
    for total in (100, 101, 137, 500):
        assert [lr_at(s, replace(cfg, max_steps=total)) for s in range(80)] == [lr_at(s, cfg) for s in range(80)]
    with pytest.raises(ValueError, match="decay-fraction"):
        Recipe(schedule="wsd", decay_fraction=0)


def test_sentiment_batches_with_buckets_crops_and_evidence_are_a_pure_function_of_the_step(tokenizer, tmp_path):
    """What makes --resume bit-exact: a fresh task (as after a restart) draws the same batch at a step."""
    texts = [f"Good film number {i}. Bad plot! " + "Great acting here. " * (i % 7) for i in range(120)]
    splits = {"train": Dataset.from_dict({"text": texts, "label": [i % 2 for i in range(120)]})}
    cache = tmp_path / "evidence.jsonl"  # a training.evidence cache of the same held-out rows
    cache.write_text(json.dumps({"format": evidence.FORMAT, "val_size": 20, "seed": 3}) + "\n" + json.dumps(
        {"review": 0, "label": 0, "snippets": [{"text": "Dull.", "kind": "sentence", "score": 0.5}]}) + "\n")
    cfg = TrainConfig(batch_size=8, max_tokens=256, recipe=Recipe(crop_prob=0.3, evidence_prob=0.3,
                                                                  evidence=(str(cache),)))
    overrides = dict(n_encoder_layer=1, n_decoder_layer=1, n_head=2, d_model=16, d_ff=32, max_src_len=64, max_tgt_len=8)

    def prepared():
        task = TASKS["sentiment"](splits, TaskOptions(val_size=20, seed=3))
        return task, task.prepare(tokenizer, overrides, cfg)

    (task_a, data_a), (task_b, data_b) = prepared(), prepared()
    for step in (0, 7, 31):
        a, b = task_a.batch(data_a, step), task_b.batch(data_b, step)
        assert all(torch.equal(a[k], b[k]) for k in a)
        assert a["src_ids"].numel() <= 256
    sampler = BucketSampler([len(s) + len(t) + 1 for s, t in zip(data_a.splits["train"].sources,
                                                                   data_a.splits["train"].targets, strict=True)],
                            256, seed=cfg.seed)
    assert sorted(i for b in sampler.epoch(0) for i in b) == list(range(100))  # train = 120 - 20 held out
    sources, replaced = data_a.splits["train"].sources, []
    for step, indices in enumerate(sampler.epoch(0)):  # the task's batches are the sampler's, some cropped
        batch = task_a.batch(data_a, step)
        rows = [row[mask.bool()].tolist() for row, mask in zip(batch["src_ids"], batch["src_mask"], strict=True)]
        assert len(rows) == len(indices)
        replaced += [row != sources[i] for row, i in zip(rows, indices, strict=True)]
    assert 0.45 < sum(replaced) / len(replaced) < 0.75  # 0.3 + 0.3 (a crop of all sentences is the review)


def test_sentence_copies_add_each_training_reviews_first_and_last_sentence_with_its_label(tokenizer):
    """--sentence-copies N: the training split gains, N times over, each training review's first and last
    sentence of four words or more (`tokenization.sentences`: one row for a one-sentence review, none
    for a review without one), labelled as its review; the validation rows stay as they were."""
    texts = ["I loved it so. The plot drags a bit. A joy to watch!", "Awful, it was truly awful.", "So bad."] * 10
    splits = {"train": Dataset.from_dict({"text": texts, "label": [1, 0, 0] * 10})}
    overrides = dict(n_encoder_layer=1, n_decoder_layer=1, n_head=2, d_model=16, d_ff=32, max_src_len=64, max_tgt_len=8)
    task = TASKS["sentiment"](splits, TaskOptions(val_size=6, seed=3))
    plain = task.prepare(tokenizer, overrides, TrainConfig(batch_size=8))
    data = task.prepare(tokenizer, overrides, TrainConfig(batch_size=8, recipe=Recipe(sentence_copies=2)))
    reviews = task.train_rows[0]
    rows_of = {texts[0]: ["I loved it so.", "A joy to watch!"], texts[1]: ["Awful, it was truly awful."], texts[2]: []}
    expected = [(sentence, 1 if review == texts[0] else 0) for review in reviews for sentence in rows_of[review]]
    added = data.splits["train"]
    assert len(added) == len(reviews) + 2 * len(expected) and data.description["sentence_rows"] == 2 * len(expected)
    assert added.sources[: len(reviews)] == plain.splits["train"].sources
    assert data.splits["val"].sources == plain.splits["val"].sources
    for row, (sentence, label) in enumerate(expected * 2, start=len(reviews)):  # both copies, in review order
        assert added.sources[row] == source_ids([sentence], tokenizer, Reading(data.config, data.classifier))[0]
        assert added.labels[row] == label and added.targets[row] == added.targets[reviews.index(texts[1 - label])]


def test_negative_sentence_copies_are_refused():
    with pytest.raises(UsageError, match="--sentence-copies"):
        Recipe(sentence_copies=-1)


def test_shout_writes_one_long_word_or_the_whole_text_in_capitals_or_in_title_case():
    rng, text = np.random.default_rng(0), "The acting was superb, I'd say."
    shouted = [shout(text, rng) for _ in range(600)]
    whole = [s for s in shouted if s == text.upper()]
    title = [s for s in shouted if s == "The Acting Was Superb, I'd Say."]
    one_word = [s for s in shouted if s not in (text.upper(), "The Acting Was Superb, I'd Say.")]
    for s in one_word:
        [(word, loud)] = [(a, b) for a, b in zip(text.split(), s.split(), strict=True) if a != b]
        assert loud == word.upper() and len(word.strip(".,")) >= 3
    assert all(140 < len(kind) < 260 for kind in (whole, title, one_word))  # a third each
    assert set(one_word) == {
        "THE acting was superb, I'd say.", "The ACTING was superb, I'd say.", "The acting WAS superb, I'd say.",
        "The acting was SUPERB, I'd say.", "The acting was superb, I'd SAY."}
    assert shout("Ok, so.", rng) == "OK, SO."  # no word of three letters: all of it


def test_shout_prob_shouts_that_share_of_the_crops_and_needs_crops(tokenizer):
    texts = ["The acting was superb. The plot was thin. The ending was moving."] * 200
    pairs = PairSet([[5]] * 200, [[7]] * 200, [1] * 200)
    quiet = ShortExamples(texts, tokenizer, 64, crop_prob=1.0).replace(pairs, list(range(200)),
                                                                       np.random.default_rng(3))
    loud = ShortExamples(texts, tokenizer, 64, crop_prob=1.0, shout_prob=0.5).replace(pairs, list(range(200)),
                                                                                      np.random.default_rng(3))
    decoded = [tokenizer.decode(ids) for ids in loud.sources]
    recased = sum(any(w.isupper() and len(w.strip(".")) >= 3 for w in d.split()) or "The Acting" in d
                  or "The Plot" in d or "The Ending" in d for d in decoded)
    assert 70 < recased < 130 and loud.labels == quiet.labels == [1] * 200
    with pytest.raises(UsageError, match="--shout-prob"):
        Recipe(shout_prob=0.2)
    assert Recipe(shout_prob=0.2, crop_prob=0.3).shout_prob == 0.2
