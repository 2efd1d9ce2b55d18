"""The pure formatting helpers of the tabs (`demo.tabs`): header, About page, token views, notices, and
each view's verdict sentence, computed from its numbers (a case where it passes and one where it fails)."""

import json
import logging
import re
import shutil
from pathlib import Path

import gradio as gr
import numpy as np
import pytest

from demo import plots
from demo.serving import INTERNAL_ERROR, Checkpoint, DemoError, DemoService, failure
from demo.tabs.ablation_panel import effect_sentence
from demo.tabs.about import about_markdown, curve_html, developers_markdown, header_markdown
from demo.tabs.attention import sink_sentence
from demo.tabs.chat import lens_summary, look_inside, message_text, token_highlights, token_table
from demo.tabs.common import notice_markdown
from demo.tabs.sentiment import (
    agreement_takeaway,
    benchmark_sentence,
    compare,
    deletion_markdown,
    deletion_verdict,
    read_benchmark_sentence,
)
from demo.tabs.tokenizer import pieces_html, tokenize
from demo.text import METHOD_CHOICES, METHOD_NAMES, code_span
from demo.tiny import shared_tiny_checkpoints
from demo.views import tokens
from demo.views.chat import ChatUpdate, TokenView, continue_text
from demo.views.lens import LensView
from inspection import METHODS


@pytest.fixture(scope="module")
def service() -> DemoService:
    return DemoService(shared_tiny_checkpoints(), device="cpu")


def test_header_says_in_words_what_each_model_does_and_leaves_the_numbers_to_about(service: DemoService) -> None:
    header = header_markdown(service)
    assert "**language model**" in header and "continues a review" in header
    assert "**sentiment model**" in header and "positive or negative" in header
    for developer_word in ("Device", "fp32", "bf16", "ppl", "val", "checkpoints", "`"):  # all under About
        assert developer_word not in header, developer_word


def test_header_warns_about_missing_checkpoints(tmp_path: Path) -> None:
    header = header_markdown(DemoService(tmp_path / "none", device="cpu"))
    assert header.count("> ⚠️") == 3  # no directory, no LM, no sentiment model
    assert "Language model:" in header and "Sentiment model:" in header
    assert str(tmp_path) not in header


def test_about_speaks_to_learners_and_keeps_the_rest_for_developers(service: DemoService) -> None:
    about, developers = about_markdown(service), developers_markdown(service)
    assert "## Language model" in about and "## Sentiment model" in about
    assert f"**Size:** {service.lm.model.num_parameters():,} parameters" in about
    assert "as unsure as a pick among 365 equally likely tokens" in about and "right on 50.0%" in about
    assert "labels negative, positive" in about and "its last" not in about  # head-only truncation
    for developer_word in ("val_ppl", "python -m", "`", "Checkpoint", "fp32"):
        assert developer_word not in about, developer_word
    assert "| val_ppl | 365 |" in developers and "| val_accuracy | 0.5 |" in developers
    assert "`python -m demo.tiny (random init)`" in developers  # the command, as code
    assert "Retrain" in developers and "python -m training.run --help" in developers
    assert "python -m benchmarks.faithfulness" in developers and f"**{service.precision}**" in developers


