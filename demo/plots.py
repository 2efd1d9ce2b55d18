"""Attention pictures: an interactive Plotly heatmap and an overview of every layer and head.

The heatmap is a `plotly` figure (shown by `gr.Plot`): hovering a cell names the query token,
the key token and the weight, as bertviz's views do. The overview is one picture per layer and
head, drawn with Pillow straight from the weights (30 of them would take seconds with
matplotlib); each is drawn at a size where its token labels are legible, its caption (layer and
head) beside it in the gallery, not inside the picture.

Both use a square-root colour scale: a few large weights (the first token often takes all of its
own row) would otherwise squash every other weight into the darkest colour.
"""

import functools
import html
from pathlib import Path

import numpy as np

from demo.attention import AttentionResult
from demo.inputs import read_number

MEAN = -1  # "head" value meaning the mean over heads
VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b",
           "#fde725"]
MASKED_RGB = (255, 255, 255)  # what the model could not look at: blank
CELL = 14  # pixels per cell in the overview pictures, enough for an 11 px label per row
FONT_SIZE = 11
MARGIN = 4  # white pixels right of and under an overview picture's cells
LENS_ROW = 17  # pixels per generated token in the logit lens (the app shows it in a scroll box)
FONTS = [Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"), Path("/usr/share/fonts/dejavu/DejaVuSans.ttf")]


def future_mask(t_q: int, t_k: int, causal: bool) -> np.ndarray:
    """(T_q, T_k) True where a causal map cannot look (the future, aligned to the end as in the
    model); all False otherwise."""
    if not causal:
        return np.zeros((t_q, t_k), dtype=bool)
    return np.triu(np.ones((t_q, t_k), dtype=bool), k=1 + (t_k - t_q))


def _plotly_text(tokens: list[str]) -> list[str]:
    """Plotly reads a few HTML tags in labels (`<s>` would strike the rest through and vanish):
    tokens are escaped, which it shows as the characters they are."""
    return [html.escape(t, quote=False) for t in tokens]


def select_head(result: AttentionResult, head: object) -> tuple[np.ndarray, str]:
    """The (T_q, T_k) map of one head, or the mean over heads for `MEAN`/None/out of range."""
    h = int(read_number(head, MEAN, low=MEAN, high=result.n_heads))
    if 0 <= h < result.n_heads:
        return result.weights[h], f"head {h + 1} of {result.n_heads}"
    return result.weights.mean(axis=0), f"mean of {result.n_heads} heads"


def heatmap(result: AttentionResult, head: object = MEAN):
    """One attention map: queries down the side, keys along the top; hover shows both tokens and
    the weight."""
    import plotly.graph_objects as go  # on first use: keeps it off the start-up path

    weights, which = select_head(result, head)
    t_q, t_k = weights.shape
    masked = future_mask(t_q, t_k, result.causal)
    shown = np.where(masked, np.nan, np.sqrt(weights))  # colour: square root; NaN: blank
    hover = np.where(masked, np.nan, weights)
    queries, keys = _plotly_text(result.query_tokens), _plotly_text(result.key_tokens)
    labels = np.array([[[q, k] for k in keys] for q in queries], dtype=object)
    ticks = [0, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0]
    figure = go.Figure(go.Heatmap(
        z=shown, customdata=np.dstack([labels, hover]), colorscale="Viridis", zmin=0.0,
        zmax=max(float(np.sqrt(weights.max())), 1e-3), xgap=1, ygap=1, hoverongaps=False,
        hovertemplate="query: %{customdata[0]}<br>key: %{customdata[1]}<br>weight: %{customdata[2]:.3f}"
                      "<extra></extra>",
        colorbar={"title": {"text": "weight"}, "tickvals": np.sqrt(ticks).tolist(),
                  "ticktext": [str(t) for t in ticks]},
    ))
    figure.update_layout(
        # the title on two lines at the top, above the key labels: it fits a phone and nothing covers it
        title={"text": f"{result.title}<br>layer {result.layer + 1}, {which}", "font": {"size": 14},
               "subtitle": {"text": "hover a cell: query, key, weight"}, "yref": "container", "y": 1,
               "yanchor": "top", "pad": {"t": 14}},
        height=min(max(400, 200 + 18 * t_q), 1460), margin={"l": 10, "r": 10, "t": 170, "b": 10},
        plot_bgcolor="white", font={"size": 11},
    )
    figure.update_xaxes(tickvals=list(range(t_k)), ticktext=keys, tickangle=-90, side="top",
                        title_text="attended to (keys)", showgrid=False)
    figure.update_yaxes(tickvals=list(range(t_q)), ticktext=queries, autorange="reversed",
                        title_text="attending (queries)", showgrid=False)
    return figure


@functools.cache
def _palette() -> np.ndarray:
    """(256, 3) uint8: viridis interpolated from its ten stops."""
    stops = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in VIRIDIS], dtype=float)
    x = np.linspace(0, 1, len(stops))
    t = np.linspace(0, 1, 256)
    return np.stack([np.interp(t, x, stops[:, i]) for i in range(3)], axis=1).round().astype(np.uint8)


