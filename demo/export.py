"""Export: any explanation on the page as one standalone HTML file that opens offline (plotly.js
inlined, no link to anything), built from what the page shows: label probabilities, shaded
tokens, the logit lens, Markdown notes, tables and Plotly figures. Each figure in it keeps Plotly's
toolbar and gets PNG and SVG download buttons (no Gradio here; `demo.tabs.export_panel` wires it to
the page). The HTML views (shading, lens) are drawn again here from their data, kept on the server,
by the functions that drew them on the page: markup sent by a browser is never written into a file
the server serves.
"""

import functools
import html
import json
import tempfile
import time
from pathlib import Path

from demo import plots
from demo.serving import DemoError

EXPORT_DIR = Path(tempfile.gettempdir()) / "tiny-transformers-exports"  # Gradio serves files from the temp dir
NOTHING = "Nothing to export yet: compute the view first."
STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#1f2937}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}table{border-collapse:collapse;font-size:.9em}
td,th{border:1px solid #d1d5db;padding:2px 8px;text-align:left}.lens td,.lens th{border:none}
button{margin:2px 6px 8px 0}.note{color:#6b7280;font-size:.85em}"""


@functools.cache
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def _markdown(text: str) -> str:
    from markdown_it import MarkdownIt  # Gradio's own Markdown renderer

    return MarkdownIt("commonmark", {"html": False}).enable("table").render(text)


def _label(value: dict) -> str:
    """A `gr.Label` value: {"label": ..., "confidences": [{"label", "confidence"}]} or {label: p}."""
    confidences = value.get("confidences") or [{"label": k, "confidence": v} for k, v in value.items()
                                                if isinstance(v, int | float)]
    rows = "".join(f"<tr><td>{html.escape(str(c['label']))}</td><td>{float(c['confidence']):.3f}</td></tr>"
                   for c in confidences)
    return f"<table><tr><th>label</th><th>probability</th></tr>{rows}</table>"


def _shading(value: tuple) -> str:
    """A shading's data, as the page drew it: (segments, heading, prediction)."""
    return plots.shading_html(*value)


def _table(value: dict) -> str:
    """A `gr.Dataframe` value: {"headers": [...], "data": [[...]]}."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in value.get("headers", []))
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in value.get("data", []))
    return f"<table><tr>{head}</tr>{body}</table>"


def _figure(plot_json: str, i: int, name: str) -> str:
    """A Plotly figure from its JSON, drawn by the inlined plotly.js, with PNG and SVG buttons."""
    figure = json.loads(plot_json)
    data = json.dumps({"data": figure.get("data", []), "layout": figure.get("layout", {})}).replace("</", "<\\/")
    buttons = "".join(f"<button onclick=\"Plotly.downloadImage('fig{i}',{{format:'{fmt}',filename:'{name}-{i}'}})\">"
                      f"Download {fmt.upper()}</button>" for fmt in ("png", "svg"))
    return (f'<div id="fig{i}"></div>{buttons}<script>(function(){{var f={data};'
            f"Plotly.newPlot('fig{i}',f.data,f.layout,{{responsive:true}});}})();</script>")


def page(title: str, parts: list[tuple[str, object]], name: str = "explanation") -> str:
    """The standalone page: `parts` are (kind, value) with kind one of "markdown", "label", "shading"
    (segments, heading, prediction), "lens" (a `demo.views.lens.LensView`), "table" and "figure" (a Plotly
    figure's JSON), in page order; empty ones are skipped."""
    render = {"markdown": _markdown, "label": _label, "shading": _shading, "lens": plots.lens_html, "table": _table}
    body, figures = [], 0
    for kind, value in parts:
        if not value:
            continue
        if kind == "figure":
            figures += 1
            body.append(_figure(value, figures, name))  # type: ignore[arg-type]
        else:
            body.append(render[kind](value))
    if not body:
        raise DemoError(NOTHING)
    script = f"<script>{_plotly_js()}</script>" if figures else ""
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style>{script}</head><body><h1>{html.escape(title)}</h1>{''.join(body)}"
            f'<p class="note">Exported from the Tiny Transformers demo on {stamp}.'
            "</p></body></html>\n")


def write_page(title: str, parts: list[tuple[str, object]], name: str = "explanation") -> Path:
    """`page` written to a fresh file under EXPORT_DIR, for the browser to download."""
    EXPORT_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".html", prefix=f"{name}-", dir=EXPORT_DIR, delete=False,
                                     encoding="utf-8") as f:
        f.write(page(title, parts, name))
    return Path(f.name)
