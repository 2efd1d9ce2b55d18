"""Query · key (`demo.views.qk`): the scores are q·k/√d_k computed by hand from the first layer's input,
their softmax is the model's attention row for every kind of attention, masked keys have no score,
and hostile settings get a notice or a message."""

import math

import numpy as np
import pytest
import torch

from demo.serving import DemoError, DemoService
from demo.tabs import qk_panel
from demo.tiny import shared_tiny_checkpoints
from demo.views.attention import attention_view
from demo.views.qk import query_key

TEXT = "The movie was not bad at all, I really enjoyed it."


@pytest.fixture(scope="module")
def service() -> DemoService:
    return DemoService(shared_tiny_checkpoints(), device="cpu")


def test_scores_by_hand_on_the_first_layer(service: DemoService) -> None:
    model, tok = service.lm.require()
    ids = torch.tensor([[tok.bos_id, *tok.encode(TEXT)]])
    layer = model.decoder.layers[0]
    with torch.inference_mode():
        x = model.pos(model.embed(ids))
        x = layer.sublayer[0].norm(x) if model.config.norm_first else x
        C, H = model.config.d_model, model.config.n_head
        d = C // H
        q, k, _ = (x[0] @ layer.self_attn.in_proj.weight.T + layer.self_attn.in_proj.bias).split(C, -1)
        expected = (k[:, d:2 * d] @ q[4, d:2 * d] / math.sqrt(d)).numpy()  # head 2, query 5
    view = query_key(service, TEXT, "lm_self", 0, 1, 4)
    assert view.query == 4 and view.query_token == view.key_tokens[4]
    np.testing.assert_allclose(view.scores[:5], expected[:5], atol=1e-5)
    assert np.isnan(view.scores[5:]).all() and (view.weights[5:] == 0).all()  # the future is masked
    np.testing.assert_allclose(view.weights[:5], torch.tensor(expected[:5]).softmax(-1).numpy(), atol=1e-6)


@pytest.mark.parametrize("kind, query", [("lm_self", 7), ("encoder_self", 3), ("cross", 1), ("decoder_self", 1)])
def test_the_softmax_of_the_scores_is_the_models_attention(service: DemoService, kind: str, query: int,
                                                           served_atol) -> None:
    view = query_key(service, TEXT, kind, 1, 1, query)  # by hand, in float32
    model_row = attention_view(service, TEXT, kind, 1).all_weights[1, 1, query]  # the model, in the service's precision
    np.testing.assert_allclose(view.weights, model_row, atol=served_atol(service))
    assert view.weights.sum() == pytest.approx(1.0, abs=1e-5) and not any("differ" in n for n in view.notices)
    figure, notice = qk_panel.show(service, TEXT, kind, 1, 1, query + 1)
    assert len(figure.data) == 2 and len(figure.data[0].y) == len(view.key_tokens)


def test_hostile_settings(service: DemoService) -> None:
    view = query_key(service, TEXT, "lm_self", 99, -3, 10**9)
    assert (view.layer, view.head, view.query) == (1, 0, len(view.key_tokens) - 1)
    assert sum("does not exist" in n for n in view.notices) == 3
    last = query_key(service, TEXT, "lm_self", 0, 0, -1)
    assert last.query == len(last.key_tokens) - 1 and not np.isnan(last.scores).any()  # the last query sees all
    long = query_key(service, "word " * 5000, "encoder_self", 0, 0, 0)
    assert any("cut" in n for n in long.notices) and len(long.key_tokens) == 64
    for text, kind, message in [("", "lm_self", "Type some text"), ("ok", "nope", "Unknown attention kind")]:
        with pytest.raises(DemoError, match=message):
            query_key(service, text, kind, 0, 0, 0)
    _, notice = qk_panel.show(service, TEXT, "lm_self", 0, -1, 2)  # the mean over heads: head 1 instead
    assert "showing head 1" in notice
    figure, notice = qk_panel.show(service, "", "lm_self", 0, 0, 1)
    assert figure is None and notice.startswith("ℹ️")
