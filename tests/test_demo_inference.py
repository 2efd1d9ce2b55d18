"""Unit tests of `demo.serving.DemoService` and the views' logic it serves (and the plots) on a tiny random
checkpoint.

No server here: each tab's logic is plain Python, tested directly, including every robustness
rule (empty input, long input, any Unicode, out-of-range settings, missing/broken checkpoints).
"""

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

from demo import plots
from demo.serving import MAX_INPUT_CHARS, DemoError, DemoService, scrub_paths, serving_device, visitor_text
from demo.tiny import shared_tiny_checkpoints
from demo.views.attention import MAX_ATTENTION_TOKENS, attention_kinds, attention_shape, attention_view, served
from demo.views.chat import MAX_NEW_TOKENS, MIN_TOP_P, continue_text, generation_config, stream_continuation
from demo.views.lens import lens_view
from demo.views.sentiment import classify, explain, merge_spans, review_source
from demo.views.tokens import tokenize
from model import autocast
from storage import IN_PROGRESS_NAME
from tokenization import Piece, clean_text, read_review, review_text, token_label, visible, windows
from training.data import PairSet

UNICODE = [
    "Rated 10/10 👍🏽🎬🍿 would watch again",
    "שלום, זה היה סרט מצוין מאוד",
    "日本語の映画はとても面白かったです。",
    "control \x00 NUL \x01\x1b[31m escape \x7f and\ttab\r\nnewline",
    "zero\u200bwidth, combining e\u0301, ẞ, \U0001f9ec",
    "mathtext $x^2$ and $5 prices",
    "lone surrogate \ud800 here",
]


@pytest.fixture(scope="module")
def ckpt() -> Path:
    return shared_tiny_checkpoints()


@pytest.fixture(scope="module")
def service(ckpt: Path) -> DemoService:
    return DemoService(ckpt, device="cpu")


# -- loading ----------------------------------------------------------------------------------


def test_loads_both_checkpoints(service: DemoService, ckpt: Path) -> None:
    assert service.device == "cpu"
    assert service.lm.ready and service.sentiment.ready and service.tokenizer is not None
    for info in service.checkpoints:
        assert info.ready and info.trained and info.parameters > 0
        assert info.location == f"{ckpt.name}/{info.name}"  # relative: no absolute path shown
        assert info.metrics["steps"] == 0
    assert not service.lm.model.training and not service.sentiment.model.training


@pytest.mark.parametrize(("threads", "shown"), [(1, "CPU (1 thread)"), (2, "CPU (2 threads)")])
def test_device_description_counts_threads(service: DemoService, threads: int, shown: str) -> None:
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        assert service.device_description() == shown
    finally:
        torch.set_num_threads(before)


def test_missing_checkpoints_give_friendly_errors(tmp_path: Path) -> None:
    service = DemoService(tmp_path / "nowhere", device="cpu")
    assert [info.status for info in service.checkpoints] == ["missing", "missing"]
    assert any("No checkpoints directory" in n for n in service.notices)
    with pytest.raises(DemoError, match="language model is not available"):
        next(stream_continuation(service, "This movie was"))
    with pytest.raises(DemoError, match="sentiment model is not available"):
        classify(service, "great")
    with pytest.raises(DemoError):
        attention_view(service, "great", "lm_self")
    with pytest.raises(DemoError, match="No tokenizer"):
        tokenize(service, "great")
    assert attention_kinds(service) == []


def test_untrained_and_broken_checkpoints(ckpt: Path, tmp_path: Path) -> None:
    copy = tmp_path / "ckpts"
    shutil.copytree(ckpt, copy)
    (copy / "lm" / "metrics.json").unlink()  # untrained: loads, with a warning
    (copy / "sentiment" / "config.json").write_text("{not json", encoding="utf-8")  # broken
    service = DemoService(copy, device="cpu")
    assert service.lm.ready and not service.lm.trained
    assert "untrained" in service.lm.message
    assert service.sentiment.status == "error"
    assert "not valid JSON" in service.sentiment.message
    assert str(tmp_path) not in service.sentiment.message  # no absolute path in the UI
    assert service.sentiment.model is None and attention_kinds(service) == [("LM self-attention (masked)", "lm_self")]


