"""Side by side (`demo.views.compare`): both versions' probabilities and scores are the library's, for
the same label; the alignment keeps every token of both in order; hostile input gets a message."""

import pytest
import torch

from demo.serving import DemoError, DemoService
from demo.tabs import compare_panel
from demo.tiny import shared_tiny_checkpoints
from demo.views.compare import MINIMAL_PAIRS, align, compare
from demo.views.sentiment import reader_of
from inspection import attribute
from model import autocast
from tokenization import review_text


@pytest.fixture(scope="module")
def service() -> DemoService:
    return DemoService(shared_tiny_checkpoints(), device="cpu")


def test_align_pairs_shared_tokens_and_keeps_every_token() -> None:
    a, b = ["The", " movie", " was", " bad", "."], ["The", " movie", " was", " not", " bad", "."]
    tokens = align(a, b, [1.0, 2.0, 3.0, 4.0, 5.0], [10.0, 20.0, 30.0, 35.0, 40.0, 50.0])
    assert [t.a for t in tokens if t.a is not None] == a and [t.b for t in tokens if t.b is not None] == b
    negation = next(t for t in tokens if t.b == " not")
    assert negation.a is None and negation.difference == 35.0
    assert next(t for t in tokens if t.a == " bad").difference == pytest.approx(40.0 - 4.0)


@pytest.mark.parametrize("pair", list(MINIMAL_PAIRS))
def test_both_versions_are_explained_for_the_first_label(service: DemoService, pair: str, served_atol) -> None:
    text_a, text_b = MINIMAL_PAIRS[pair]
    c = compare(service, text_a, text_b, "grad_x_input")
    _, tok = service.sentiment.require()
    model = reader_of(service.sentiment)  # the served reader: its temperature (classifier.json)
    candidates = model.candidates
    ids_a = torch.tensor([[*tok.encode(review_text(text_a, tok)), tok.eos_id]])  # as the app reads it
    ids_b = torch.tensor([[*tok.encode(review_text(text_b, tok)), tok.eos_id]])
    with autocast(service.device, service.precision):  # like with like: the service's own precision
        first = attribute(model, ids_a, candidates, "grad_x_input")
        second = attribute(model, ids_b, candidates, "grad_x_input", label=first.label)
    assert c.label == model.labels[first.label]
    atol = served_atol(service)
    assert c.probabilities_a[c.label] == pytest.approx(float(first.probabilities[first.label]), abs=atol)
    assert c.change == pytest.approx(float(second.probabilities[first.label] - first.probabilities[first.label]),
                                     abs=2 * atol)
    scores_b = [t.score_b for t in c.tokens if t.b is not None]
    assert scores_b == pytest.approx(second.scores[:-1].tolist(), abs=atol)  # every token but the end token


def test_the_panel_and_hostile_input(service: DemoService) -> None:
    label_a, label_b, figure, rows, summary = compare_panel.compare(service, *MINIMAL_PAIRS["negation"], "occlusion")
    assert set(label_a) == {"negative", "positive"} and len(figure.data) == 2 and "→" in summary
    for a, b, method, message in [("", "fine", "occlusion", "The first version"),
                                  ("fine", None, "occlusion", "The second version"),
                                  ("fine", "good", "magic", "Unknown explanation method")]:
        with pytest.raises(DemoError, match=message):
            compare(service, a, b, method)
    *_, notice = compare_panel.compare(service, "x" * 20_001, "ok", "random")
    assert "The first version: The text was cut" in notice
    outputs = compare_panel.compare(service, "ok", "", "random")
    assert outputs[:4] == (None, None, None, None) and outputs[4].startswith("ℹ️")
