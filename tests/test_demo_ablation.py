"""The app's head ablation (`demo.views.ablation` through `DemoService`): the numbers are the library's,
the shared model is never left ablated, and hostile input gets a message, not a stack trace."""

import pytest
import torch

from demo.serving import LM, SENTIMENT, DemoError, DemoService
from demo.tabs import ablation_panel
from demo.tiny import shared_tiny_checkpoints
from demo.views.ablation import ablate_heads, head_names, parse_heads, rank_heads
from inspection import Head, ablate
from model.hooks import attached


@pytest.fixture(scope="module")
def service() -> DemoService:
    return DemoService(shared_tiny_checkpoints(), device="cpu")


def test_head_names_cover_every_head(service: DemoService) -> None:
    assert head_names(service, LM) == ["L1 H1", "L1 H2", "L2 H1", "L2 H2"]
    names = head_names(service, SENTIMENT)
    assert names[:2] == ["enc L1 H1", "enc L1 H2"] and "cross L2 H2" in names and "dec L1 H1" in names
    assert len(names) == 2 * 2 + 2 * 2 + 2 * 2
    assert parse_heads(service.sentiment, "Cross l2 h1, enc L1 H2") == [Head("cross", 1, 0), Head("encoder_self", 0, 1)]


def test_knocking_out_matches_the_library_and_leaves_the_served_model_alone(service: DemoService) -> None:
    text = "The movie was not bad at all"
    result = ablate_heads(service, LM, text, ["L2 H1", "L1 H2"], "mean")
    model, tok = service.lm.require()
    ids = torch.tensor([[tok.bos_id, *tok.encode(text)]])
    with torch.inference_mode():
        probs = model(ids).logits[0, -1].softmax(-1)
        token = int(probs.argmax())
        assert result.before == pytest.approx(float(probs[token]), abs=1e-6)
        assert not attached(model)
        with ablate(model, [Head("decoder_self", 1, 0), Head("decoder_self", 0, 1)], "mean"):
            assert result.after == pytest.approx(float(model(ids).logits[0, -1].softmax(-1)[token]), abs=1e-6)
    assert result.heads == ["L2 H1", "L1 H2"] and result.mode == "mean"


def test_ranking_lists_every_head_by_effect(service: DemoService) -> None:
    ranking = rank_heads(service, SENTIMENT, "A wonderful film, but far too long.", "zero")
    assert len(ranking.rows) == 12 and ranking.prediction.startswith("P(")
    deltas = [abs(r.delta) for r in ranking.rows]
    assert deltas == sorted(deltas, reverse=True)
    assert all(0 <= r.weight <= 1 and r.ablated == pytest.approx(ranking.base + r.delta) for r in ranking.rows)
    figure, table, summary = ablation_panel.rank(service, "A wonderful film, but far too long.", SENTIMENT, "mean")
    assert len(table) == 12 and "ranks #" in summary and len(figure.data[0].x) == 12


@pytest.mark.parametrize("call, message", [
    (lambda s: ablate_heads(s, LM, "", ["L1 H1"]), "Type some text"),
    (lambda s: ablate_heads(s, SENTIMENT, "   ", ["enc L1 H1"]), "review"),
    (lambda s: ablate_heads(s, LM, "Fine.", ["L9 H1"]), "no head"),
    (lambda s: ablate_heads(s, LM, "Fine.", ["L1 H0"]), "no head"),
    (lambda s: ablate_heads(s, LM, "Fine.", ["L-1 H1"]), "no head"),
    (lambda s: ablate_heads(s, SENTIMENT, "Fine.", ["L1 H1"]), "no head"),  # the sentiment model's heads need a kind
    (lambda s: ablate_heads(s, LM, "Fine.", []), "Pick at least one head"),
    (lambda s: ablate_heads(s, LM, "Fine.", None), "Pick at least one head"),
    (lambda s: ablate_heads(s, LM, "Fine.", 12), "Pick at least one head"),
    (lambda s: ablate_heads(s, LM, "Fine.", ["L1 H1"], "noise"), "Unknown ablation"),
    (lambda s: ablate_heads(s, "gpt", "Fine.", ["L1 H1"]), "Unknown model"),
    (lambda s: rank_heads(s, LM, None), "Type some text"),
    (lambda s: rank_heads(s, SENTIMENT, "ok", "zero\x00"), "Unknown ablation"),
])
def test_hostile_input_gets_a_message(service: DemoService, call, message: str) -> None:
    with pytest.raises(DemoError, match=message):
        call(service)


def test_20k_characters_are_cut_and_said(service: DemoService) -> None:
    text = "great acting but a dull plot " * 700  # 20,300 characters
    result = ablate_heads(service, SENTIMENT, text, "enc L1 H1, cross L1 H2")
    assert any("cut" in n for n in result.notices) and any("on the first window alone" in n for n in result.notices)
    ranking = rank_heads(service, LM, text, "mean")
    assert any("reads the last" in n for n in ranking.notices) and len(ranking.rows) == 4
    assert "ℹ️" in ablation_panel.knock_out(service, "", LM, ["L1 H1"], "zero")