def test_a_checkpoint_still_being_trained_is_refused(ckpt: Path, tmp_path: Path) -> None:
    copy = tmp_path / "ckpts"
    shutil.copytree(ckpt, copy)
    (copy / "lm" / IN_PROGRESS_NAME).write_text("")
    service = DemoService(copy, device="cpu")
    assert service.lm.status == "error" and service.lm.model is None and service.sentiment.ready
    assert "still being written by a training run" in service.lm.message and str(tmp_path) not in service.lm.message
    with pytest.raises(DemoError, match="language model is not available: `ckpts/lm/` is still being written"):
        continue_text(service, "This movie was")


def test_tokenizer_model_mismatch_is_reported(ckpt: Path, tmp_path: Path) -> None:
    copy = tmp_path / "ckpts"
    shutil.copytree(ckpt, copy)
    config = json.loads((copy / "lm" / "config.json").read_text())
    config["vocab_size"] = 100
    (copy / "lm" / "config.json").write_text(json.dumps(config))
    service = DemoService(copy, device="cpu")
    assert service.lm.status == "error"  # shape mismatch in the weights, or tokenizer too big
    assert service.sentiment.ready


def test_serving_device() -> None:
    assert serving_device("cpu") == ("cpu", None)
    assert serving_device("auto")[0] == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        device, notice = serving_device("cuda")
        assert device == "cpu" and "not available" in notice
    with pytest.raises(ValueError):
        serving_device("tpu")


# -- helpers ----------------------------------------------------------------------------------


def test_clean_text() -> None:
    assert visitor_text(None) == ("", [])
    assert visitor_text(42) == ("42", [])
    text, notices = visitor_text("a\ud800b")
    assert text == "a?b" and notices
    text, notices = visitor_text("x" * (MAX_INPUT_CHARS + 5))
    assert len(text) == MAX_INPUT_CHARS and "cut" in notices[0]


def test_model_text_matches_training_cleaning() -> None:
    assert clean_text("  Great.<br /><br />Loved it<BR>really<br/>  ") == "Great.\n\nLoved it\nreally"


def test_scrub_paths() -> None:
    assert scrub_paths("--data-dir /home/me/data/imdb --x 1") == "--data-dir …/imdb --x 1"
    for kept in ("../shared/data/imdb", "checkpoints/lm", "https://huggingface.co/a/b", "/etc"):
        assert scrub_paths(kept) == kept


def test_inputs_are_cleaned_like_the_training_data(service: DemoService) -> None:
    result = classify(service, "  Great film.<br /><br />Loved it.  ")
    assert "".join(s for s, _ in result.highlights) == "Great film.\n\nLoved it."
    a = continue_text(service, "This movie was <br />", max_new_tokens=3, temperature=0)
    b = continue_text(service, "This movie was", max_new_tokens=3, temperature=0)
    assert a.text == b.text


def test_visible_shows_control_characters() -> None:
    assert visible("a\x00b\n\t\x7f") == "a␀b↵⇥␡"
    assert visible(" the", show_spaces=True) == "␣the"


def test_token_label_shows_partial_characters_as_bytes(service: DemoService) -> None:
    tok = service.tokenizer
    ids = tok.encode("🧬")  # not in the tiny corpus: split into single bytes
    labels = [token_label(tok, i) for i in ids]
    assert "".join(labels) == "⟨f0⟩⟨9f⟩⟨a7⟩⟨ac⟩"
    assert token_label(tok, 10**6) == f"<{10**6}>"


def test_merge_spans_tiles_text_with_split_characters() -> None:
    text = "a 日本"
    pieces = [Piece(1, "a", 0, 1), Piece(2, " ", 1, 2), Piece(3, "\ufffd", 2, 3), Piece(4, "\ufffd", 2, 4),
              Piece(5, "\ufffd", 3, 4)]
    merged = merge_spans(text, pieces, [0.1, 0.2, 0.3, 0.1, 0.1])
    assert [s for s, _ in merged] == ["a", " ", "日本"]
    assert merged[2][1] == pytest.approx(0.5)


def test_merge_spans_leaves_skipped_and_cut_text_unscored() -> None:
    text = "good film, dull middle, great end!"
    pieces = [Piece(1, "good", 0, 4), Piece(2, " film", 4, 9), Piece(3, " great", 23, 29)]
    merged = merge_spans(text, pieces, [0.5, 0.25, 1.0])
    assert merged == [("good", 0.5), (" film", 0.25), (", dull middle,", None), (" great", 1.0), (" end!", None)]


