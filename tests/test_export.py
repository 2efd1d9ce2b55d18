"""Export (`demo.export`, `demo.tabs.export_panel`): the standalone HTML holds everything it needs
(no network), escapes visitor text, and opens in Chromium with the network cut, its figure drawn
and downloadable as SVG; in the app, a figure's PNG and SVG buttons download the plot on screen."""

import socket
from pathlib import Path

import pytest

from demo.export import NOTHING, page, write_page
from demo.serving import DemoError, DemoService
from demo.tabs import compare_panel
from demo.tabs.export_panel import _value
from demo.tiny import shared_tiny_checkpoints
from demo.views.compare import MINIMAL_PAIRS

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
pytestmark = [pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]


@pytest.fixture(scope="module")
def service() -> DemoService:
    return DemoService(shared_tiny_checkpoints(), device="cpu")


@pytest.fixture(scope="module")
def exported(service: DemoService, tmp_path_factory) -> Path:
    """The side-by-side view of a minimal pair, exported as the page shows it."""
    label_a, label_b, figure, rows, summary = compare_panel.compare(service, *MINIMAL_PAIRS["negation"], "occlusion")
    parts = [("markdown", summary), ("label", label_a), ("label", label_b), ("figure", figure.to_json()),
             ("shading", ([("<script>alert(1)</script>", 0.7), ("plain", None)], "Shading", "“negative”")),
             ("table", {"headers": ["first", "second"], "data": [[r[0], r[2]] for r in rows]})]
    return write_page("Side by side <b>test</b>", parts, "compare")


def test_the_page_is_standalone_and_escaped(exported: Path) -> None:
    text = exported.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "Plotly.newPlot('fig1'" in text
    assert "<script src" not in text and "<link" not in text and "@import" not in text  # nothing fetched
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "Side by side &lt;b&gt;test&lt;/b&gt;" in text
    assert "rgba(37,99,235,0.42)" in text  # a score of 0.7 for the label: blue, as the page shows it
    assert text.count("Download SVG") == 1 and "negative" in text


def test_nothing_to_export_and_gradio_values() -> None:
    with pytest.raises(DemoError, match=NOTHING):
        page("empty", [("markdown", ""), ("figure", None), ("table", None)])
    assert _value("label", "positive") == {"positive": 1.0}
    assert _value("figure", {"plot": "{}", "type": "plotly"}) == "{}" and _value("figure", None) is None
    assert "<td>0.250</td>" in page("t", [("label", {"a": 0.25, "b": 0.75})])


sync_api = pytest.importorskip("playwright.sync_api")
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium")


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@needs_chromium
def test_the_exported_page_opens_offline(browser, exported: Path) -> None:
    context = browser.new_context(offline=True, accept_downloads=True)
    requested = []
    context.route("**/*", lambda route: (requested.append(route.request.url), route.abort())
                  if not route.request.url.startswith("file://") else route.continue_())
    page_ = context.new_page()
    errors = []
    page_.on("pageerror", lambda e: errors.append(str(e)))
    page_.goto(exported.as_uri())
    page_.locator("#fig1 .main-svg").first.wait_for(timeout=20_000)  # plotly.js ran, from the file itself
    assert page_.locator("#fig1 .bars path").count() >= 2 and "negative" in page_.inner_text("body")
    with page_.expect_download() as download:
        page_.get_by_text("Download SVG").click()
    assert download.value.suggested_filename == "compare-1.svg"
    assert Path(download.value.path()).read_text(encoding="utf-8").lstrip().startswith("<svg")
    assert not errors and not requested
    context.close()


@needs_chromium
def test_a_figure_downloads_as_png_and_svg_in_the_app(browser, service: DemoService) -> None:
    from demo.app import build_app, launch

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = build_app(service)
    _, url, _ = launch(app, "127.0.0.1", port, prevent_thread_lock=True, quiet=True)
    try:
        context = browser.new_context(accept_downloads=True)
        page_ = context.new_page()
        page_.goto(url)
        page_.get_by_role("tab", name="Attention").click()
        page_.locator("#att-heatmap .js-plotly-plot").wait_for(timeout=30_000)  # drawn on load
        magic = {"svg": b"<svg", "png": b"\x89PNG"}
        for fmt, start in magic.items():
            with page_.expect_download(timeout=30_000) as download:
                page_.locator(f"#att-heatmap-{fmt}").click()
            assert download.value.suggested_filename == f"att-heatmap.{fmt}"
            assert Path(download.value.path()).read_bytes().lstrip().startswith(start)
        page_.get_by_text("Knock out a head (ablation)").first.click()  # the Attention tab's panel
        page_.get_by_role("button", name="Rank every head by its effect").first.click()
        page_.locator("#ablation-plot .js-plotly-plot").wait_for(timeout=30_000)
        page_.locator("#export-ablation").click()
        link = page_.locator("#export-ablation-file a").first
        link.wait_for(timeout=30_000)
        text = page_.request.get(link.get_attribute("href")).text()
        assert text.startswith("<!DOCTYPE html>") and "Plotly.newPlot('fig1'" in text and "ranks #" in text
        context.close()
    finally:
        app.close()
