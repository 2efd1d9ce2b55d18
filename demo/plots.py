"""The app's pictures, and the one colour convention they share.

Signed scores (attributions, agreement, a head's effect) are blue where they push towards the
prediction (the label, the token written) and orange where they push against, deeper for stronger:
`score_colour`, in every view and in the exported pages. Blue and orange stay apart for colour-blind
visitors, and neither reads as "good" or "bad" (praise in a negative review may push against its label).

Attention: an interactive Plotly heatmap (hovering a cell names the query token, the key token and
the weight, as bertviz's views do) and an overview of every layer and head, one picture each, drawn
with Pillow straight from the weights (30 of them would take seconds with matplotlib), each at a size
where its token labels are legible, its caption beside it in the gallery. Both use one square-root
scale from weight 0 to 1, so that every map reads alike: a few large weights (the first token often
takes most of a row) would otherwise squash every other weight into the darkest colour.

The logit lens is an HTML table rather than a figure: one cell of text per layer and token (hundreds
of them) drew in seconds as Plotly's SVG text, and a table keeps its headings in view by CSS alone.
"""

import functools
import html
from pathlib import Path

import numpy as np

from demo.serving import read_number
from demo.views.attention import AttentionResult
from demo.views.tour.capture import MAX_TOUR_TOKENS

MEAN = -1  # "head" value meaning the mean over heads
FOR_RGB = (37, 99, 235)  # blue: pushes towards the prediction
AGAINST_RGB = (234, 88, 12)  # orange: pushes against it
MAX_ALPHA = 0.6  # the strongest score's shade: black text stays readable on it
# Plotly's toolbar appears over a figure's top right corner on hover: titles start below its strip
TOOLBAR = 44
TITLE_LINE = 20  # pixels per title line
VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b",
           "#fde725"]
MASKED_RGB = (255, 255, 255)  # what the model could not look at: blank
CELL = 14  # pixels per cell in the overview pictures, enough for an 11 px label per row
FONT_SIZE = 11
MARGIN = 4  # white pixels right of and under an overview picture's cells
LENS_FLOOR = 1e-4  # the logit lens's colour scale: log10 of the probability, from 0.01% (palest) to 1
LENS_HEIGHT = 560  # the lens's scroll box, in pixels: a long reply scrolls under its headings
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


def score_colour(score: float | None, alpha: float = MAX_ALPHA) -> str:
    """The app's colour of a signed score in [-1, 1] (see the module doc); no score: no colour."""
    if score is None:
        return "transparent"
    r, g, b = FOR_RGB if score >= 0 else AGAINST_RGB
    return f"rgba({r},{g},{b},{min(abs(score), 1.0) * alpha:.2f})"


def diverging_scale() -> list[list]:
    """The convention as a Plotly colour scale from -1 to 1: orange, white, blue."""
    return [[0.0, score_colour(-1, 1.0)], [0.5, "white"], [1.0, score_colour(1, 1.0)]]


def titled(figure, text: str, subtitle: str | None = None, size: int = 13):
    """`figure` with its title below the toolbar's strip and the top margin to hold it. Plotly never
    wraps a title: a long one takes `<br>`s, so that it fits a phone's 390 px."""
    lines = text.count("<br>") + 1 + (0 if subtitle is None else subtitle.count("<br>") + 1)
    title = {"text": text, "font": {"size": size}, "x": 0, "xref": "container", "xanchor": "left",
             "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": TOOLBAR, "l": 12}}
    if subtitle is not None:
        title["subtitle"] = {"text": subtitle, "font": {"size": 11}}
    figure.update_layout(title=title, margin={"t": TOOLBAR + TITLE_LINE * lines + 10})
    return figure


