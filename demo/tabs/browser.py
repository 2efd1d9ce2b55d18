"""The code that runs in the visitor's browser: one JavaScript function per file in `demo/static/`,
read when the page is built and handed to an event's `js=` as a one-line call (`call`), so that no
tab holds JavaScript of its own and each function can be read, and linted, as JavaScript."""

import functools
import json
from pathlib import Path

STATIC = Path(__file__).resolve().parents[1] / "static"


@functools.cache
def source(name: str) -> str:
    """The function in `demo/static/<name>.js` (its leading comment says what it does)."""
    return (STATIC / f"{name}.js").read_text(encoding="utf-8").strip()


def call(name: str, *args) -> str:
    """An event's browser-side function (Gradio's `js=`) that calls `name`.js's function with `args`,
    written as JSON: `call("scroll_to", "#att-heatmap")`."""
    return f"() => ({source(name)}\n)({', '.join(json.dumps(arg) for arg in args)})"