def test_about_says_how_much_text_a_model_read_its_ancestors_runs_included(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpts"
    shutil.copytree(shared_tiny_checkpoints(), ckpt)
    lm, reader = (ckpt / name / "metrics.json" for name in ("lm", "sentiment"))
    first = {"checkpoint": "checkpoints/lm", "weights_sha256": "0" * 64, "tokens_seen": 98_304_000}
    continued = {"checkpoint": "checkpoints/lm", "weights_sha256": "1" * 64, "tokens_seen": 40_960_000,
                 "init_from": first}
    lm.write_text(json.dumps({**json.loads(lm.read_text()), "tokens_seen": 40_960_000, "init_from": first}))
    reader.write_text(json.dumps({**json.loads(reader.read_text()), "tokens_seen": 22_080_000,
                                  "init_from": continued}))
    about = about_markdown(DemoService(ckpt, device="cpu"))
    assert ("**Training:** it read 139.3 M tokens of reviews while it learned: 98.3 M as the model it started "
            "from, then 41.0 M in its own run") in about
    assert ("**Training:** it read 161.3 M tokens of reviews while it learned: 98.3 M, then 41.0 M as the models "
            "it started from, then 22.1 M in its own run") in about
    assert "**Training:**" not in about_markdown(DemoService(shared_tiny_checkpoints(), device="cpu"))  # unrecorded


def test_about_says_when_the_classifier_reads_the_end_of_long_reviews(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpts"
    shutil.copytree(shared_tiny_checkpoints(), ckpt)
    config = json.loads((ckpt / "sentiment" / "config.json").read_text())
    settings = json.loads((ckpt / "sentiment" / "classifier.json").read_text())
    (ckpt / "sentiment" / "classifier.json").write_text(json.dumps({**settings, "src_keep_tail": 40}))
    about = about_markdown(DemoService(ckpt, device="cpu"))
    assert (f"reads up to {config['max_src_len']} tokens at once (a longer review: its start and its last 40 "
            "first, then the middle in windows of its own, the scores averaged)") in about


def test_about_reads_a_full_training_metrics_file(tmp_path: Path) -> None:
    """The shape `python -m training.run` writes, including absolute paths and long histories."""
    ckpt = tmp_path / "ckpts"
    shutil.copytree(shared_tiny_checkpoints(), ckpt)
    metrics = {
        "task": "sentiment", "parameters": 55040, "val_accuracy": 0.871, "val_loss": 0.31,
        "val_confusion": [[40, 10], [3, 47]], "steps": 1200, "ddp_weights_in_sync": True,
        "command": "python -m training.run --task sentiment --data-dir /home/someone/secret/imdb",
        "data": {"source": "/home/someone/secret/imdb", "train_pairs": 24000, "val_pairs": 1000},
        "tokenizer": {"path": "/home/someone/ckpt/tokenizer.json", "vocab_size": 8192},
        "model_config": {"d_model": 256}, "history": [{"step": i, "loss": 1.0} for i in range(500)],
        "samples": ["This movie was great ``` and | fun", "<b>bold</b>"],
    }
    (ckpt / "sentiment" / "metrics.json").write_text(json.dumps(metrics))
    service = DemoService(ckpt, device="cpu")
    about, developers = about_markdown(service), developers_markdown(service)
    assert "/home/someone" not in about + developers and "…/imdb" in developers and "…/tokenizer.json" in developers
    assert "| val_accuracy | 0.871 |" in developers and "| val_confusion | [[40, 10], [3, 47]] |" in developers
    assert "| ddp_weights_in_sync | True |" in developers and "| tokenizer.vocab_size | 8,192 |" in developers
    assert "ddp_weights_in_sync" not in about and "imdb)" not in about  # metric dumps and paths: developers only
    assert "history" not in developers and "model_config" not in developers
    assert "train pairs: 24,000" in about  # the data line
    assert "```text\nThis movie was great ʼʼʼ and | fun\n```" in about  # samples as code, fences defused


def test_about_with_missing_models(tmp_path: Path) -> None:
    service = DemoService(tmp_path / "none", device="cpu")
    assert about_markdown(service).count("Not loaded") == 2 and developers_markdown(service).count("Not loaded") == 2


def test_pieces_html_escapes_and_alternates() -> None:
    html = pieces_html([("<script>", 5), (" &", 6), ("\x00\n", 7), ("  ", 8)])
    assert "<script>" not in html and "&lt;script&gt;" in html and "&amp;" in html
    assert "␀↵<sub>7</sub>" in html
    assert "> &amp;<sub>" in html and "␣␣<sub>8</sub>" in html
    assert html.count("#dbeafe") == 2 and html.count("#fde68a") == 2


def test_tokenizer_shows_a_split_letter_over_its_byte_pieces(service: DemoService) -> None:
    text = "naïve 😀 日本"
    result = tokens.tokenize(service, text)
    ids = service.tokenizer.encode(text)
    for first, end, letter in result.letters:  # the byte pieces of each run decode to the letter
        assert service.tokenizer.decode(ids[first:end]) == letter
        assert all(label.startswith("⟨") for label, _ in result.pieces[first:end])
    assert {letter for *_, letter in result.letters} == {c for c in text if len(c.encode()) > 1} - {
        service.tokenizer.decode([i]) for i in ids}  # every split letter, none whole in one token
    html = tokenize(service, text)[0]
    rubies = [r.split("</ruby>")[0] for r in html.split("<ruby")[1:]]
    assert len(rubies) == len(result.letters) > 0
    for ruby, (first, end, letter) in zip(rubies, result.letters, strict=True):  # the letter over its pieces' ids
        assert ruby.endswith(f"<rt>{letter}</rt>")
        assert re.findall(r"<sub>(\d+)</sub>", ruby) == [str(i) for i in ids[first:end]]


def test_message_text() -> None:
    assert message_text({"role": "user", "content": "hi"}) == "hi"
    assert message_text({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}) == "ab"
    assert message_text({"content": None}) == "" and message_text("garbage") == ""


def test_failure_is_friendly_and_hides_internals(caplog) -> None:
    assert failure(DemoError("Type something.")) == "ℹ️ Type something."
    with caplog.at_level(logging.ERROR, logger="demo"):
        try:
            raise RuntimeError("/secret/path/model.safetensors exploded")
        except RuntimeError as e:
            text = failure(e)
    assert INTERNAL_ERROR in text and "/secret" not in text
    assert "exploded" in caplog.text  # but the server log has the details


def test_notice_markdown() -> None:
    assert notice_markdown([]) == ""
    assert notice_markdown(["a", "b"]) == "- ℹ️ a\n- ℹ️ b"


def test_token_views() -> None:
    update = ChatUpdate("x", [TokenView(" the", 0.5, [(" the", 0.5), ("\n", 0.25)])], [], True, 1)
    assert token_highlights(update.steps) == [(" the", "likely (≥ 50%)")]
    probs = [0.9, 0.2, 0.05, 0.001]
    bands = [token_highlights([TokenView("x", p, [])])[0][1] for p in probs]
    assert bands == ["likely (≥ 50%)", "plausible (10–50%)", "unlikely (1–10%)", "surprising (< 1%)"]
    assert token_table(update.steps) == [[1, "␣the", 0.5, "␣the 0.500   ↵ 0.250"]]
    assert token_table(update.steps, first=7)[0][0] == 7  # numbered on from the rows already shown
    assert token_table([TokenView("a", 0.12345, [("a", 0.12345)])]) == [[1, "a", 0.123, "a 0.123"]]  # same decimals


def test_curve_html_inlines_the_image() -> None:
    info = Checkpoint("lm", "checkpoints/lm", "ready", training_curve_png=b"\x89PNG fake")
    assert curve_html(info).count("data:image/png;base64,") == 1
    assert curve_html(Checkpoint("lm", "checkpoints/lm", "ready")) == ""



def test_benchmark_sentence_reads_the_faithfulness_results(tmp_path: Path) -> None:
    results = {"reviews": 200, "methods": {
        "attention": {"comprehensiveness": 0.031, "sufficiency": 0.2},
        "grad_x_input": {"comprehensiveness": 0.412, "sufficiency": 0.1},
        "random": {"comprehensiveness": 0.012, "sufficiency": 0.3}}}
    sentence = benchmark_sentence(results)
    assert "on 200 held-out reviews" in sentence and "**gradient × input** ranks highest" in sentence
    assert "by 0.41 on average, against 0.03 for attention and 0.01 for random tokens" in sentence
    assert "python" not in sentence and "grad_x_input" not in sentence  # no command, no identifier
    (tmp_path / "f.json").write_text(json.dumps(results))
    assert read_benchmark_sentence(tmp_path / "f.json") == sentence
    assert read_benchmark_sentence(tmp_path / "missing.json") == "" and benchmark_sentence({}) == ""


def test_methods_are_named_in_words() -> None:
    assert set(METHOD_NAMES) == set(METHODS) and [m for _, m in METHOD_CHOICES] == list(METHODS)
    assert METHOD_NAMES["grad_x_input"] == "gradient × input" and "_" not in "".join(METHOD_NAMES.values())


# -- each verdict: what the view's numbers mean, a case that passes and one that fails ---------------

def deletion(*left, chance=(0.9, 0.9, 0.9), counts=(1, 2, 4)):
    return [(f, c, p, q) for f, c, p, q in zip((0.05, 0.1, 0.2), counts, left, chance, strict=True)]


def test_deletion_verdict_passes_when_the_top_tokens_carry_the_prediction() -> None:
    text = deletion_verdict("positive", 0.94, deletion(0.8, 0.6, 0.41), 20)
    assert text.startswith("**Passed:**") and "its top 20% (4 of 20 tokens) took P(positive) 0.940 → 0.410" in text
    assert "lower than deleting 4 random tokens instead: → 0.900" in text


def test_deletion_verdict_fails_when_the_probability_rises_or_falls_no_more_than_by_chance() -> None:
    rose = deletion_verdict("positive", 0.94, deletion(0.96, 0.96, 0.97), 20)
    assert rose.startswith("**Failed: the probability rose.**") and "0.940 → 0.970" in rose
    chance = deletion_verdict("negative", 0.94, deletion(0.93, 0.93, 0.92, chance=(0.9, 0.9, 0.88)), 20)
    assert chance.startswith("**Failed:**") and "no lower than deleting 4 random tokens instead: → 0.880" in chance


def test_deletion_verdict_cannot_tell_on_a_short_review_or_a_tiny_change() -> None:
    text = deletion_verdict("negative", 0.97, deletion(0.5, 0.5, 0.5, counts=(1, 1, 1)), 5)
    assert text.startswith("**Cannot tell:**") and "5%, 10% and 20% all delete the same 1 token," in text
    text = deletion_markdown("grad_x_input", "negative", 0.97, deletion(0.5, 0.5, 0.5, counts=(1, 1, 1)), 5)
    assert "**Deletion test** of gradient × input" in text and "top 10% (1) deleted: **0.500**" in text
    assert "Cannot tell" in text
    text = deletion_verdict("positive", 0.981, deletion(0.98, 0.979, 0.975, chance=(0.981, 0.981, 0.977)), 35)
    assert text.startswith("**Cannot tell:**") and "hardly lower" in text and "0.981 → 0.975" in text


def test_agreement_takeaway_names_the_pairs_that_agree_and_disagree_most() -> None:
    methods = ["attention", "grad_x_input", "integrated_gradients", "random"]
    matrix = [[1, -0.3, 0.1, 0.9], [-0.3, 1, 0.76, 0.0], [0.1, 0.76, 1, 0.0], [0.9, 0.0, 0.0, 1]]
    text = agreement_takeaway(methods, matrix)
    assert text.startswith("**gradient × input and integrated gradients agree most** (0.76)")
    assert "**attention and gradient × input disagree most** (-0.30)" in text  # random, the floor, left out
    matrix[0][1] = matrix[1][0] = 0.55
    assert "**attention and integrated gradients agree least** (0.10)" in agreement_takeaway(methods, matrix)


def test_comparing_the_methods_leaves_the_reviews_notices_alone(service: DemoService) -> None:
    """The before-trust note and a truncation notice stay on screen when every method is compared;
    a failure replaces them with its message."""
    figure, takeaway, notice = compare(service, "A fine film.")
    assert figure is not None and "agree" in takeaway and notice == gr.skip()
    assert "type a movie review" in compare(service, "   ")[2]


def test_agreement_takeaway_warns_when_no_two_methods_agree() -> None:
    methods = ["attention", "occlusion", "rollout"]
    matrix = [[1, 0.2, -0.1], [0.2, 1, float("nan")], [-0.1, float("nan"), 1]]
    text = agreement_takeaway(methods, matrix)
    assert text.startswith("**No two methods agree well**") and "attention and occlusion, reach only 0.20" in text


def test_effect_sentence_says_what_the_sign_of_a_knock_out_means() -> None:
    helped = effect_sentence("P(positive)", 0.94, 0.41, ["cross L1 H3"])
    assert "**lowered** P(positive), 0.940 → 0.410 (-0.530): this head helped the prediction" in helped
    against = effect_sentence("P(positive)", 0.94, 0.973, ["cross L1 H3", "enc L2 H1"])
    assert "**raised** P(positive), 0.940 → 0.973 (+0.033): these heads pushed *against* the prediction" in against
    assert "does not rest on this head" in effect_sentence("P(positive)", 0.94, 0.941, ["L1 H1"])


def test_sink_sentence_explains_the_start_token_sink() -> None:
    weights = np.array([[1, 0, 0], [0.8, 0.2, 0], [0.7, 0.1, 0.2]])
    text = sink_sentence(["<s>", "The", "film"], weights, causal=True)
    assert text.startswith("On average **75%** of each row's attention goes to `<s>`, the start token: an *attention "
                           "sink*")  # the first row, which can see nothing else, is left out


def test_sink_sentence_says_when_no_token_dominates() -> None:
    weights = np.full((4, 5), 0.2)
    weights[:, 3] += 0.01
    weights[:, 0] -= 0.01
    text = sink_sentence(["A", "fine", "film", "indeed", "."], weights, causal=False)
    assert text.startswith("No token dominates this map") and "21% on average, goes to `indeed`" in text


def lens(tokens: list[str], guesses: list[list[str]]) -> LensView:
    """A logit lens over `tokens` whose layers' best guesses are `guesses` (layer, token)."""
    n_layers = len(guesses)
    return LensView(layers=["embeddings"] + [f"block {i}" for i in range(1, n_layers)], tokens=tokens,
                    top_tokens=[[[g, "x"] for g in row] for row in guesses],
                    top_probs=np.full((n_layers, len(tokens), 2), 0.4),
                    token_probs=np.full((n_layers, len(tokens)), 0.1), notices=[])


def test_lens_summary_says_where_the_model_formed_its_choice() -> None:
    view = lens(["␣good", "."], [["␣was", "x"], ["␣good", "x"], ["␣good", "!"], ["␣good", "!"]])
    text = lens_summary(view)
    assert "was the token written for **1 of 2** tokens; the other one was drawn" in text
    assert "from **block 1** on average" in text  # "␣good" is the best guess from block 1 to the last column


def test_lens_summary_says_when_the_sampler_never_took_the_first_choice() -> None:
    text = lens_summary(lens(["␣odd", "!"], [["a", "b"], ["a", "b"]]))
    assert text.startswith("None of the 2 tokens written was the model's own first choice")


def test_shading_uses_one_colour_convention_with_a_matching_legend_and_a_score_on_hover() -> None:
    html = plots.shading_html([("A ", None), ("<b>great</b>", 1.0), (" film", -0.5)], "Shading by <x>", "“positive”")
    towards, against = plots.score_colour(1.0), plots.score_colour(-0.5)
    assert towards.startswith("rgba(37,99,235,") and against.startswith("rgba(234,88,12,")  # blue, orange
    assert f"background:{towards}" in html and f"background:{against}" in html
    assert f'<span style="background:{plots.score_colour(1)};padding:0 4px;border-radius:3px">blue</span> pushes ' \
           "towards “positive”" in html  # the legend's swatch is the screen's colour
    assert 'title="&lt;b&gt;great&lt;/b&gt;: +1.00"' in html and 'title="film: -0.50"' in html
    assert "<b>great" not in html and "Shading by &lt;x&gt;" in html


def test_lens_table_colours_by_the_token_written_and_marks_where_it_is_the_first_choice() -> None:
    view = lens(["<i>", "."], [["<i>", "x"], ["<i>", "."]])
    view.token_probs = np.array([[1e-5, 0.5], [1.0, 0.01]])
    html = plots.lens_html(view)
    assert "<i>" not in html and "&lt;i&gt;" in html
    cells = html.split("<td")[1:]  # row by row: (token 1: embeddings, block 1), (token 2: ...)
    assert f"background:{plots.lens_colour(1e-5)[0]}" in cells[0] and plots.lens_colour(1e-5)[0].endswith(",0.00)")
    assert f"background:{plots.lens_colour(1.0)[0]};color:white;font-weight:700" in cells[1]  # bold: the token itself
    assert "font-weight:700" not in cells[2] and "font-weight:700" in cells[3]
    assert "block 1<br>(output)" in html  # the last column is the model's own prediction


def test_figure_titles_start_below_the_toolbar() -> None:
    import plotly.graph_objects as go

    figure = plots.titled(go.Figure(), "One<br>two", "three")
    assert figure.layout.title.pad.t == plots.TOOLBAR and figure.layout.title.yref == "container"
    assert figure.layout.margin.t == plots.TOOLBAR + 3 * plots.TITLE_LINE + 10


def test_code_span_keeps_tokens_out_of_markdown() -> None:
    assert code_span("<s>") == "`<s>`" and code_span("a`b") == "`aˋb`"


def test_look_inside_handler(service: DemoService) -> None:
    table, notice, view = look_inside(service, None)
    assert table == "" and view is None and "Generate a continuation first" in notice
    update = continue_text(service, "This movie was", max_new_tokens=3, temperature=0)
    table, notice, view = look_inside(service, (list(update.token_ids), len(update.steps)))
    assert table == plots.lens_html(view) and notice.strip() == lens_summary(view)
    assert "**3 of 3**" in notice  # greedy: the model's own first choice every time


def test_reliability_diagram_draws_the_non_empty_bins_of_the_calibration_json(tmp_path) -> None:
    import torch

    from demo.plots import reliability_figure
    from demo.tabs.about import read_calibration
    from training.calibration import expected_calibration_error, reliability

    probs = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.45, 0.55]])
    labels = torch.tensor([0, 1, 1, 1])
    parts = {key: {"temperature": t, "ece": expected_calibration_error(probs, labels),
                   "reliability": reliability(probs, labels)} for key, t in (("before", 1.0), ("after", 1.5))}
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"bins": 15, "measured_on": "report rows (4)", **parts}))
    figure = reliability_figure(read_calibration(path))
    drawn = figure.data[1]
    assert list(drawn.x) == pytest.approx([0.55, 0.7, 0.8, 0.9])  # one review per bin, empty bins left out
    assert list(drawn.y) == [1.0, 1.0, 0.0, 1.0]  # the 0.8 one says negative, the review is positive
    assert read_calibration(tmp_path / "missing.json") is None
    assert [trace.name for trace in figure.data[1:]] == [f"T = 1.00: ECE {parts['before']['ece']:.3f}",
                                                         f"T = 1.50: ECE {parts['after']['ece']:.3f}"]
    short = {"after": {**parts["after"], "reliability": reliability(probs[:2], labels[:2])}}  # 0.9 right, 0.8 wrong
    path.write_text(json.dumps({"bins": 15, "measured_on": "report rows (4)", **parts, "short_text": short}))
    with_short = reliability_figure(read_calibration(path)).data
    assert len(with_short) == 4 and with_short[3].name.startswith("one-line texts, T = 1.50")
    assert list(with_short[3].x) == pytest.approx([0.8, 0.9]) and list(with_short[3].y) == [0.0, 1.0]
    assert "first or last sentences" in with_short[3].hovertemplate