# -- chat -------------------------------------------------------------------------------------


def vocab_and_eos(service: DemoService) -> tuple[int, int]:
    """What `generation_config` reads of the served LM."""
    config = service.lm.model.config
    return config.vocab_size, config.eos_token_id


@pytest.mark.parametrize(("settings", "expected", "notice"), [
    ({"temperature": 0}, {"temperature": 0.0}, "greedy"),
    ({"temperature": -3}, {"temperature": 0.0}, "greedy"),
    ({"temperature": 99}, {"temperature": 5.0}, "capped"),
    ({"top_k": 10**6}, {"top_k": None}, "exceeds the vocabulary"),
    ({"top_k": -5}, {"top_k": None}, "top-k is off"),
    ({"top_k": 0}, {"top_k": None}, None),
    ({"top_k": 7.6}, {"top_k": 8}, None),
    ({"top_p": 0}, {"top_p": MIN_TOP_P}, "above 0"),
    ({"top_p": -1}, {"top_p": MIN_TOP_P}, "above 0"),
    ({"top_p": 1.5}, {"top_p": None}, "top-p is off"),
    ({"top_p": 0.9}, {"top_p": 0.9}, None),
    ({"max_new_tokens": 0}, {"max_new_tokens": 1}, "at least 1"),
    ({"max_new_tokens": 10**9}, {"max_new_tokens": MAX_NEW_TOKENS}, "capped"),
    ({"temperature": "abc", "top_k": None, "top_p": float("nan")}, {"temperature": 0.8, "top_k": None,
                                                                     "top_p": None}, None),
    ({"seed": 123}, {"seed": 123}, None),
    ({"temperature": 1e-38}, {"temperature": 0.0}, "greedy"),
    ({"temperature": float("inf"), "top_p": float("-inf")}, {"temperature": 5.0, "top_p": MIN_TOP_P}, "capped"),
    ({"max_new_tokens": float("inf"), "top_k": 10**400}, {"max_new_tokens": MAX_NEW_TOKENS, "top_k": None}, "capped"),
    ({"max_new_tokens": float("-inf"), "seed": float("inf")}, {"max_new_tokens": 1}, "at least 1"),
])
def test_generation_settings_are_clamped_and_explained(service, settings, expected, notice) -> None:
    config, notices = generation_config(*vocab_and_eos(service), **settings)  # never raises
    for key, value in expected.items():
        assert getattr(config, key) == value
    if notice is None:
        assert notices == []
    else:
        assert any(notice in n for n in notices), notices


def test_random_seed_when_negative(service: DemoService) -> None:
    config, _ = generation_config(*vocab_and_eos(service), seed=-1)
    assert config.seed is not None and config.seed >= 0


def test_stream_yields_every_token_with_probabilities(service: DemoService) -> None:
    updates = list(stream_continuation(service, "This movie was", max_new_tokens=8, temperature=0.8, seed=3))
    assert updates[-1].done and not any(u.done for u in updates[:-1])
    final = updates[-1]
    assert len(final.steps) == 8 and len(updates) == 9  # one update per token, then the final one
    assert [len(u.steps) for u in updates[:-1]] == list(range(1, 9))
    for step in final.steps:
        assert 0 < step.prob <= 1
        probs = [p for _, p in step.alternatives]
        assert len(probs) == 5 and probs == sorted(probs, reverse=True)
    tok = service.lm.tokenizer
    ids = tok.encode("This movie was")
    expected = service.lm.model.generate(torch.tensor([[tok.bos_id, *ids]]), generation_config(
        *vocab_and_eos(service), max_new_tokens=8, temperature=0.8, seed=3)[0])
    assert final.text == tok.decode(expected)  # same tokens as the model's own generate()


def test_seed_makes_sampling_reproducible(service: DemoService) -> None:
    a = continue_text(service, "The plot", max_new_tokens=12, temperature=1.0, top_k=50, top_p=0.9, seed=7)
    b = continue_text(service, "The plot", max_new_tokens=12, temperature=1.0, top_k=50, top_p=0.9, seed=7)
    assert a.text == b.text and a.seed == 7


def test_greedy_picks_the_most_likely_token(service: DemoService) -> None:
    update = continue_text(service, "I loved", max_new_tokens=5, temperature=0)
    for step in update.steps:
        assert step.token == step.alternatives[0][0]