def shading_html(segments: list[tuple[str, float | None]], heading: str, prediction: str) -> str:
    """Text shaded by its tokens' scores in [-1, 1] (None: unscored, plain), under a heading and a
    legend drawn in the same colours; hovering a token shows its score. Styles are inline, so an
    exported page shows the same."""
    towards, against = (html.escape(f"pushes towards {prediction}"), html.escape("pushes against"))
    swatch = 'style="background:{};padding:0 4px;border-radius:3px"'
    legend = (f'<span {swatch.format(score_colour(1))}>blue</span> {towards} · '
              f'<span {swatch.format(score_colour(-1))}>orange</span> {against}; deeper = stronger; '
              "hover a token for its score")
    spans = []
    for text, score in segments:
        if score is None:
            spans.append(f"<span>{html.escape(text)}</span>")
        else:
            spans.append(f'<span class="token" style="background:{score_colour(score)};border-radius:3px" '
                         f'title="{html.escape(text.strip(), quote=True)}: {score:+.2f}">{html.escape(text)}</span>')
    return (f'<div class="shading"><div style="font-weight:600">{html.escape(heading)}</div>'
            f'<div style="font-size:.85em;margin:2px 0 6px">{legend}</div>'
            f'<div style="white-space:pre-wrap;line-height:1.9">{"".join(spans)}</div></div>')


def select_head(result: AttentionResult, head: object) -> tuple[np.ndarray, str]:
    """The (T_q, T_k) map of one head, or the mean over heads for `MEAN`/None/out of range."""
    h = int(read_number(head, MEAN, low=MEAN, high=result.n_heads))
    if 0 <= h < result.n_heads:
        return result.weights[h], f"head {h + 1} of {result.n_heads}"
    return result.weights.mean(axis=0), f"mean of {result.n_heads} heads"


KEY_LABELS = 12  # a map beside others labels at most this many keys: upright, 12 stay apart in a phone's ~180 px


