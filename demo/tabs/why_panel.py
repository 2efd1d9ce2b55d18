"""The tour's "Trained without it" section (issue 60), beside a step's "switch it off" experiment: for an
LM step whose part has a shipped `training.why` run, the held-out loss over the steps with the part and
without it, the final losses with their spread over the seeds and the verdict they give, the measure that
explains why, what each model writes, the command that made the run and the line of `model/` its switch
changes. Open on the page (no accordion), hidden on the steps without a run. The computation is
`demo.views.why`; `demo.tabs.tour` places the section (`build`) and redraws it when the step changes
(`attach`)."""

import textwrap

import gradio as gr

from demo import plots
from demo.serving import LM
from demo.text import code_span
from demo.views.tour import Tour
from demo.views.tour.code import listing
from demo.views.why import WhyView, trained_without, why_view

LEAD = ("*Switching a part off in the trained model shows what that model now depends on; here a small model was "
        "trained with the part and again without it, to show what the part does for training.*")
WITH, WITHOUT = "#2563eb", "#ea580c"  # blue: trained with the part; orange: without it
CSS = """
/* code listings (here and in the induction panel) keep their indentation on any width: they scroll sideways */
.code-listing pre, .code-listing pre code { white-space: pre !important; overflow-wrap: normal !important;
  word-break: normal !important; }
.code-listing pre { overflow-x: auto; max-width: 100%; }
#tour-why { border-top: 1px solid #e5e7eb; padding-top: 8px; }
"""


def build() -> list:
    """The section's components, hidden until a step with a run is shown: [its box, the verdict, the
    curves, the measure, the rest in words]."""
    with gr.Column(visible=False, elem_id="tour-why") as box:
        words = gr.Markdown(elem_id="tour-why-words")
        with gr.Row(elem_id="tour-why-plots"):
            with gr.Column(min_width=300):
                curves = gr.Plot(show_label=False, elem_id="tour-why-curves")
            with gr.Column(min_width=300):
                measure = gr.Plot(show_label=False, elem_id="tour-why-measure")
        details = gr.Markdown(elem_id="tour-why-code", elem_classes="code-listing")
    return [box, words, curves, measure, details]


def curves_figure(view: WhyView):
    run = view.run
    return plots.curves_figure([("with it", run["curves"]["with"], {"color": WITH}),
                                ("without it", run["curves"]["without"], {"color": WITHOUT, "dash": "dash"})],
                               "Held-out loss while training,<br>with the part and without it",
                               "held-out loss (nats per token)")


def measure_figure(view: WhyView):
    """The measure as bars (one pair per label) when it has a value per label, else None (its two
    numbers are in the words)."""
    m = view.run["measure"]
    if not isinstance(m["with"], list):
        return None
    labels = m.get("labels") or [str(i + 1) for i in range(len(m["with"]))]
    title = "<br>".join(textwrap.wrap(m["name"][:1].upper() + m["name"][1:], 44))  # Plotly never wraps: a phone
    return plots.grouped_bars_figure(labels, [("with it", m["with"], WITH), ("without it", m["without"], WITHOUT)],
                                     title)


def details_markdown(view: WhyView) -> str:
    """The measure in words, the two samples, how the run was made and the line its switch changes."""
    samples = view.run["samples"]
    wrote = (f"**What each writes** after {code_span(samples.get('prompt', ''))}:\n\n"
             f"- with it: {code_span(samples['with'])}\n- without it: {code_span(samples['without'])}")
    if view.code is None:
        code = "The line this switch changes was not found in `model/` (it moved: re-point the run's `code`)."
    else:
        where, lines = listing(view.code)
        code = f"**The line the switch changes**, `{where}` (read from the file now):\n{lines}"
    return "\n\n".join([view.measure, wrote, view.made, code])


def section(t: Tour | None, index):
    """The section for step `index` of the session's pass: drawn where the LM track's step has a run,
    hidden elsewhere (another step, another track, no pass yet)."""
    hidden = (gr.update(visible=False), *(gr.skip(),) * 4)
    if not isinstance(t, Tour) or t.model != LM or not t.steps:
        return hidden
    step = t.steps[min(max(int(index or 0), 0), len(t.steps) - 1)]
    run = trained_without(step.key)
    if run is None:
        return hidden
    view = why_view(run)
    measure = measure_figure(view)
    reason = f"\n\n**Why the part is there:** {view.reason}" if view.reason else ""
    return (gr.update(visible=True), f"### Trained without it\n\n{LEAD}\n\n{view.headline}{reason}",
            curves_figure(view), gr.update(value=measure, visible=measure is not None), details_markdown(view))


def attach(outputs: list, steps: gr.Radio, shown: gr.State) -> None:
    """Redraw the section whenever the list of steps moves (a click, Back, Next, the overview, a new
    pass): the list's `change` follows them all."""
    steps.change(section, [shown, steps], outputs, api_visibility="private", queue=False)