def test_long_prompt_is_truncated_with_notice(service: DemoService) -> None:
    block = service.lm.model.config.block_size
    update = continue_text(service, "word " * (3 * block), max_new_tokens=10, temperature=0)
    assert any("sees only the last" in n for n in update.notices)
    assert len(update.steps) == 10


def test_end_of_text_stops_generation(service: DemoService, monkeypatch) -> None:
    first = continue_text(service, "This movie was", max_new_tokens=1, temperature=0).steps[0]
    first_id = service.lm.tokenizer.encode(first.token)[0] if not first.token.startswith("⟨") else None
    if first_id is None:
        pytest.skip("first greedy token is a partial byte")
    monkeypatch.setattr(service.lm.model.config, "eos_token_id", first_id)
    update = continue_text(service, "This movie was", max_new_tokens=10, temperature=0)
    assert update.steps == [] and update.done
    assert any("ended the review" in n for n in update.notices)


@pytest.mark.parametrize("text", ["", "   ", "\n\t ", None])
def test_empty_input_is_a_friendly_error(service: DemoService, text) -> None:
    with pytest.raises(DemoError, match="first"):
        next(stream_continuation(service, text))
    with pytest.raises(DemoError, match="first"):
        classify(service, text)
    with pytest.raises(DemoError, match="first"):
        attention_view(service, text, "lm_self")


@pytest.mark.parametrize("text", UNICODE)
def test_any_unicode_works_everywhere(service: DemoService, text: str) -> None:
    update = continue_text(service, text, max_new_tokens=3, temperature=0)
    assert update.done and len(update.steps) <= 3  # a random model may end at once
    result = classify(service, text)
    assert sum(result.probabilities.values()) == pytest.approx(1.0, abs=1e-5)
    read = review_text(visitor_text(text)[0], service.sentiment.tokenizer)  # as the classifier reads it
    assert "".join(s for s, _ in result.highlights) == read  # segments tile the text exactly
    for kind in ("lm_self", "encoder_self", "cross", "decoder_self"):
        assert attention_view(service, text, kind).weights.size > 0
    assert tokenize(service, text).count > 0


# -- sentiment --------------------------------------------------------------------------------


def test_classify(service: DemoService) -> None:
    text = "A wonderful film. I loved the acting."  # two sentences: read as typed
    result = classify(service, text)
    assert list(result.probabilities) == ["negative", "positive"]
    assert sum(result.probabilities.values()) == pytest.approx(1.0, abs=1e-5)
    assert result.label == max(result.probabilities, key=result.probabilities.get)
    assert "".join(s for s, _ in result.highlights) == text
    weights = [w for _, w in result.highlights]
    assert max(weights) == 1.0 and min(weights) >= 0.0
    assert result.notices == []


def test_the_deletion_test_measures_the_method_against_as_many_random_tokens(service: DemoService) -> None:
    from demo.views.sentiment import DELETION_FRACTIONS
    from inspection import top_count

    text = "A wonderful, moving film with a clever story. Loved it, and I will watch it again!"
    result = explain(service, text, "occlusion")
    assert [(f, c) for f, c, _, _ in result.deletion] == [(f, top_count(f, result.tokens)) for f in DELETION_FRACTIONS]
    assert all(0 <= p <= 1 and 0 <= q <= 1 for *_, p, q in result.deletion)
    floor = explain(service, text, "random")  # random against random: the same tokens, the same probabilities
    assert all(p == q for *_, p, q in floor.deletion)


def test_classify_matches_candidate_scores(service: DemoService, served_atol) -> None:
    tok, model = service.sentiment.tokenizer, service.sentiment.model
    text = "Terrible, boring film."
    src = torch.tensor([tok.encode(text, add_eos=True)])
    with autocast(service.device, service.precision):  # like with like: the service's own precision
        labels = service.sentiment.classifier.labels
        scores = model.candidate_scores(model.encode(src)[0], [tok.encode(label) for label in labels])[0]
    expected = (scores / service.sentiment.classifier.temperature).softmax(-1)[0].tolist()
    assert list(classify(service, text).probabilities.values()) == pytest.approx(expected, abs=served_atol(service))


