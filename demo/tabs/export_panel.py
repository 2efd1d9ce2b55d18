"""Download buttons: every Plotly figure as PNG and SVG (drawn by the browser from the plot on
screen, with the plotly.js Gradio already loaded), and a view's explanation as one standalone
HTML file (`demo.export`), built from the values on screen, so nothing is recomputed."""

import gradio as gr

from demo import export
from demo.serving import failure
from demo.tabs import browser


def image_buttons(plot: gr.Plot) -> None:
    """PNG and SVG buttons under a `gr.Plot` (which needs an `elem_id`); they run in the browser only."""
    if not plot.elem_id:
        raise ValueError("image_buttons needs a plot with an elem_id")
    with gr.Row(elem_classes=["export-buttons"]):
        for fmt in ("png", "svg"):
            button = gr.Button(f"Download {fmt.upper()}", size="sm", elem_id=f"{plot.elem_id}-{fmt}")
            button.click(None, None, None, js=browser.call("download_image", plot.elem_id, fmt), queue=False)


def _value(kind: str, value):
    """A component's value as `demo.export.page` reads it (a plot arrives as Gradio's PlotData)."""
    if kind == "figure":
        plot = getattr(value, "plot", None) or (value.get("plot") if isinstance(value, dict) else None)
        return plot if isinstance(plot, str) else None
    if kind == "table" and hasattr(value, "to_dict"):  # a pandas DataFrame
        return {"headers": list(value.columns), "data": value.values.tolist()}
    if kind == "label" and isinstance(value, str | int | float):  # a label without confidences
        return {str(value): 1.0}
    return value


def html_button(title: str, name: str, parts: list[tuple[str, gr.components.Component]]) -> None:
    """An "Export as HTML" button and the file it makes from the components in `parts`, (kind,
    component) in page order, kinds as `demo.export.page` takes them. `name` names the file and the
    button's elem_id (`export-<name>`), so it must be unique on the page."""
    with gr.Row(elem_classes=["export-buttons"]):
        button = gr.Button("Export as HTML (opens offline)", size="sm", elem_id=f"export-{name}")
        file = gr.File(label="Standalone HTML", visible=False, elem_id=f"export-{name}-file")
        notice = gr.Markdown()

    def make(*values):
        try:
            shown = [(kind, _value(kind, v)) for (kind, _), v in zip(parts, values, strict=True)]
            return gr.update(value=str(export.write_page(title, shown, name)), visible=True), ""
        except Exception as e:
            return gr.update(visible=False), failure(e)

    button.click(make, [c for _, c in parts], [file, notice], queue=False, api_visibility="private")

