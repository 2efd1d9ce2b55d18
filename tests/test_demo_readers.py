"""The Sentiment tab's two readers: the sentiment model and, beside it in `sentiment-backward/`, a
classifier that reads reviews backwards; the verdict is the mean of their probabilities, each
computed here on its own."""

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from classifier import ClassifierConfig
from demo.serving import SENTIMENT, SENTIMENT_BACKWARD, DemoService
from demo.tabs.about import about_markdown, header_markdown
from demo.tiny import shared_tiny_checkpoints
from demo.views.sentiment import classify, explain
from model import EncoderDecoder, EncoderDecoderConfig

REVIEW = "A wonderful film. I loved the acting, but the ending dragged."  # two sentences: read as typed


def with_backward(tmp_path: Path, **changes) -> Path:
    """The tiny checkpoints plus a backward reader: the tiny sentiment model's shape (and classifier
    settings) with `changes`, other weights (seed 1), the same tokenizer."""
    root = tmp_path / "ckpt"
    shutil.copytree(shared_tiny_checkpoints(), root)
    forward = EncoderDecoder.from_pretrained(root / SENTIMENT)
    settings = ClassifierConfig.from_pretrained(root / SENTIMENT)
    torch.manual_seed(1)
    changes = {"reverse": True, "temperature": 0.7, "pair_temperature": 0.8, **changes}
    policy = {k: changes.pop(k) for k in EncoderDecoderConfig.moved_to_classifier if k in changes}
    backward = EncoderDecoder(replace(forward.config, **changes))
    backward.save_pretrained(root / SENTIMENT_BACKWARD)
    replace(settings, **policy).save_pretrained(root / SENTIMENT_BACKWARD)
    shutil.copy(root / SENTIMENT / "tokenizer.json", root / SENTIMENT_BACKWARD / "tokenizer.json")
    return root


def own_probabilities(ckpt, service: DemoService, text: str) -> torch.Tensor:
    """P(label) of one reader, by its own candidate_scores, at its own temperature (classifier.json)."""
    tok, model, settings = service.sentiment.tokenizer, ckpt.model, ckpt.classifier
    src = torch.tensor([tok.encode(text, add_eos=True)])
    scores = model.candidate_scores(model.encode(src)[0], [tok.encode(label) for label in settings.labels])[0]
    return (scores / settings.temperature).softmax(-1)[0]


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> DemoService:
    return DemoService(with_backward(tmp_path_factory.mktemp("readers")), device="cpu", precision="fp32")


def test_the_backward_reader_is_served_and_described(service):
    assert [c.name for c in service.readers] == [SENTIMENT, SENTIMENT_BACKWARD]
    assert [c.name for c in service.checkpoints][-1] == SENTIMENT_BACKWARD
    about = about_markdown(service)
    assert "backward reader" in about and "from its last token to its first" in about


def test_the_verdict_is_the_mean_of_both_readers_own_probabilities(service):
    result = classify(service, REVIEW)
    forward = own_probabilities(service.sentiment, service, REVIEW)
    backward = own_probabilities(service.sentiment_backward, service, REVIEW)
    assert not torch.allclose(forward, backward, atol=1e-3)  # two different readers
    assert list(result.readers) == ["left to right", "right to left"]
    assert list(result.readers["left to right"].values()) == pytest.approx(forward.tolist(), abs=1e-5)
    assert list(result.readers["right to left"].values()) == pytest.approx(backward.tolist(), abs=1e-5)
    tempered = (forward * backward) ** (0.5 / 0.8)  # the mean of the log-probabilities at the pair's T, renormalised
    assert list(result.probabilities.values()) == pytest.approx((tempered / tempered.sum()).tolist(), abs=1e-5)
    assert result.label == max(result.probabilities, key=result.probabilities.get)
    (notice,) = result.notices
    p = result.probabilities[result.label]
    plain = float((forward + backward).detach()[list(result.probabilities).index(result.label)]) / 2
    assert notice.startswith("**Two readers, combined:**") and f"the label shown, {p:.3f}, is the mean of their " \
        f"log-probabilities divided by a temperature fitted for the pair" in notice  # not called their "average"
    assert f"Their plain average would be {plain:.3f}" in notice  # the plain average, beside it


def test_an_explanation_explains_the_forward_reader_and_shows_the_verdict(service):
    shown = classify(service, REVIEW)
    result = explain(service, REVIEW, "occlusion")
    assert result.verdict == pytest.approx(shown.probabilities, abs=1e-6)
    assert result.probabilities == pytest.approx(shown.readers["left to right"], abs=1e-6)
    assert result.label == max(result.probabilities, key=result.probabilities.get)
    assert any(n.startswith("The shading and the deletion test explain the sentiment model, which reads left to "
                            "right") for n in result.notices)


@pytest.mark.parametrize(("changes", "why"), [
    ({"reverse": False}, "does not read backwards"),
    ({"labels": ["bad", "good"]}, "its labels are"),
    ({"src_keep_tail": 8}, "cuts reviews differently"),
])
def test_a_backward_reader_that_cannot_pair_is_reported_and_unused(tmp_path, changes, why):
    service = DemoService(with_backward(tmp_path, **changes), device="cpu")
    assert service.sentiment_backward.status == "error" and why in service.sentiment_backward.message
    assert service.readers == [service.sentiment]
    assert "Backward sentiment reader: not paired with the sentiment model: it" in header_markdown(service)
    result = classify(service, REVIEW)
    assert list(result.readers) == ["left to right"] and result.notices == []


def test_a_sentiment_model_named_alone_is_served_without_the_folder_s_backward_reader(tmp_path):
    root = with_backward(tmp_path)
    service = DemoService(root, device="cpu", models={SENTIMENT: str(root / SENTIMENT)})
    assert service.readers == [service.sentiment] and SENTIMENT_BACKWARD not in [c.name for c in service.checkpoints]
    both = DemoService(root, device="cpu", models={SENTIMENT: str(root / SENTIMENT),
                                                   SENTIMENT_BACKWARD: str(root / SENTIMENT_BACKWARD)})
    assert [c.name for c in both.readers] == [SENTIMENT, SENTIMENT_BACKWARD]