def window_verdict(service: DemoService, text: str) -> list[float]:
    """P(label) of the forward reader alone, computed here: each window of the encoded text through the
    model, the scores averaged, then the temperature (the app's verdict, one reader served)."""
    model, tok, settings = service.sentiment.model, service.sentiment.tokenizer, service.sentiment.classifier
    candidates = [tok.encode(label) for label in settings.labels]
    with autocast(service.device, service.precision):  # like with like: the service's own precision
        scores = torch.cat([model.candidate_scores(model.encode(torch.tensor([[*w, tok.eos_id]]))[0], candidates)[0]
                            for w in windows(tok.encode(text), service.sentiment.reading)])
    return (scores.float().mean(0) / settings.temperature).softmax(-1).tolist()


def test_long_review_is_read_whole_in_windows_with_notice(service: DemoService, served_atol) -> None:
    text = ("great acting and a boring plot. " * 100).strip()
    result = classify(service, text)
    n_windows = len(windows(service.sentiment.tokenizer.encode(text), service.sentiment.reading))
    assert n_windows > 1 and any(f"It reads all of it, in {n_windows} windows" in n for n in result.notices)
    assert "".join(s for s, _ in result.highlights) == text
    assert result.highlights[-1][1] is None  # the highlight is the first window's: the rest unhighlighted
    assert list(result.probabilities.values()) == pytest.approx(window_verdict(service, text),
                                                                abs=served_atol(service))


def test_head_and_tail_truncation_reads_what_training_read(service: DemoService, monkeypatch, served_atol) -> None:
    model, tok, settings = service.sentiment.model, service.sentiment.tokenizer, service.sentiment.classifier
    monkeypatch.setattr(settings, "src_keep_tail", 8)
    text = "great acting and a boring plot. " * 30 + "In the end I loved it."
    result = classify(service, text)
    assert any(f"the first {model.config.max_src_len - 9:,} and the last 8 tokens" in n for n in result.notices)
    assert "".join(s for s, _ in result.highlights) == text
    scored = [w is not None for _, w in result.highlights]
    assert scored[-1] and scored.count(False) == 1  # one unread middle in the first window; the ending is read
    src = PairSet.from_texts([text], [settings.labels[0]], tok, model.config, classifier=settings).sources[0]
    assert src[-9:] == [*tok.encode(text)[-8:], tok.eos_id]
    assert list(result.probabilities.values()) == pytest.approx(window_verdict(service, text),
                                                                abs=served_atol(service))



@pytest.mark.parametrize("tail", [0, 8])
@pytest.mark.parametrize("repeats", [1, 60])  # a short review, and one over the model's limit
def test_training_and_serving_read_a_review_alike(service: DemoService, monkeypatch, tail: int, repeats: int) -> None:
    """The data path (PairSet: `source_ids`), the app's read path and the benchmarks' (`read_review`)
    cut a review into the same ids: the head and the last `src_keep_tail` tokens of encode(text), then
    eos (checked by slicing)."""
    model, tok, settings = service.sentiment.model, service.sentiment.tokenizer, service.sentiment.classifier
    monkeypatch.setattr(settings, "src_keep_tail", tail)
    text = " ".join(["A slow start, but great acting."] * repeats + ["In the end I loved it."])
    every, limit = tok.encode(text), model.config.max_src_len
    expected = every if len(every) < limit else every[: limit - 1 - tail] + every[len(every) - tail :]
    assert (len(every) >= limit) == (repeats > 1)
    trained = PairSet.from_texts([text], [settings.labels[0]], tok, model.config, classifier=settings).sources[0]
    served = review_source(service.sentiment, text)
    benchmarked = read_review(text, tok, service.sentiment.reading)
    assert trained == served.ids[0].tolist() == benchmarked.ids == [*expected, tok.eos_id]
    assert [p.id for p in served.pieces] == expected


# -- attention --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["lm_self", "encoder_self", "cross", "decoder_self"])
def test_attention_shapes(service: DemoService, kind: str) -> None:
    result = attention_view(service, "The movie was not bad at all.", kind, layer=1)
    n_heads = attention_shape(served(service, kind), kind)[1]
    assert result.weights.shape == (n_heads, len(result.query_tokens), len(result.key_tokens))
    assert result.layer == 1 and result.n_heads == n_heads
    np.testing.assert_allclose(result.weights.sum(-1), 1.0, atol=1e-5)
    if kind == "lm_self":
        assert result.query_tokens[0] == "<s>" and result.causal
        assert np.all(np.triu(result.weights, k=1) == 0)  # nothing attends to the future
    if kind in ("cross", "decoder_self"):
        assert result.query_tokens[0] == "<s>"
        rows = result.query_tokens[1:]  # the label the decoder reads: one row per piece, marked inside the word
        assert len({row.replace("[", "").replace("]", "") for row in rows} - {"negative", "positive"}) == 0
        assert len(rows) == 1 or all(row.count("[") == 1 for row in rows)
        assert any("which is" in n and "tokens to it" in n for n in result.notices) or len(rows) == 1
    if kind in ("encoder_self", "cross"):
        assert result.key_tokens[-1] == "</s>"


