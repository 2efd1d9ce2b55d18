"""Why this token? in the app: `demo.views.token_explain` on the tiny checkpoints, and the `/explain_token`
endpoint driven through `gradio_client`, with ordinary and hostile input."""

import socket

import pytest
import torch

from demo.app import build_app, launch
from demo.serving import DemoError, DemoService
from demo.tiny import shared_tiny_checkpoints
from demo.views.chat import continue_text
from demo.views.token_explain import explain_step, explain_text
from inspection import METHODS, attribute_token

gradio_client = pytest.importorskip("gradio_client")

pytestmark = [pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]

TEXT = "This movie was great, the acting was wonderful"


@pytest.fixture(scope="module")
def service() -> DemoService:
    return DemoService(shared_tiny_checkpoints(), device="cpu")


@pytest.fixture(scope="module")
def client(service):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = build_app(service)
    _, url, _ = launch(app, "127.0.0.1", port, prevent_thread_lock=True, quiet=True)
    yield gradio_client.Client(url, verbose=False)
    app.close()


def text_ids(service, text=TEXT) -> list[int]:
    tok = service.lm.tokenizer
    return [tok.bos_id, *tok.encode(text)]


@pytest.mark.parametrize("method", METHODS)
def test_text_token_shades_every_earlier_token(service, method):
    ids = text_ids(service)
    result = explain_text(service, TEXT, 5, method)
    scores = [s for _, s in result.highlights]
    assert len(result.highlights) == 6 and scores[-1] is None  # bos + 4 tokens, then the token itself
    assert all(-1 <= s <= 1 for s in scores[:-1]) and max(abs(s) for s in scores[:-1]) == pytest.approx(1)
    expected = attribute_token(service.lm.model, torch.tensor(ids), 5, method).scores
    assert [s for s in scores[:-1]] == pytest.approx((expected / expected.abs().max()).tolist(), abs=1e-4)


def test_contrastive_summary_names_both_tokens(service):
    result = explain_text(service, TEXT, 3, "grad_x_input", " terrible")
    assert result.alternative is not None and result.alternative_probability is not None
    assert "rather than" in result.summary and "minus that of" in result.summary
    assert "by gradient × input" in result.summary


def test_chat_step_is_explained_from_the_generators_window(service):
    update = continue_text(service, "This movie was", max_new_tokens=6, temperature=0.0, seed=1)
    generated = (update.token_ids, len(update.steps))
    prompt_len = len(update.token_ids) - len(update.steps)
    for step in (1, len(update.steps)):
        result = explain_step(service, generated, step, "occlusion")
        assert len(result.highlights) == prompt_len + step  # every earlier token, then the token
        assert result.token.replace("␣", " ") == update.steps[step - 1].token
        assert result.probability == pytest.approx(update.steps[step - 1].prob, abs=1e-4)


def test_endpoint_answers(client):
    shading, summary = client.predict(TEXT, 4, "integrated_gradients", "", api_name="/explain_token")
    assert len(shading) == 5 and "Why" in summary and "points between the two" in summary  # completeness, in words


@pytest.mark.parametrize(("text", "position", "method", "alternative", "message"), [
    ("", 1, "occlusion", "", "Type a text first"),
    ("   \n ", 1, "occlusion", "", "Type a text first"),
    (TEXT, 0, "occlusion", "", "outside the text's tokens"),
    (TEXT, 10**9, "occlusion", "", "outside the text's tokens"),
    (TEXT, -3, "occlusion", "", "outside the text's tokens"),
    (TEXT, 2, "shap", "", "Unknown explanation method"),
    (TEXT, 2, "occlusion", "\x00\x01", None),
    ("👍🏽🎬🍿 <script>alert(1)</script> $x^2$", 3, "rollout", "日本語", None),
])
def test_endpoint_hostile_input_gets_a_message(client, text, position, method, alternative, message):
    shading, summary = client.predict(text, position, method, alternative, api_name="/explain_token")
    if message is None:
        assert shading and "Why" in summary
    else:
        assert shading is None and message in summary and "⚠️" not in summary


def test_endpoint_long_text_reads_the_last_window(client, service):
    text = "great movie " * 2_000  # 24k characters: cut to the input limit, then to the model's window
    shading, summary = client.predict(text, 10**9, "grad_x_input", "", api_name="/explain_token")
    assert shading is None and "outside the text's tokens" in summary
    shading, summary = client.predict(text, 400, "grad_x_input", "", api_name="/explain_token")
    block = service.lm.model.config.block_size
    assert len(shading) == 401 and "read only the last" in summary
    assert [s is None for _, s in shading] == [True] * (400 - block) + [False] * block + [True]


def test_chat_step_before_any_chat_or_out_of_range(service):
    update = continue_text(service, "This movie was", max_new_tokens=3, temperature=0.0, seed=1)
    generated = (update.token_ids, len(update.steps))
    for state, step, message in [(None, 1, "Generate a continuation first"),
                                 (([1, 99_999], 1), 1, "Generate a continuation first"),
                                 (generated, 0, "pick 1..3"), (generated, 4, "pick 1..3")]:
        with pytest.raises(DemoError, match=message):
            explain_step(service, state, step, "random")


def test_alternative_copied_from_the_table_reads_back(service):
    """The chat table shows " great" as "␣great": typed either way, the same token is contrasted."""
    typed = explain_text(service, TEXT, 3, "grad_x_input", " great")
    copied = explain_text(service, TEXT, 3, "grad_x_input", "␣great")
    assert copied.alternative == typed.alternative and copied.highlights == typed.highlights
