"""The Chat tab's "how was this token sampled?" panel: for one step of the last continuation, the
model's distribution, the same after the temperature, what top-k and top-p removed, and the
renormalised distribution the token was drawn from, with the drawn token's rank."""

import html

import gradio as gr

from demo import plots
from demo.serving import DemoService, failure
from demo.tabs import export_panel
from demo.tabs.common import bind, lenient, notice_markdown
from demo.views.sampling import SamplingView, sampling_view

SAMPLING_INTRO = ("### How was this token sampled?\n"
                  "The table's probability is the model's own (temperature 1, nothing removed). The generator "
                  "divides the scores by the temperature, removes every token outside the top-k and outside the "
                  "top-p nucleus, renormalises what is left, and draws from that. Pick a step (or click its row "
                  "in the table) to see each stage.")
VIEW_HEADERS = ["rank", "token", "model (T = 1)", "after temperature", "removed by", "sampled from (renormalised)"]


def sampling_figure(view: SamplingView):
    """Bars per token (most likely first): the model's probability, after the temperature, and the
    distribution the draw used; removed tokens have no third bar, the drawn one is marked."""
    import plotly.graph_objects as go

    labels = [html.escape(f"{r.token}{' ◀ drawn' if r.drawn else ''}", quote=False) for r in view.rows]
    figure = go.Figure([
        go.Bar(name="model (T = 1)", x=labels, y=[r.model for r in view.rows], marker_color="#94a3b8"),
        go.Bar(name=f"after temperature {view.config.temperature:g}", x=labels, y=[r.tempered for r in view.rows],
               marker_color="#60a5fa"),
        go.Bar(name="sampled from (after top-k / top-p, renormalised)", x=labels,
               y=[r.sampled for r in view.rows], marker_color=["#dc2626" if r.drawn else "#16a34a" for r in view.rows],
               customdata=[r.removed_by or "kept" for r in view.rows],
               hovertemplate="%{x}: %{y:.4f} (%{customdata})<extra></extra>"),
    ])
    plots.titled(figure, f"Step {view.step}: the drawn token is<br>rank {view.drawn_rank} under the model")
    figure.update_layout(barmode="group", height=440, margin={"l": 10, "r": 10, "b": 10}, plot_bgcolor="white",
                         legend={"orientation": "h", "y": -0.35}, yaxis_title="probability")
    figure.update_xaxes(tickangle=-45)
    return figure


def show(service: DemoService, generated, step, settings):
    """The figure, the table and a summary of one step's sampling."""
    try:
        view = sampling_view(service, generated, step, *(settings or (0.8, None, None)))
    except Exception as e:
        return None, None, failure(e)
    c = view.config
    filters = ", ".join(f for f in (f"top-k {c.top_k}" if c.top_k else "", f"top-p {c.top_p:g}" if c.top_p else "")
                        if f) or "no filter"
    summary = (f"**Step {view.step}**: temperature {c.temperature:g}, {filters}. Top-k removed "
               f"{view.removed_by_top_k:,} tokens, top-p {view.removed_by_top_p:,} more; the draw chose among "
               f"**{view.kept:,}**. The drawn token is rank **{view.drawn_rank}** under the model.")
    rows = [[r.rank, r.token + (" ◀" if r.drawn else ""), round(r.model, 4), round(r.tempered, 4),
             r.removed_by or "—", round(r.sampled, 4)] for r in view.rows]
    return sampling_figure(view), rows, notice_markdown(view.notices) + "\n\n" + summary


def record(temperature, top_k, top_p):
    """The sampling settings of the continuation just finished (the sliders may move afterwards)."""
    return [temperature, top_k, top_p]


def pick_row(evt: gr.SelectData):
    """A click on the chat table's row: its step number."""
    return evt.index[0] + 1 if isinstance(evt.index, list | tuple) else gr.skip()


def build(service: DemoService, compute: dict, generated: gr.State, temperature, top_k, top_p,
          table: gr.Dataframe) -> list[gr.Component]:
    """The panel under the chat's table; `generated` holds the last continuation's token ids. Returns
    its views (figure, table, summary), for the chat to empty when the reply they describe goes."""
    used = gr.State(None)  # the sampling settings `generated` was made with
    with gr.Accordion("How was this token sampled?", open=False):
        gr.Markdown(SAMPLING_INTRO)
        with gr.Row():
            step = lenient(gr.Number(value=1, precision=0, label="Step", minimum=1))
            button = gr.Button("Show the sampling of this step", elem_id="sampling-show")
        summary = gr.Markdown(elem_id="sampling-summary")
        plot = gr.Plot(label="The step's distribution, stage by stage", show_label=False,
                       elem_id="sampling-plot")
        export_panel.image_buttons(plot)
        view_table = gr.Dataframe(headers=VIEW_HEADERS, label="The most likely tokens (and the drawn one)",
                                  interactive=False, max_height=320, elem_id="sampling-table")
        export_panel.html_button("How a token was sampled", "sampling",
                                 [("markdown", summary), ("figure", plot), ("table", view_table)])
    generated.change(record, [temperature, top_k, top_p], used, queue=False, api_visibility="private")
    outputs = [plot, view_table, summary]
    button.click(bind(show, service), [generated, step, used], outputs, api_name="sampling_step",
                 api_visibility="private", **compute)
    table.select(pick_row, None, step, queue=False, api_visibility="private").then(
        bind(show, service), [generated, step, used], outputs, api_visibility="private", **compute)
    return outputs
