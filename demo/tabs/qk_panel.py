"""The Attention tab's "query · key" panel: for the chosen layer and head and one query token, the
scaled dot products q·k/√d_k with every key, and the softmax that makes them the attention weights."""

import html

import gradio as gr

from demo import plots
from demo.serving import DemoService, failure, read_number
from demo.tabs import export_panel
from demo.tabs.common import bind, lenient, notice_markdown
from demo.text import CAUSAL_NOTE
from demo.views.qk import QueryKeyView, query_key

QK_INTRO = ("### Query · key: how a weight comes about\n"
            "A head compares the query vector of one token with the key vector of every token it may see: the "
            "dot product, divided by √d_k, is a score; the softmax of the scores is the row of attention weights. "
            "Uses the layer and head chosen above (the mean over heads has no query: head 1 is shown).")


def qk_figure(view: QueryKeyView):
    """Two bar charts over the keys: the scores before the softmax, and the weights after it."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    keys = [f"{i + 1} {html.escape(t, quote=False)}" for i, t in enumerate(view.key_tokens)]
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                           subplot_titles=("q·k / √d_k: the scores (a masked key has none)",
                                           "softmax: the attention weights (sum to 1)"))
    figure.add_trace(go.Bar(x=keys, y=view.scores, marker_color="#6366f1", name="score",
                            hovertemplate="%{x}: %{y:.3f}<extra></extra>"), row=1, col=1)
    figure.add_trace(go.Bar(x=keys, y=view.weights, marker_color="#f59e0b", name="weight",
                            hovertemplate="%{x}: %{y:.3f}<extra></extra>"), row=2, col=1)
    plots.titled(figure, f"{view.title}, layer {view.layer + 1}, head {view.head + 1}<br>query "
                         f"“{html.escape(view.query_token, quote=False)}” (token {view.query + 1})")
    figure.update_layout(height=540, showlegend=False, margin={"l": 10, "r": 10, "b": 10}, plot_bgcolor="white")
    figure.update_xaxes(tickangle=-60)
    return figure


def show(service: DemoService, text, kind, layer, head, query):
    """The figure and notices for one head and one query token (1-based; negative: from the end)."""
    notes = []
    try:
        if head in (None, plots.MEAN):
            head = 0
            notes.append("The mean over heads has no query and key vectors: showing head 1.")
        q = read_number(query, -1)
        view = query_key(service, text, kind, layer, head, q - 1 if q >= 1 else min(q, -1))  # 1-based; -1 = the last
    except Exception as e:
        return None, failure(e)
    notes += view.notices
    if kind in ("lm_self", "decoder_self"):
        notes.append(CAUSAL_NOTE.replace("The blank upper triangle is", "A missing score is"))
    return qk_figure(view), notice_markdown(notes)


def build(service: DemoService, compute: dict, text, kind, layer, head) -> None:
    """The panel, reading the Attention tab's text, kind, layer and head."""
    with gr.Accordion("Query · key: how one attention weight is made", open=False):
        gr.Markdown(QK_INTRO)
        with gr.Row():
            query = lenient(gr.Number(value=-1, precision=0, label="Query token (1 = the heatmap's first row, "
                                                                   "-1 = its last)"))
            button = gr.Button("Show q·k")
        notice = gr.Markdown()
        plot = gr.Plot(label="Scores and weights of one query", show_label=False, elem_id="qk-plot")
        export_panel.image_buttons(plot)
        export_panel.html_button("Query · key: how an attention weight is made", "query-key",
                                 [("markdown", notice), ("figure", plot)])
    button.click(bind(show, service), [text, kind, layer, head, query], [plot, notice], api_name="query_key",
                 **compute)