def heatmap(result: AttentionResult, head: object = MEAN, where: str | None = None, key_labels: int | None = None):
    """One attention map: queries down the side, keys along the top; hover shows both tokens and
    the weight. `where`: the title's second line, when the map is not one of `result`'s model's
    layers and heads as they are counted there (default: "layer 2, head 1 of 4"). `key_labels`: label
    at most this many keys, every k-th back from the last (a narrow map's labels overlapped on a phone,
    tilted or not; a self-attention map's rows name every token), and the subtitle says so."""
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
        z=shown, customdata=np.dstack([labels, hover]), colorscale="Viridis", zmin=0.0, zmax=1.0, xgap=1, ygap=1,
        hoverongaps=False,
        hovertemplate="query: %{customdata[0]}<br>key: %{customdata[1]}<br>weight: %{customdata[2]:.3f}"
                      "<extra></extra>",
        colorbar={"title": {"text": "weight"}, "tickvals": np.sqrt(ticks).tolist(),
                  "ticktext": [str(t) for t in ticks], "thickness": 12},
    ))
    # the title on two lines at the top, above the key labels: it fits a phone and nothing covers it
    where = where or f"layer {result.layer + 1}, {which}"
    step = -(-t_k // key_labels) if key_labels else 1
    labelled = list(range(t_k - 1, -1, -step))[::-1]
    hint = "hover a cell: query, key, weight"
    if step > 1:
        hint = (f"hover or tap a cell: query, key, weight<br>one key in {step} labelled"
                + ("; the rows name each" if result.query_tokens == result.key_tokens else ""))
    titled(figure, f"{result.title}<br>{where}", hint, 14)
    figure.update_layout(height=min(max(420, 220 + 18 * t_q), 1480), plot_bgcolor="white", font={"size": 11},
                         margin={"l": 10, "r": 10, "t": 190, "b": 10})  # the key labels, rotated, under the title
    figure.update_xaxes(tickvals=labelled, ticktext=[keys[i] for i in labelled], tickangle=-90, side="top",
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
    """One picture per layer and head (layer by layer), each with its token labels, on the heatmap's
    colour scale (square root, weight 0 to 1), so that every picture compares: (PIL image, caption) pairs."""
    from PIL import Image

    weights = result.all_weights  # (L, H, T_q, T_k)
    n_layers, n_heads, t_q, t_k = weights.shape
    masked = future_mask(t_q, t_k, result.causal)
    levels = np.sqrt(np.clip(weights, 0.0, 1.0))  # square-root scale in [0, 1]
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


def lens_colour(probability: float) -> tuple[str, str]:
    """(background, text colour) of a logit lens cell: blue, deeper the more probability the layer gives
    the token written, on a log scale from `LENS_FLOOR` to 1; white text on the deep half."""
    level = (np.log10(max(probability, LENS_FLOOR)) - np.log10(LENS_FLOOR)) / -np.log10(LENS_FLOOR)
    return score_colour(level, 1.0), "white" if level > 0.55 else "black"


def lens_html(view) -> str:
    """The logit lens as a table: one row per generated token, one column per layer (embeddings
    first, the model's output last); each cell names the layer's likeliest next token, bold where it
    is already the token written, coloured by the probability the layer gives that token (not by its
    own guess's, which puts the eye on the first columns' echo of the input); hover lists the layer's
    top tokens. Headings stay in view as the box scrolls. `view`: a `demo.views.lens.LensView`."""
    sticky = "position:sticky;background:white;border:0;z-index:{}"
    head = "".join(f'<th style="{sticky.format(1)};top:0;padding:2px 4px;font-weight:600">{html.escape(name)}'
                   f'{"<br>(output)" if i == len(view.layers) - 1 else ""}</th>' for i, name in enumerate(view.layers))
    rows = []
    for j, token in enumerate(view.tokens):
        cells = []
        for li, layer in enumerate(view.layers):
            guess, p = view.top_tokens[li][j][0], float(view.token_probs[li, j])
            background, colour = lens_colour(p)
            tops = ", ".join(f"{t} {q:.3f}" for t, q in zip(view.top_tokens[li][j], view.top_probs[li, j], strict=True))
            hover = f"{layer}, before “{token}”: {tops}; P(“{token}”) = {p:.4f}"
            weight = "font-weight:700;text-decoration:underline" if guess == token else ""
            cells.append(f'<td title="{html.escape(hover, quote=True)}" style="background:{background};color:{colour};'
                         f'{weight};border:0;padding:1px 4px;max-width:7em;overflow:hidden;text-overflow:ellipsis">'
                         f"{html.escape(guess)}</td>")
        rows.append(f'<tr><th style="{sticky.format(1)};left:0;text-align:right;padding:1px 4px;font-weight:400">'
                    f"{html.escape(token)}</th>{''.join(cells)}</tr>")
    floor = f"{LENS_FLOOR:.2%}".replace(".00%", "%")
    legend = (f'<div style="font-size:.85em;margin:4px 0">Colour: the probability each layer gives the token written, '
              f'<span style="display:inline-block;width:90px;height:10px;vertical-align:middle;border:1px solid #ccc;'
              f'background:linear-gradient(to right,{lens_colour(LENS_FLOOR)[0]},{lens_colour(1.0)[0]})"></span> '
              f"{floor} to 100% (log scale). <b><u>Bold</u></b>: that layer's best guess is already the token "
              "written. Hover a cell for the layer's top 5.</div>")
    corner = f'<th style="{sticky.format(2)};top:0;left:0;text-align:right;padding:2px 4px">token written</th>'
    return (f'<div class="lens">{legend}<div class="lens-box" style="max-height:{LENS_HEIGHT}px;overflow:auto">'
            f'<table style="border-collapse:separate;border-spacing:1px;font-size:12px;white-space:nowrap;margin:0">'
            f"<thead><tr>{corner}{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div></div>")


def reliability_figure(result: dict):
    """The reliability diagram of `benchmarks/calibration.py`'s JSON: per confidence bin, accuracy
    against mean confidence, at T = 1 and at the fitted T (a calibrated model lies on the diagonal);
    and, where the JSON has them, the one-line texts at the fitted T (what a visitor mostly types:
    the fit saw full reviews only)."""
    import plotly.graph_objects as go

    figure = go.Figure(go.Scatter(x=[0.5, 1], y=[0.5, 1], mode="lines", name="calibrated",
                                  line={"dash": "dot", "color": "#888"}))
    curves = [(result[key], "", "reviews") for key in ("before", "after")]
    if "short_text" in result:
        curves.append((result["short_text"]["after"], "one-line texts, ", "first or last sentences"))
    for part, what, unit in curves:
        bins = [b for b in part["reliability"] if b["count"]]
        figure.add_trace(go.Scatter(
            x=[b["confidence"] for b in bins], y=[b["accuracy"] for b in bins], mode="lines+markers",
            name=f"{what}T = {part['temperature']:.2f}: ECE {part['ece']:.3f}",
            customdata=[b["count"] for b in bins],
            hovertemplate=f"confidence %{{x:.3f}}<br>accuracy %{{y:.3f}}<br>%{{customdata}} {unit}<extra></extra>"))
    titled(figure, "When the sentiment model says 80%,<br>is it right 80% of the time?",
           f"reliability on the {result['measured_on']}, {result['bins']} bins")
    figure.update_layout(height=400, margin={"l": 10, "r": 10, "b": 10},
                         legend={"x": 0.99, "xanchor": "right", "y": 0.03, "yanchor": "bottom"})  # under the curves
    figure.update_xaxes(title_text="confidence (the probability shown)", range=[0.5, 1])
    figure.update_yaxes(title_text="accuracy", range=[0, 1.02])
    return figure


def training_curve_figure(history: list[dict], title: str):
    """A run's training curve from its metrics.json `history`: train and validation loss against step
    (log scale when the loss falls tenfold), validation accuracy on a second axis where the run
    measured it; the legend under the plot, clear of every curve; hover or tap a point for its value."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    steps = [h["step"] for h in history]
    accuracy = any("val_accuracy" in h for h in history)
    figure = make_subplots(specs=[[{"secondary_y": accuracy}]])
    train = [(h["step"], h["train_loss"]) for h in history if h.get("train_loss") is not None]
    if train:
        figure.add_trace(go.Scatter(x=[s for s, _ in train], y=[v for _, v in train], mode="lines",
                                    name="train loss", line={"color": "#2563eb"}))
    figure.add_trace(go.Scatter(x=steps, y=[h.get("val_loss") for h in history], mode="lines+markers",
                                name="validation loss", line={"color": "#ea580c"}, marker={"size": 4}))
    if accuracy:
        figure.add_trace(go.Scatter(x=steps, y=[h.get("val_accuracy") for h in history], mode="lines+markers",
                                    name="validation accuracy", line={"color": "#16a34a", "dash": "dash"},
                                    marker={"size": 4, "symbol": "square"}), secondary_y=True)
        figure.update_yaxes(title_text="accuracy", range=[0, 1.02], secondary_y=True, showgrid=False)
    losses = [v for _, v in train] + [h["val_loss"] for h in history if h.get("val_loss") is not None]
    log = bool(losses) and min(losses) > 0 and max(losses) / min(losses) > 10
    figure.update_yaxes(title_text="loss (nats per token)", type="log" if log else "linear", secondary_y=False)
    figure.update_xaxes(title_text="step")
    titled(figure, title)
    figure.update_layout(height=380, margin={"l": 10, "r": 10, "b": 10}, hovermode="x unified",
                         legend={"orientation": "h", "x": 0, "xanchor": "left", "y": -0.25, "yanchor": "top"})
    return figure


def curves_figure(series: list[tuple[str, list, dict]], title: str, y_title: str, x_title: str = "training step",
                  height: int = 340):
    """Curves over training: one line per (name, [[x, y], …], its Plotly line style), markers at the
    points measured; the legend under the plot; hover or tap a point for its value."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for name, points, line in series:
        figure.add_scatter(x=[x for x, _ in points], y=[y for _, y in points], mode="lines+markers", name=name,
                           line=line, marker={"size": 4},
                           hovertemplate=f"{html.escape(name)}<br>%{{x:,}}: %{{y:.3f}}<extra></extra>")
    titled(figure, title)
    figure.update_xaxes(title_text=x_title)
    figure.update_yaxes(title_text=y_title)
    figure.update_layout(height=height, margin={"l": 10, "r": 10, "b": 10}, hovermode="x unified",
                         legend={"orientation": "h", "x": 0, "xanchor": "left", "y": -0.3, "yanchor": "top"})
    return figure


def grouped_bars_figure(labels: list[str], series: list[tuple[str, list[float], str]], title: str,
                        height: int = 320):
    """Bars side by side for each label, one colour per (name, values, colour); each bar's value
    written on it, so that a phone needs no hover."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for name, values, colour in series:
        figure.add_bar(x=_plotly_text(labels), y=values, name=name, marker_color=colour,
                       text=[f"{v:.3g}" for v in values], textposition="outside", cliponaxis=False,
                       hovertemplate=f"{html.escape(name)}<br>%{{x}}: %{{y:.4g}}<extra></extra>")
    values = [v for _, vs, _ in series for v in vs]
    log = min(values) > 0 and max(values) / min(values) > 30  # a hundredfold gap: each bar still readable
    figure.update_yaxes(type="log" if log else "linear", title_text="log scale" if log else None,
                        dtick=1 if log else None)  # log: one tick a decade, no unlabelled 2s and 5s
    titled(figure, title)
    figure.update_layout(height=height, barmode="group", margin={"l": 10, "r": 10, "b": 10},
                         legend={"orientation": "h", "x": 0, "xanchor": "left", "y": -0.2, "yanchor": "top"})
    return figure


TOUR_COLUMNS = 16  # a tour heatmap's dimensions (columns) shown until the visitor asks for every one
TOUR_BARS = 15  # a tour bar chart's largest values shown until the visitor asks for every one
COLOUR_BAR = 54  # pixels under a heatmap for its horizontal colour scale


def tour_window(panel, show_all: bool = False) -> tuple[slice, slice]:
    """The rows and columns of a heatmap the tour draws: every one with `show_all`; else the last
    `MAX_TOUR_TOKENS` rows (the tokens nearest the prediction, a review's end and its pads: a model reads a
    whole context, a picture of it stays legible), the same last keys of a map of tokens against tokens
    (attention, scores: the diagonal of the rows drawn in view) and the first `TOUR_COLUMNS` dimensions of
    a vector map."""
    rows, cols = panel.values.shape
    if show_all:
        return slice(0, rows), slice(0, cols)
    last = slice(max(rows - MAX_TOUR_TOKENS, 0), rows)
    if panel.columns:
        return last, slice(max(cols - MAX_TOUR_TOKENS, 0), cols)
    return last, slice(0, min(cols, TOUR_COLUMNS))


def window_words(panel, show_all: bool = False) -> str:
    """What part of a heatmap `tour_window` draws, in words ("" when all of it): "tokens 9 to 40 of 40
    (rows and keys)", "the first 16 of 64 columns"."""
    (rows, cols), (r, c) = panel.values.shape, tour_window(panel, show_all)
    said = []
    if r.start > 0:
        said.append(f"tokens {r.start + 1} to {rows} of {rows}" + (" (rows and keys)" if panel.columns else ""))
    elif c.start > 0:  # more keys than queries (cross-attention): the last keys
        said.append(f"keys {c.start + 1} to {cols} of {cols}")
    if not panel.columns and c.stop < cols:
        said.append(f"the first {c.stop} of {cols} columns")
    return "; ".join(said)


def tour_panel_figure(panel, show_all: bool = False, numbers: bool = False):
    """One picture of a tour step (`demo.views.tour.Panel`): a heatmap (its rows and columns: `tour_window`,
    said in its subtitle; values on hover or tap, written in the cells when they fit, up to `TOUR_COLUMNS`
    columns with `numbers`: the toy's worked-example style; every number also in `tour_numbers_html`), with
    its colour scale under it (horizontal: a vertical one took half a phone's width), or bars, the
    `TOUR_BARS` largest unless `show_all` (then every value, in id order). The title is left-aligned, clear
    of Plotly's toolbar at the top right."""
    import plotly.graph_objects as go

    if panel.kind == "bars":
        return _tour_bars(panel, show_all)
    r, c = tour_window(panel, show_all)
    z = panel.values[r, c].astype(float)
    if panel.masked is not None:
        z = np.where(panel.masked[r, c], np.nan, z)
    rows, shown = z.shape
    by_token = bool(panel.columns)  # columns are keys (tokens), else dimensions
    weights = panel.kind == "weights"
    written = shown <= (TOUR_COLUMNS if numbers else 8) and rows <= 16  # a small map shows its numbers anyway
    top = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
    hover = ("query: %{customdata[0]}<br>key: %{customdata[1]}" if by_token else
             "token: %{customdata[0]}<br>dimension: %{customdata[1]}") + "<br>value: %{z:.4f}<extra></extra>"
    row_labels = _plotly_text(panel.rows[r])
    col_labels = _plotly_text(panel.columns[c]) if by_token else [str(i) for i in range(c.start, c.stop)]
    custom = np.array([[[q, k] for k in col_labels] for q in row_labels], dtype=object)
    scale = {"orientation": "h", "thickness": 10, "len": 1, "x": 0, "xanchor": "left", "y": 0, "yanchor": "bottom",
             "yref": "container", "ypad": 8, "tickfont": {"size": 10},
             "title": {"text": "weight" if weights else "value (blue < 0 < red)", "side": "right",
                       "font": {"size": 10}}}
    labels = 56 if by_token else 34  # under the cells: the tilted key tokens, or the axis title "dimension"
    figure = go.Figure(go.Heatmap(
        z=z, customdata=custom, hovertemplate=hover, hoverongaps=False, showscale=True, colorbar=scale,
        xgap=1 if shown <= 64 else 0, ygap=1, colorscale="Viridis" if weights else "RdBu_r",
        zmin=0 if weights else -top, zmax=1 if weights else top,
        texttemplate="%{z:.2f}" if written else None, textfont={"size": 9}))
    _tour_layout(figure, panel.name, 70 + 22 * rows + labels + COLOUR_BAR, window_words(panel, show_all),
                 bottom=labels + COLOUR_BAR)
    figure.update_yaxes(tickvals=list(range(rows)), ticktext=row_labels, autorange="reversed", showgrid=False)
    if by_token:
        figure.update_xaxes(tickvals=list(range(shown)), ticktext=col_labels, tickangle=-60, showgrid=False)
    else:
        figure.update_xaxes(title_text="dimension", showgrid=False, dtick=1 if shown <= TOUR_COLUMNS else None)
    return figure


def tour_numbers_html(panels, show_all: bool = False) -> str:
    """Every number of a step's heatmaps as HTML tables (the rows and columns its picture draws), for a
    visitor without a mouse to hover with: each table scrolls sideways inside its box, its row labels kept
    in view; blank where a mask removed the cell."""
    tables = []
    for panel in panels:
        if panel.kind in ("bars", "pieces") or panel.values.ndim != 2:
            continue
        r, c = tour_window(panel, show_all)
        columns = panel.columns[c] if panel.columns else [str(i) for i in range(c.start, c.stop)]
        head = "".join(f"<th>{html.escape(str(name))}</th>" for name in columns)
        body = []
        for i in range(r.start, r.stop):
            cells = "".join(
                "<td></td>" if panel.masked is not None and panel.masked[i, j] else f"<td>{panel.values[i, j]:.3f}</td>"
                for j in range(c.start, c.stop))
            body.append(f"<tr><th>{html.escape(str(panel.rows[i]))}</th>{cells}</tr>")
        part = window_words(panel, show_all)
        more = f" ({part}: tick “Show every number” for all)" if part else ""
        tables.append(f"<figure><figcaption>{html.escape(panel.name)}{more}</figcaption>"
                      f'<div class="tour-table"><table><thead><tr><th></th>{head}</tr></thead>'
                      f"<tbody>{''.join(body)}</tbody></table></div></figure>")
    return "".join(tables)


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


def _tour_layout(figure, title: str, height: int, subtitle: str = "", bottom: int = 10) -> None:
    """The title left-aligned under the band where Plotly's toolbar appears (top right, 25 px high), so that
    the toolbar never covers it on a phone; a subtitle on a line of its own (a phone is too narrow for
    both on one); room on the right for bar values."""
    top = 84 if subtitle else 64
    title = {"text": html.escape(title, quote=False), "x": 0, "xanchor": "left", "font": {"size": 13},
             "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 30},
             "subtitle": {"text": subtitle, "font": {"size": 11}}}
    figure.update_layout(title=title, height=height + top - 40, margin={"l": 10, "r": 40, "t": top, "b": bottom},
                         plot_bgcolor="white", font={"size": 11})