def test_about_draws_each_training_curve_named_for_its_model_and_explains_the_gap() -> None:
    """Issue 50, finding 8: the curve's title names the model it is captioned with, its legend sits under the
    curves, and a training loss far above the validation loss is explained (label smoothing's floor)."""
    import math

    from demo import plots
    from demo.tabs.about import curve_caption, smoothing_floor

    history = [{"step": 50, "train_loss": 10.8, "val_loss": 0.30, "val_accuracy": 0.51},
               {"step": 1900, "train_loss": 1.32, "val_loss": 0.14, "val_accuracy": 0.90}]
    figure = plots.training_curve_figure(history, "Training curve: backward sentiment reader")
    assert "backward sentiment reader" in figure.layout.title.text
    assert figure.layout.legend.orientation == "h" and figure.layout.legend.y < 0  # under the plot, not on a curve
    assert [t.name for t in figure.data] == ["train loss", "validation loss", "validation accuracy"]
    metrics = {"steps": 1900, "history": history,
               "train_config": {"recipe": {"label_smoothing": 0.1, "crop_prob": 0.3}}}
    ckpt = Checkpoint("sentiment-backward", "x", "ready", metrics=metrics,
                      config={"vocab_size": 8192, "dropout": 0.1})
    caption = curve_caption(ckpt)
    assert "sentiment model, backward reader" in caption and "1,900 steps" in caption
    floor = smoothing_floor(0.1, 8192)
    right, other = 0.9 + 0.1 / 8192, 0.1 / 8192  # the smoothed target's entropy, written out
    assert floor == pytest.approx(-(right * math.log(right) + 8191 * other * math.log(other)))
    assert f"{floor:.2f} nats per token" in caption and "label smoothing" in caption and "1.32" in caption
    assert "label smoothing" not in curve_caption(Checkpoint("lm", "x", "ready", metrics={"history": history[:1]},
                                                             config={"vocab_size": 8192}))