def test_attention_clamps_layer_and_rejects_unknown_kind(service: DemoService) -> None:
    result = attention_view(service, "good film", "lm_self", layer=99)
    assert result.layer == result.n_layers - 1 and any("does not exist" in n for n in result.notices)
    assert attention_view(service, "good film", "lm_self", layer="nonsense").layer == 0
    assert attention_view(service, "good film", "lm_self", layer=float("inf")).layer == result.n_layers - 1
    assert attention_view(service, "good film", "lm_self", layer=-(10**400)).layer == 0
    with pytest.raises(DemoError, match="Unknown attention kind"):
        attention_view(service, "good film", "no_such_kind")


def test_attention_caps_long_text(service: DemoService) -> None:
    result = attention_view(service, "word " * 500, "lm_self")
    assert len(result.query_tokens) == MAX_ATTENTION_TOKENS
    assert any("shows the first" in n for n in result.notices)
    result = attention_view(service, "word " * 500, "encoder_self")
    assert len(result.key_tokens) <= MAX_ATTENTION_TOKENS and result.notices


def test_heatmap_masks_the_causal_triangle_and_hovers_tokens_and_weights(service: DemoService) -> None:
    result = attention_view(service, "The $5 movie, 日本 👍", "lm_self")
    trace = plots.heatmap(result, head=plots.MEAN).data[0]
    n = len(result.query_tokens)
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    assert np.array_equal(np.isnan(np.asarray(trace.z, dtype=float)), upper)  # blank above the diagonal
    mean = result.weights.mean(0)
    np.testing.assert_allclose(np.asarray(trace.z, dtype=float)[~upper], np.sqrt(mean[~upper]), rtol=1e-6)
    custom = np.asarray(trace.customdata, dtype=object)
    assert custom[3, 1].tolist()[:2] == [result.query_tokens[3], result.key_tokens[1]]
    assert custom[3, 1, 2] == pytest.approx(mean[3, 1])  # the hover shows the weight, not its square root
    assert "query: %{customdata[0]}" in trace.hovertemplate and "key: %{customdata[1]}" in trace.hovertemplate


def test_overview_draws_every_layer_and_head_with_labels(service: DemoService) -> None:
    result = attention_view(service, "good film, bad ending", "encoder_self", layer=1)
    pictures = plots.overview(result)
    n_layers, n_heads, t_q, t_k = result.all_weights.shape
    assert [c for _, c in pictures] == [f"layer {i + 1} · head {h + 1}" for i in range(n_layers)
                                        for h in range(n_heads)]
    image = np.asarray(pictures[n_heads + 1][0])  # layer 2, head 2
    width, height = pictures[0][0].size
    assert width > plots.CELL * t_k and height > plots.CELL * t_q  # room for the token labels
    # the cells: every picture on the heatmap's scale, the square root of the weight from 0 to 1
    left, top = width - plots.MARGIN - plots.CELL * t_k, height - plots.MARGIN - plots.CELL * t_q
    for layer, h, q, k in [np.unravel_index(result.all_weights.argmax(), result.all_weights.shape), (1, 1, 0, 2)]:
        y, x = top + q * plots.CELL + plots.CELL // 2, left + k * plots.CELL + plots.CELL // 2
        level = int(round(np.sqrt(result.all_weights[layer, h, q, k]) * 255))
        assert tuple(np.asarray(pictures[layer * n_heads + h][0])[y, x]) == tuple(plots._palette()[level])
    assert image.shape == (height, width, 3)


def test_the_heatmap_keeps_one_colour_scale(service: DemoService) -> None:
    for head in (plots.MEAN, 0):  # a head's map and the mean's: the same scale, weight 0 to 1
        trace = plots.heatmap(attention_view(service, "good film", "lm_self"), head).data[0]
        assert (trace.zmin, trace.zmax) == (0.0, 1.0)


