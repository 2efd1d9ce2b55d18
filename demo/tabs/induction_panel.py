""""Watch an induction head form" (issue 60), in the Watch it learn tab: a 2-layer model and its 1-layer
control trained on text that rewards copying; the loss on the repeated half and the best head's induction
score over the steps, that head's attention at three moments, the sentences that read them, and the lines
of `model/` that let layer 2 read what layer 1 wrote. The computation is `demo.views.induction`; the
figures are drawn when the tab is opened (`build` returns the handler), not with every page."""

import gradio as gr

from demo import plots
from demo.serving import failure
from demo.views.induction import MODELS, NAMES, NO_RUN, InductionView, induction_view
from demo.views.tour.code import listing
from inspection.head_kinds import THRESHOLDS

MOMENTS = 3  # before, during and after the drop
COLOURS = {"2layer": "#2563eb", "1layer": "#ea580c"}
INTRO = (
    "### Watch an induction head form\n"
    "An **induction head** copies: at a token it has seen before, it looks at the token that came right after "
    "that earlier occurrence, and predicts it again. It takes two attention layers: a head in layer 1 writes "
    "each token's previous token into the residual stream, and a head in layer 2 matches the current token "
    "against it (Olsson et al. 2022). Here a 2-layer model and a 1-layer control, both of this app's "
    "architecture, were trained on text that rewards copying.")


def build() -> tuple:
    """The panel; returns (handler, inputs, outputs) for the tab's select event."""
    with gr.Column(elem_id="induction-panel"):
        gr.Markdown(INTRO, elem_id="induction-intro")
        about = gr.Markdown(elem_id="induction-about")
        with gr.Row(elem_id="induction-curves"):
            with gr.Column(min_width=300):
                loss = gr.Plot(show_label=False, elem_id="induction-loss")
            with gr.Column(min_width=300):
                score = gr.Plot(show_label=False, elem_id="induction-score")
        with gr.Row(elem_id="induction-maps"):
            maps = [gr.Plot(show_label=False, elem_id=f"induction-map-{n}", min_width=300) for n in range(MOMENTS)]
        summary = gr.Markdown(elem_id="induction-summary")
        code = gr.Markdown(elem_id="induction-code", elem_classes="code-listing")  # why_panel.CSS
    return draw, [], [about, loss, score, *maps, summary, code]


def about_markdown(view: InductionView) -> str:
    run = view.run
    return (f"**The training text:** {run['data']}. Each model trained {run['steps']:,} steps; the maps show the "
            f"2-layer model's best head ({view.head}) on one random sequence shown twice. Made by "
            f"`{run['command']}`.")


def code_markdown(view: InductionView) -> str:
    """The lines that make composition possible, each read from its file."""
    parts = ["**Where composition happens in `model/`:** the queries and keys of every layer are computed "
             "from the residual stream `x`; each layer reads the stream the layers before it wrote; and each "
             "sublayer adds its output to that stream. So layer 2's queries and keys can read what layer 1's "
             "heads wrote, and one layer alone has nothing earlier to read."]
    for code in view.code:
        where, lines = listing(code)
        parts.append(f"`{where}` (read from the file now):\n{lines}")
    return "\n\n".join(parts)


def draw():
    """Every output of the panel from the shipped run, or the one line that says none is shipped."""
    try:
        view = induction_view()
    except Exception as e:  # a run that is not what the panel reads: one line, as every tab says a failure
        return failure(e), *(None,) * (2 + MOMENTS), "", ""
    if view is None:
        return f"**{NO_RUN}**", *(None,) * (2 + MOMENTS), "", ""
    curves = view.run["curves"]
    loss = plots.curves_figure([(NAMES[m], curves[m]["repeat_loss"], {"color": COLOURS[m]}) for m in MODELS],
                               "Loss on the repeated half", "nats per token")
    threshold = THRESHOLDS["induction"]
    steps = [step for step, _ in curves["2layer"]["induction"]]
    named = [f"named an induction head ({threshold:.2f})", [[steps[0], threshold], [steps[-1], threshold]],
             {"color": "#9ca3af", "dash": "dot"}]
    score = plots.curves_figure([*[(f"{NAMES[m]}: best head", curves[m]["induction"], {"color": COLOURS[m]})
                                   for m in MODELS], tuple(named)],
                                "The best head's induction score", "induction score (0 to 1)")
    maps = [plots.heatmap(m, 0, where=f"2 layers: {view.head}", key_labels=plots.KEY_LABELS)
            for m in view.maps[:MOMENTS]]
    maps += [None] * (MOMENTS - len(maps))
    return about_markdown(view), loss, score, *maps, view.summary, code_markdown(view)
