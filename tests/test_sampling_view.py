"""Sampling made visible (`demo.views.sampling`): the distribution shown for a chat step is the one the
generator really drew from, checked by replaying the draws with the same seed, past the point
where the window slides too."""

import pytest
import torch

from demo.serving import DemoError, DemoService
from demo.tiny import shared_tiny_checkpoints
from demo.views.sampling import sampling_view, step_logits
from model import GenerationConfig, sampling_distribution

SEED = 11


@pytest.fixture(scope="module")
def service() -> DemoService:
    return DemoService(shared_tiny_checkpoints(), device="cpu")


@pytest.fixture(scope="module")
def run(service: DemoService):
    """A sampled continuation long enough that `stream`'s 64-token window slides twice."""
    model, tok = service.lm.require()
    prompt = [tok.bos_id, *tok.encode("This movie was great, the acting was wonderful and the story " * 3)][:50]
    config = GenerationConfig(max_new_tokens=60, temperature=0.9, top_k=40, top_p=0.9, seed=SEED)
    steps = list(model.stream(torch.tensor([prompt]), config))
    return prompt + [s.token_id for s in steps], steps, config


def test_the_shown_distribution_is_the_one_sampled_from(service: DemoService, run) -> None:
    token_ids, steps, config = run
    model = service.lm.model
    generator = torch.Generator().manual_seed(SEED)
    for i, step in enumerate(steps):
        logits = step_logits(model, token_ids, len(steps), i)
        torch.testing.assert_close(logits, step.logits.float(), atol=1e-4, rtol=1e-4)
        shown = sampling_distribution(logits, config)
        # the generator's own draw, replayed with the same seed on the distribution we show
        assert int(torch.multinomial(shown, 1, generator=generator)) == step.token_id


def test_the_view_of_a_step(service: DemoService, run) -> None:
    token_ids, steps, config = run
    for n in (1, 30, 60):
        view = sampling_view(service, (token_ids, len(steps)), n, config.temperature, config.top_k, config.top_p)
        expected = sampling_distribution(steps[n - 1].logits, config)
        drawn = next(r for r in view.rows if r.drawn)
        assert view.step == n and drawn.removed_by == "" and drawn.sampled > 0
        assert drawn.sampled == pytest.approx(float(expected[steps[n - 1].token_id]), abs=1e-4)
        probs = steps[n - 1].logits.float().softmax(-1)
        assert view.drawn_rank == 1 + int((probs > probs[steps[n - 1].token_id]).sum())
        assert view.kept == int((expected > 0).sum()) and view.removed_by_top_k == probs.numel() - config.top_k
        assert view.kept + view.removed_by_top_k + view.removed_by_top_p == probs.numel()
        ranked = [r for r in view.rows if not r.drawn or r.rank <= 20]
        assert [r.rank for r in ranked] == list(range(1, len(ranked) + 1))
        assert all((r.sampled == 0) == (r.removed_by != "") for r in view.rows)
        tempered = (steps[n - 1].logits.float() / config.temperature).softmax(-1)
        assert view.rows[0].tempered == pytest.approx(float(tempered.max()), abs=1e-5)


def test_greedy_and_bad_requests(service: DemoService, run) -> None:
    token_ids, steps, _ = run
    view = sampling_view(service, (token_ids, len(steps)), 999, 0, None, None)
    assert view.step == len(steps) and any("does not exist" in n for n in view.notices)
    assert any("greedy" in n for n in view.notices) and view.kept == 1
    for generated in (None, (), ([1, 2], 5), ([10**9], 1), "abc", ([1, 2, 3], 0)):
        with pytest.raises(DemoError, match="Generate a continuation first"):
            sampling_view(service, generated, 1)


@pytest.mark.filterwarnings("ignore:.*no_silent_downcasting", "ignore:The copy keyword is deprecated")
def test_clicking_a_table_row_shows_its_sampling_in_the_browser(service: DemoService) -> None:
    import socket
    from pathlib import Path

    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("no Chromium at /usr/bin/chromium")
    from demo.app import build_app, launch

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = build_app(service)
    _, url, _ = launch(app, "127.0.0.1", port, prevent_thread_lock=True, quiet=True)
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(30_000)
            page.goto(url)
            page.get_by_role("tab", name="Chat").click()  # the app opens on the tour
            page.locator("#chat-input textarea").fill("This movie was")
            page.locator("#chat-send").click()
            page.get_by_text("Done:").wait_for()
            page.get_by_text("How was this token sampled?").first.click()
            page.locator('#chat-table [data-testid="cell-1-1"]').click()  # step 2's token (row 1, column 1)
            page.locator("#sampling-plot .js-plotly-plot").wait_for()
            assert "Step 2:" in page.locator("#sampling-plot").inner_text()
            # the table's probability is the model's own, as the panel says: before the temperature and the filters
            assert "before the temperature and top-k / top-p" in page.locator("#chat-table").inner_text()
            browser.close()
    finally:
        app.close()
