"""The Chat tab's "Why this token?" panel in a real browser (the system Chromium, driven by
Playwright): generate, pick a step and an alternative, explain that token, see the shading.
Skipped where `tests/test_browser.py` is (no Playwright or no /usr/bin/chromium)."""

from test_browser import assert_no_error_box, open_tab, page, pytestmark, service, url  # noqa: F401  (fixtures, warnings)


def test_why_this_token_explains_a_step(page) -> None:  # noqa: F811
    open_tab(page, "Chat")
    page.locator("#chat-input textarea").fill("This movie was")
    page.locator("#chat-send").click()
    page.get_by_text("Done:").wait_for()
    page.get_by_text("Why this token?", exact=True).first.click()  # open the accordion
    page.locator("#token-step input").fill("1")
    page.locator("#token-alternative input, #token-alternative textarea").first.fill(" the")
    page.locator("#token-explain").click()
    summary = page.locator("#token-summary")
    summary.get_by_text("rather than").wait_for()
    assert "Why" in summary.inner_text()
    assert page.locator("#token-shading").inner_text().count("⟵") == 1  # the explained token, after its context
    assert_no_error_box(page)