def test_select_head(service: DemoService) -> None:
    result = attention_view(service, "good film", "encoder_self")
    mean, title = plots.select_head(result, plots.MEAN)
    np.testing.assert_allclose(mean, result.weights.mean(0))
    assert "mean" in title
    one, title = plots.select_head(result, 1)
    np.testing.assert_allclose(one, result.weights[1])
    assert plots.select_head(result, 99)[1].startswith("mean")  # out of range: mean, no error
    assert plots.select_head(result, None)[1].startswith("mean")


# -- tokenizer --------------------------------------------------------------------------------


def test_tokenize(service: DemoService) -> None:
    text = "Tokenization isn't magic!"
    result = tokenize(service, text)
    assert [i for _, i in result.pieces] == service.tokenizer.encode(text)
    assert "".join(t for t, _ in result.pieces) == text
    assert result.count == len(result.pieces) and result.characters == len(text)


def test_tokenize_caps_displayed_pieces(service: DemoService) -> None:
    result = tokenize(service, "x y " * 3000)
    assert result.count > len(result.pieces) and result.notices


# -- concurrency ------------------------------------------------------------------------------


def test_concurrent_requests_give_the_same_answers(service: DemoService) -> None:
    texts = [f"review number {i}: great film" for i in range(4)]
    expected = [continue_text(service, t, max_new_tokens=6, temperature=1.0, seed=i).text for i, t in enumerate(texts)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda it: continue_text(service, it[1], max_new_tokens=6, temperature=1.0,
                                                     seed=it[0]).text, enumerate(texts)))
        probs = list(pool.map(lambda t: classify(service, t).probabilities, texts))
    assert got == expected
    assert probs == [classify(service, t).probabilities for t in texts]


# -- logit lens -------------------------------------------------------------------------------


def test_logit_lens_of_a_continuation(service: DemoService, served_atol) -> None:
    update = continue_text(service, "This movie was", max_new_tokens=6, temperature=0)
    view = lens_view(service, update.token_ids, len(update.steps))
    n_layers = service.lm.model.config.n_layer
    assert view.layers == ["embeddings"] + [f"block {i + 1}" for i in range(n_layers)]
    assert view.tokens == [visible(s.token, show_spaces=True) for s in update.steps]
    assert view.top_probs.shape == (n_layers + 1, len(update.steps), 5)
    # the last row is the model's own prediction: greedy picked its top token, with the same probability
    # (generation runs in float32, the lens in the service's precision)
    assert [row[0] for row in view.top_tokens[-1]] == view.tokens
    atol = served_atol(service)
    np.testing.assert_allclose(view.token_probs[-1], [s.prob for s in update.steps], rtol=atol, atol=atol)
    np.testing.assert_allclose(view.top_probs[-1, :, 0], [s.prob for s in update.steps], rtol=atol, atol=atol)
    with pytest.raises(DemoError, match="Generate a continuation first"):
        lens_view(service, update.token_ids, 0)


def test_logit_lens_shows_the_last_generated_tokens(service: DemoService, monkeypatch) -> None:
    from demo.views import lens

    monkeypatch.setattr(lens, "MAX_LENS_POSITIONS", 4)
    update = continue_text(service, "This movie was", max_new_tokens=10, temperature=0)
    view = lens_view(service, update.token_ids, len(update.steps))
    assert view.tokens == [visible(s.token, show_spaces=True) for s in update.steps[-4:]]
    assert any("last 4 of the 10" in n for n in view.notices)
    table = plots.lens_html(view)
    # a row a token (after the headings), a column a layer
    assert table.count("<tr>") == 1 + 4 and table.count("<td") == 4 * len(view.layers)
    assert table.count("P(“") == 4 * len(view.layers)  # each cell's hover


def test_what_visitors_paste_is_read_as_a_review_and_the_view_says_so(service: DemoService) -> None:
    result = classify(service, "@filmfan88 LOVED IT!!! https://bit.ly/3xQz9")
    assert "".join(s for s, _ in result.highlights) == " loved it."  # one line: as a sentence inside a review
    assert any("Read as reviews are written" in n for n in result.notices)
    assert not any("Read as reviews" in n for n in classify(service, "Loved it. Really.").notices)
    with pytest.raises(DemoError, match="Nothing is left to classify"):
        classify(service, "@filmfan88 😍 https://bit.ly/3xQz9")
