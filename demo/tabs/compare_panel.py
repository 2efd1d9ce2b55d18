"""The Sentiment tab's "side by side" panel: edit a review, see both predictions, the change of the
probability, and each token's attribution in both versions; minimal-pair presets to start from."""

import html

import gradio as gr

from demo import plots
from demo.serving import DemoService, failure
from demo.tabs import export_panel
from demo.tabs.common import DEFAULT_METHOD, bind, lenient, notice_markdown
from demo.text import METHOD_CHOICES, method_name
from demo.views.compare import MINIMAL_PAIRS, Comparison
from demo.views.compare import compare as compare_reviews

COMPARE_INTRO = ("### Side by side: change a word, see what changes\n"
                 "Two versions of a review: both predictions, and each token's score in both (one explanation "
                 "method, for the first version's label, so the scores subtract). Start from a minimal pair: two "
                 "texts that differ in one thing.")
COMPARE_HEADERS = ["first version", "score", "second version", "score", "difference"]


def compare_figure(comparison: Comparison):
    """Each aligned token: its score in the first and in the second version."""
    import plotly.graph_objects as go

    def label(t):
        a, b = (html.escape(x, quote=False) if x is not None else "∅" for x in (t.a, t.b))
        return a if a == b else f"{a} → {b}"

    labels = [f"{i + 1}. {label(t)}" for i, t in enumerate(comparison.tokens)]
    figure = go.Figure([
        go.Bar(name="first version", x=labels, y=[t.score_a for t in comparison.tokens], marker_color="#94a3b8"),
        go.Bar(name="second version", x=labels, y=[t.score_b for t in comparison.tokens], marker_color="#6366f1"),
    ])
    plots.titled(figure, f"Each token's score for “{comparison.label}”<br>by {method_name(comparison.method)}")
    figure.update_layout(barmode="group", height=440, plot_bgcolor="white", margin={"l": 10, "r": 10, "b": 10},
                         legend={"orientation": "h", "y": -0.4}, yaxis_title="score (above 0: for the label)")
    figure.update_xaxes(tickangle=-50)
    return figure


def compare(service: DemoService, text_a, text_b, method):
    """Both predictions, the figure, the aligned table and a summary."""
    try:
        c = compare_reviews(service, text_a, text_b, method)
    except Exception as e:
        return None, None, None, None, failure(e)
    rows = [[t.a or "", None if t.score_a is None else round(t.score_a, 4), t.b or "",
             None if t.score_b is None else round(t.score_b, 4), round(t.difference, 4)] for t in c.tokens]
    summary = (f"P({c.label}): **{c.probabilities_a[c.label]:.3f}** → **{c.probabilities_b[c.label]:.3f}** "
               f"({c.change:+.3f}). Scores by {method_name(c.method)}, for “{c.label}” in both versions.")
    return c.probabilities_a, c.probabilities_b, compare_figure(c), rows, notice_markdown(c.notices) + "\n\n" + summary


def build(service: DemoService, compute: dict) -> None:
    first = next(iter(MINIMAL_PAIRS.values()))
    with gr.Accordion("Side by side: edit a review and compare", open=False):
        gr.Markdown(COMPARE_INTRO)
        with gr.Row():
            text_a = gr.Textbox(first[0], label="First version", lines=3)
            text_b = gr.Textbox(first[1], label="Second version", lines=3)
        gr.Examples([list(pair) for pair in MINIMAL_PAIRS.values()], inputs=[text_a, text_b],
                    example_labels=list(MINIMAL_PAIRS), label="Minimal pairs")
        with gr.Row():
            method = lenient(gr.Radio(METHOD_CHOICES, value=DEFAULT_METHOD, label="Explanation method"))
            button = gr.Button("Compare", variant="primary")
        summary = gr.Markdown()
        with gr.Row():
            label_a = gr.Label(label="First version", num_top_classes=5)
            label_b = gr.Label(label="Second version", num_top_classes=5)
        plot = gr.Plot(label="Token scores in both versions", show_label=False, elem_id="compare-plot")
        export_panel.image_buttons(plot)
        table = gr.Dataframe(headers=COMPARE_HEADERS, label="Tokens aligned (a token only one version has "
                                                            "stands alone)", interactive=False, max_height=320)
        export_panel.html_button("Two versions of a review, side by side", "compare",
                                 [("markdown", summary), ("label", label_a), ("label", label_b), ("figure", plot),
                                  ("table", table)])
    button.click(bind(compare, service), [text_a, text_b, method], [label_a, label_b, plot, table, summary],
                 api_name="compare_reviews", **compute)