@functools.cache
def _font():
    from PIL import ImageFont

    for path in FONTS:
        if path.is_file():
            return ImageFont.truetype(str(path), FONT_SIZE)
    return ImageFont.load_default(size=FONT_SIZE)


def _label_strip(labels: list[str], width: int):
    """Labels stacked one per CELL-high row, right-aligned in `width` pixels."""
    from PIL import Image, ImageDraw

    strip = Image.new("RGB", (width, CELL * len(labels)), "white")
    draw = ImageDraw.Draw(strip)
    font = _font()
    for i, label in enumerate(labels):
        draw.text((width - 3, i * CELL + CELL // 2), label, fill="black", font=font, anchor="rm")
    return strip


def _label_width(labels: list[str]) -> int:
    font = _font()
    return min(int(max((font.getlength(label) for label in labels), default=0)) + 8, 160)


def overview(result: AttentionResult) -> list[tuple[object, str]]:
    """One picture per layer and head (layer by layer), each with its token labels, on one shared
    colour scale so that the thumbnails compare: (PIL image, caption) pairs."""
    from PIL import Image

    weights = result.all_weights  # (L, H, T_q, T_k)
    n_layers, n_heads, t_q, t_k = weights.shape
    masked = future_mask(t_q, t_k, result.causal)
    levels = np.sqrt(weights / max(float(weights.max()), 1e-6))  # square-root scale in [0, 1]
    rgb = _palette()[(levels * 255).round().astype(np.int64)]  # (L, H, T_q, T_k, 3)
    rgb[:, :, masked] = MASKED_RGB
    left, top = _label_width(result.query_tokens), _label_width(result.key_tokens)
    rows = _label_strip(result.query_tokens, left)
    columns = _label_strip(result.key_tokens, top).transpose(Image.Transpose.ROTATE_90)  # labels read upwards
    pictures = []
    for layer in range(n_layers):
        for head in range(n_heads):
            canvas = Image.new("RGB", (left + CELL * t_k + MARGIN, top + CELL * t_q + MARGIN), "white")
            cells = Image.fromarray(rgb[layer, head]).resize((CELL * t_k, CELL * t_q), Image.Resampling.NEAREST)
            canvas.paste(cells, (left, top))
            canvas.paste(rows, (0, top))
            canvas.paste(columns, (left, 0))
            pictures.append((canvas, f"layer {layer + 1} · head {head + 1}"))
    return pictures


def lens_figure(view):
    """The logit lens as a grid of layers (columns, embeddings first) by generated tokens (rows,
    one per token, so that a long continuation scrolls rather than shrinks): each cell names the
    layer's likeliest next token and is coloured by its probability; hover lists the top tokens and
    the probability of the token that was generated. `view`: a `demo.lens.LensView`."""
    import plotly.graph_objects as go

    top1 = view.top_probs[..., 0].T  # (N, L+1)
    tokens = _plotly_text(view.tokens)
    tops = [[_plotly_text(cell) for cell in row] for row in view.top_tokens]  # (L+1, N, k)
    text = [[tops[li][j][0] for li in range(len(view.layers))] for j in range(len(tokens))]
    hover = [[f"<b>{view.layers[li]}</b>, before “{tokens[j]}”<br>"
              + "<br>".join(f"{t} {p:.3f}" for t, p in zip(tops[li][j], view.top_probs[li, j], strict=True))
              + f"<br>P(“{tokens[j]}”) = {view.token_probs[li, j]:.3f}"
              for li in range(len(view.layers))] for j in range(len(tokens))]
    figure = go.Figure(go.Heatmap(
        z=top1, text=text, texttemplate="%{text}", textfont={"size": 10}, customdata=hover, colorscale="Viridis",
        zmin=0, zmax=1, xgap=1, ygap=1, hovertemplate="%{customdata}<extra></extra>",
        colorbar={"title": {"text": "top-1 probability"}}))
    figure.update_layout(
        title={"text": "Logit lens: what each layer would predict next", "font": {"size": 14}},
        height=130 + LENS_ROW * len(tokens), margin={"l": 10, "r": 10, "t": 100, "b": 10}, plot_bgcolor="white",
        font={"size": 10})
    figure.update_xaxes(tickvals=list(range(len(view.layers))), ticktext=view.layers, side="top",
                        title_text="layer (the last is the model's own prediction)", showgrid=False)
    figure.update_yaxes(tickvals=list(range(len(tokens))), ticktext=tokens, autorange="reversed",
                        title_text="generated token (the prediction made just before it)", showgrid=False)
    return figure


def reliability_figure(result: dict):
    """The reliability diagram of `benchmarks/calibration.py`'s JSON: per confidence bin, accuracy
    against mean confidence, at T = 1 and at the fitted T (a calibrated model lies on the diagonal)."""
    import plotly.graph_objects as go

    figure = go.Figure(go.Scatter(x=[0.5, 1], y=[0.5, 1], mode="lines", name="calibrated",
                                  line={"dash": "dot", "color": "#888"}))
    for key in ("before", "after"):
        part = result[key]
        bins = [b for b in part["reliability"] if b["count"]]
        figure.add_trace(go.Scatter(
            x=[b["confidence"] for b in bins], y=[b["accuracy"] for b in bins], mode="lines+markers",
            name=f"T = {part['temperature']:.2f}: ECE {part['ece']:.3f}",
            customdata=[b["count"] for b in bins],
            hovertemplate="confidence %{x:.3f}<br>accuracy %{y:.3f}<br>%{customdata} reviews<extra></extra>"))
    figure.update_layout(title={"text": f"Reliability of the sentiment model<br>on the {result['measured_on']}, "
                                        f"{result['bins']} bins", "font": {"size": 13}},  # two lines fit a phone
                         height=380, margin={"l": 10, "r": 10, "t": 60, "b": 10},
                         legend={"x": 0.99, "xanchor": "right", "y": 0.03, "yanchor": "bottom"})  # under the curves
    figure.update_xaxes(title_text="confidence (the probability shown)", range=[0.5, 1])
    figure.update_yaxes(title_text="accuracy", range=[0, 1.02])
    return figure


TOUR_COLUMNS = 16  # a tour heatmap's columns shown until the visitor asks for every one
TOUR_BARS = 15  # a tour bar chart's largest values shown until the visitor asks for every one


def tour_panel_figure(panel, show_all: bool = False, numbers: bool = False):
    """One picture of a tour step (`demo.tour.Panel`): a heatmap, its first `TOUR_COLUMNS` columns
    unless `show_all` (values on hover; written in the cells when they fit, up to `TOUR_COLUMNS`
    columns with `numbers`: the toy's worked-example style), or bars, the `TOUR_BARS` largest unless
    `show_all` (then every value, in id order). No colour bar (it took half a phone's width): the
    caption says what the colours mean; the title is left-aligned, clear of Plotly's toolbar at the
    top right."""
    import plotly.graph_objects as go

    if panel.kind == "bars":
        return _tour_bars(panel, show_all)
    values = panel.values
    rows, cols = values.shape
    shown = cols if show_all else min(cols, TOUR_COLUMNS)
    z = values[:, :shown].astype(float)
    if panel.masked is not None:
        z = np.where(panel.masked[:, :shown], np.nan, z)
    by_token = bool(panel.columns)  # columns are keys (tokens), else dimensions
    weights = panel.kind == "weights"
    written = shown <= (TOUR_COLUMNS if numbers else 8) and rows <= 16  # a small map shows its numbers anyway
    top = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
    hover = ("query: %{customdata[0]}<br>key: %{customdata[1]}" if by_token else
             "token: %{customdata[0]}<br>dimension: %{customdata[1]}") + "<br>value: %{z:.4f}<extra></extra>"
    row_labels = _plotly_text(panel.rows)
    col_labels = _plotly_text(panel.columns[:shown]) if by_token else [str(i) for i in range(shown)]
    custom = np.array([[[r, c] for c in col_labels] for r in row_labels], dtype=object)
    figure = go.Figure(go.Heatmap(
        z=z, customdata=custom, hovertemplate=hover, hoverongaps=False, showscale=False, xgap=1 if shown <= 64 else 0,
        ygap=1, colorscale="Viridis" if weights else "RdBu_r", zmin=0 if weights else -top, zmax=1 if weights else top,
        texttemplate="%{z:.2f}" if written else None, textfont={"size": 9}))
    _tour_layout(figure, panel.name, 70 + 22 * rows + (60 if by_token else 30),
                 f"the first {shown} of {cols} columns" if shown < cols else "")
    figure.update_yaxes(tickvals=list(range(rows)), ticktext=row_labels, autorange="reversed", showgrid=False)
    if by_token:
        figure.update_xaxes(tickvals=list(range(shown)), ticktext=col_labels, tickangle=-60, showgrid=False)
    else:
        figure.update_xaxes(title_text="dimension", showgrid=False, dtick=1 if shown <= TOUR_COLUMNS else None)
    return figure


def _tour_bars(panel, show_all: bool):
    import plotly.graph_objects as go

    values, labels = panel.values.astype(float), _plotly_text(panel.rows)
    if show_all and len(values) > TOUR_BARS:  # every value, by id: the whole distribution's shape
        figure = go.Figure(go.Bar(x=list(range(len(values))), y=values, customdata=labels, marker_color="#2563eb",
                                  hovertemplate="id %{x}: %{customdata}<br>%{y:.4f}<extra></extra>"))
        figure.update_xaxes(title_text="token id")
        height = 320
    else:
        order = np.argsort(-values)[:TOUR_BARS]
        figure = go.Figure(go.Bar(
            x=values[order], y=list(range(len(order))), orientation="h", marker_color="#2563eb",
            text=[f"{values[i]:.3f}" for i in order], textposition="outside", cliponaxis=False,
            customdata=[labels[i] for i in order], hovertemplate="%{customdata}: %{x:.4f}<extra></extra>"))
        figure.update_yaxes(tickvals=list(range(len(order))), ticktext=[labels[i] for i in order], autorange="reversed")
        height = 90 + 24 * len(order)
    _tour_layout(figure, panel.name, height)
    return figure


def _tour_layout(figure, title: str, height: int, subtitle: str = "") -> None:
    """The title left-aligned under the band where Plotly's toolbar appears (top right, 25 px high), so that
    the toolbar never covers it on a phone; a subtitle on a line of its own (a phone is too narrow for
    both on one); room on the right for bar values."""
    top = 84 if subtitle else 64
    title = {"text": html.escape(title, quote=False), "x": 0, "xanchor": "left", "font": {"size": 13},
             "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 30},
             "subtitle": {"text": subtitle, "font": {"size": 11}}}
    figure.update_layout(title=title, height=height + top - 40, margin={"l": 10, "r": 40, "t": top, "b": 10},
                         plot_bgcolor="white", font={"size": 11})
