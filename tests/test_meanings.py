"""Same word, two meanings (`inspection.meanings`): at the embedding the cosine is the one computed by
hand from the table and the sinusoids; on the shipped LM "play" (a show) and "play" (to play) drift
apart through the layers, further than "play" in two sentences of the same meaning."""

import math
from pathlib import Path

import pytest
import torch

from inspection.meanings import two_meanings
from model import load_pretrained, sinusoidal_table
from tokenization import BPETokenizer, prompt_ids

ROOT = Path(__file__).resolve().parents[1] / "checkpoints"
SHOW, GAME, SHOW_AGAIN = ("The play was staged at a small theatre", "The kids went outside to play",
                          "We saw a play at the theatre last night")


@pytest.fixture(scope="module")
def lm():
    return load_pretrained(ROOT / "lm"), BPETokenizer.from_file(ROOT / "lm")


def test_the_embedding_cosine_by_hand(lm):
    model, tok = lm
    rows = two_meanings(model, tok, "play", SHOW, GAME)
    (word,) = tok.encode(" play")
    pe = sinusoidal_table(model.config.block_size, model.config.d_model).double()
    vectors = []
    for text in (SHOW, GAME):
        at = prompt_ids(text, tok).index(word)
        vectors.append(model.embed.lut.weight[word].double() * math.sqrt(model.config.d_model) + pe[at])
    expected = torch.nn.functional.cosine_similarity(*vectors, dim=0)
    assert rows[0].depth == "embeddings" and rows[0].cosine == pytest.approx(float(expected), abs=1e-5)
    assert [r.depth for r in rows] == ["embeddings"] + [f"layer {i + 1}" for i in range(model.config.n_layer)]


def test_two_meanings_drift_apart_more_than_one_meaning(lm):
    different = two_meanings(*lm, "play", SHOW, GAME)
    same = two_meanings(*lm, "play", SHOW, SHOW_AGAIN)
    assert different[-1].cosine < same[-1].cosine - 0.2 and different[-1].cosine < different[0].cosine - 0.4


def test_a_word_not_in_the_text_is_one_line(lm):
    with pytest.raises(ValueError, match="is not a word of"):
        two_meanings(*lm, "bank", SHOW, GAME)


def test_the_app_view_compares_both_pairs_and_says_so():
    from demo.serving import DemoError, DemoService
    from demo.views.meanings import EXAMPLE, meanings

    service = DemoService(ROOT, device="cpu")
    m = meanings(service, *EXAMPLE)
    model, tok = service.lm.require()
    assert m.other == [d.cosine for d in two_meanings(model, tok, *EXAMPLE[:3])]
    assert m.depths[0] == "embeddings" and "the layers tell the meanings apart" in m.summary()
    with pytest.raises(DemoError, match="three sentences"):
        meanings(service, "play", "", "x play", "y play")


def test_the_page_shows_both_cosines_by_depth():
    from demo.serving import DemoService
    from demo.tabs.ablation_panel import compare_meanings
    from demo.views.meanings import EXAMPLE

    shown = compare_meanings(DemoService(ROOT, device="cpu"), *EXAMPLE)
    assert shown.startswith("| depth | cosine, other meaning | cosine, same meaning |")
    assert "| layer 6 | 0.50 | 0.79 |" in shown and "tell the meanings apart" in shown
    # issue 61, item 5: a causal model's vector of the word reads only the words before it, and the page says so
    assert "built from the words before it only (here “We bought tickets for the”; “The kids went outside to”; " \
           "“The actors rehearsed the”)" in shown
    assert "is not a word of" in compare_meanings(DemoService(ROOT, device="cpu"), "bank", *EXAMPLE[1:])
