"""The pure formatting helpers of the tabs (`demo.tabs`): header, About page, token views, notices."""

import json
import logging
import re
import shutil
from pathlib import Path

import pytest

from demo.chat import ChatUpdate, TokenView
from demo.checkpoint import Checkpoint
from demo.inference import DemoService
from demo.inputs import DemoError
from demo.tabs.about import about_markdown, curve_html, header_markdown
from demo.tabs.chat import look_inside, message_text, token_highlights, token_table
from demo.tabs.common import failure, notice_markdown
from demo.tabs.sentiment import benchmark_sentence, deletion_markdown, read_benchmark_sentence
from demo.tabs.tokenizer import pieces_html, tokenize
from demo.text import INTERNAL_ERROR
from demo.tiny import shared_tiny_checkpoints


@pytest.fixture(scope="module")
def service() -> DemoService:
    return DemoService(shared_tiny_checkpoints(), device="cpu")


def test_header_names_device_and_checkpoints(service: DemoService) -> None:
    header = header_markdown(service)
    ckpt = shared_tiny_checkpoints()
    assert "**Device:** CPU" in header
    assert f"`{ckpt.name}/lm`" in header and f"`{ckpt.name}/sentiment`" in header
    assert "val ppl 365" in header and "val acc 0.5" in header
    assert str(ckpt) not in header


def test_header_warns_about_missing_checkpoints(tmp_path: Path) -> None:
    header = header_markdown(DemoService(tmp_path / "none", device="cpu"))
    assert "**LM:** not loaded" in header and "**Sentiment:** not loaded" in header
    assert header.count("> ⚠️") == 3  # no directory, no LM, no sentiment model
    assert str(tmp_path) not in header


def test_about_shows_models_metrics_and_retraining(service: DemoService) -> None:
    about = about_markdown(service)
    assert "## Language model" in about and "## Sentiment model" in about
    assert f"**Parameters:** {service.lm.model.num_parameters():,}" in about
    assert "| val_ppl | 365 |" in about and "| val_accuracy | 0.5 |" in about
    assert "`python -m demo.tiny (random init)`" in about  # the command, as code
    assert "Retraining" in about and "python -m training.run --help" in about
    assert "labels negative, positive" in about and "its last" not in about  # head-only truncation


def test_about_says_when_the_classifier_reads_the_end_of_long_reviews(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpts"
    shutil.copytree(shared_tiny_checkpoints(), ckpt)
    config = json.loads((ckpt / "sentiment" / "config.json").read_text())
    (ckpt / "sentiment" / "config.json").write_text(json.dumps({**config, "src_keep_tail": 40}))
    about = about_markdown(DemoService(ckpt, device="cpu"))
    assert f"reads up to {config['max_src_len']} tokens (a longer review: its start and its last 40)" in about


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
    about = about_markdown(DemoService(ckpt, device="cpu"))
    assert "/home/someone" not in about and "…/imdb" in about and "…/tokenizer.json" in about
    assert "| val_accuracy | 0.871 |" in about and "| val_confusion | [[40, 10], [3, 47]] |" in about
    assert "| ddp_weights_in_sync | True |" in about and "| tokenizer.vocab_size | 8,192 |" in about
    assert "history" not in about and "model_config" not in about
    assert "train pairs: 24,000" in about  # the data line
    assert "```text\nThis movie was great ʼʼʼ and | fun\n```" in about  # samples as code, fences defused


def test_about_with_missing_models(tmp_path: Path) -> None:
    about = about_markdown(DemoService(tmp_path / "none", device="cpu"))
    assert about.count("Not loaded") == 2 and "Retraining" in about


def test_pieces_html_escapes_and_alternates() -> None:
    html = pieces_html([("<script>", 5), (" &", 6), ("\x00\n", 7), ("  ", 8)])
    assert "<script>" not in html and "&lt;script&gt;" in html and "&amp;" in html
    assert "␀↵<sub>7</sub>" in html
    assert "> &amp;<sub>" in html and "␣␣<sub>8</sub>" in html
    assert html.count("#dbeafe") == 2 and html.count("#fde68a") == 2


def test_tokenizer_shows_a_split_letter_over_its_byte_pieces(service: DemoService) -> None:
    text = "naïve 😀 日本"
    result = service.tokenize(text)
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
        "occlusion": {"comprehensiveness": 0.412, "sufficiency": 0.1},
        "random": {"comprehensiveness": 0.012, "sufficiency": 0.3}}}
    sentence = benchmark_sentence(results)
    assert "On 200 validation reviews" in sentence and "`occlusion` ranks highest" in sentence
    assert "by 0.41 on average (against `attention` 0.03 and `random` 0.01)" in sentence
    (tmp_path / "f.json").write_text(json.dumps(results))
    assert read_benchmark_sentence(tmp_path / "f.json") == sentence
    assert read_benchmark_sentence(tmp_path / "missing.json") == "" and benchmark_sentence({}) == ""


def test_deletion_markdown() -> None:
    text = deletion_markdown("positive", 0.98, [(0.05, 0.9), (0.1, 0.4), (0.2, 0.05)])
    assert "P(positive) is 0.98" in text and "top 10% deleted: **0.40**" in text


def test_look_inside_handler(service: DemoService) -> None:
    figure, notice = look_inside(service, None)
    assert figure is None and "Generate a continuation first" in notice
    update = service.continue_text("This movie was", max_new_tokens=3, temperature=0)
    figure, notice = look_inside(service, (list(update.token_ids), len(update.steps)))
    assert figure.data[0].type == "heatmap" and notice == ""


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
