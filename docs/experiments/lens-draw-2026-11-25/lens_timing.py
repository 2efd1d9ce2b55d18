"""Median time from a click on "Look inside: logit lens" to the lens drawn in Chromium, run from a
repository root: cold (the page's first lens) and warm (a second lens on the same page, after
another chat), each after a 60-token chat at full speed. Works for the Plotly lens (before) and the
HTML table (after). Usage: python lens_timing.py [REPEATS]"""
import socket, statistics, sys, time
sys.path.insert(0, ".")
import torch
torch.set_num_threads(1)
from playwright import sync_api
from demo.app import build_app, launch
from demo.serving import DemoService

REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
LENS = "#chat-lens-plot .hm image, #chat-lens-table table"
DRAWN = f"() => {{ const i = document.querySelector('{LENS}'); return i && i.outerHTML !== window.__old && "\
        "(i.tagName === 'TABLE' || document.querySelector('#chat-lens-plot .ytick')); }"


def chat(page, seed):
    page.locator("#chat-seed input").fill(str(seed))
    page.locator("#chat-input textarea").fill("This movie was")
    page.locator("#chat-send").click()
    page.wait_for_function("s => document.querySelector('#chat-notice').innerText.includes(`(seed ${s})`)", arg=seed)
    page.wait_for_timeout(300)


def lens(page):
    page.evaluate(f"() => {{ const i = document.querySelector('{LENS}'); window.__old = i && i.outerHTML; }}")
    t0 = time.perf_counter()
    page.locator("#chat-lens").click()
    page.wait_for_function(DRAWN, polling="raf")
    return time.perf_counter() - t0


service = DemoService("checkpoints", device="cpu")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
app = build_app(service)
_, url, _ = launch(app, "127.0.0.1", port, prevent_thread_lock=True, quiet=True)
cold, warm = [], []
with sync_api.sync_playwright() as p:
    b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"], headless=True)
    for i in range(REPEATS):
        page = b.new_page(viewport={"width": 1280, "height": 1000})
        page.set_default_timeout(120_000)
        page.goto(url)
        page.get_by_role("tab", name="Chat").click()
        if page.locator("#chat-speed").count():
            page.locator("#chat-speed").get_by_text("max", exact=True).click()
        chat(page, 100 + 2 * i)
        cold.append(lens(page))
        chat(page, 101 + 2 * i)
        warm.append(lens(page))
        page.close()
    b.close()
app.close()
med = lambda xs: round(statistics.median(xs), 2)
print("cold:", [round(t, 2) for t in cold], "median", med(cold))
print("warm:", [round(t, 2) for t in warm], "median", med(warm))
