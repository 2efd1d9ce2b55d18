"""The "How it works" tab, where the app opens: one forward pass of a model on the visitor's text, one
step per screen (Back/Next, a clickable list of steps, an overview whose boxes open their step),
each step with its paragraph, formula, live tensor, hand recomputation and source lines.

The pass is computed once per text, model, layer and head (`demo.views.tour`) and kept in the visitor's
session (`gr.State`); moving between steps draws the step from it without the model, which runs again
only for the step's experiment, the first time that step is shown (and for the sampling step's, at the
temperature, top-k and top-p its controls set). The `/tour` API returns every experiment; the page's own
events do not wait for them."""

import gradio as gr

from demo import plots
from demo.serving import LM, SENTIMENT, DemoService, failure
from demo.tabs import browser, why_panel
from demo.tabs.common import bind, lenient, notice_markdown
from demo.tabs.tokenizer import pieces_html
from demo.text import TOUR_EXAMPLE, TOUR_INTRO, code_span, lm_openings, own_text
from demo.views.tour import LEARN, SAMPLING, Step, Tour, tour, tour_checkpoint, tour_json, track_shape
from demo.views.tour.code import listing
from demo.views.tour.glossary import glossary_html, link_first_uses
from inspection.experiments import Outcome
from tokenization import visible

PARTS = 5  # boxes of the overview figure (a track's `overview`, `demo.views.tour.registry.Track`)
PLOTS = 3  # the most pictures a step has (Q, K and V)
VIEW = 11 + PLOTS + PARTS  # a step's outputs: words, pieces, pictures, numbers, the experiment's box, its
# sampling controls and words, code, two links, Back, Next, overview
MAX_SESSION_SECONDS = 3600  # a session's pass is dropped an hour after it was computed
LATEX = [{"left": "$$", "right": "$$", "display": True}]
CSS = why_panel.CSS + """
#tour-overview { gap: 26px; flex-wrap: wrap; }
#tour-overview > button { position: relative; overflow: visible; flex: 1 1 140px; min-height: 46px;
  font-weight: 600; border: 1px solid #c7d2fe; }
#tour-overview > button:not(:last-child)::after { content: "→"; position: absolute; right: -20px; top: 50%;
  transform: translateY(-50%); color: #64748b; font-size: 18px; pointer-events: none; }
#tour-steps .wrap { flex-direction: column; gap: 2px; }
#tour-steps label { width: 100%; }
#tour-step .katex-display { overflow-x: auto; overflow-y: hidden; padding: 2px 0; }
#tour-step h3 { overflow-wrap: normal; word-break: normal; hyphens: manual; }
/* code keeps its indentation on any width: it scrolls sideways instead of wrapping */
#tour-code pre, #tour-code code { white-space: pre !important; overflow-wrap: normal !important;
  word-break: normal !important; }
#tour-code pre { overflow-x: auto; max-width: 100%; }
.tour-table { overflow-x: auto; max-width: 100%; }
#tour-glossary ul { columns: 2 320px; font-size: 13px; padding-left: 18px; }
#tour-glossary li { break-inside: avoid; margin-bottom: 3px; scroll-margin-top: 60px; }
#tour-glossary li:target { background: #fef9c3; }
.tour-table table { border-collapse: collapse; font-size: 11px; font-variant-numeric: tabular-nums; margin: 0; }
.tour-table th, .tour-table td { padding: 1px 5px; text-align: right; white-space: nowrap; border: 1px solid #e5e7eb; }
.tour-table tbody th { position: sticky; left: 0; background: var(--background-fill-primary, white); }
#tour-numbers figure { margin: 0 0 10px 0; }
#tour-experiment-box { border: 2px solid #c7d2fe; border-radius: 8px; padding: 4px 10px; margin: 6px 0; }
#tour-experiment table { display: block; overflow-x: auto; max-width: 100%; }
@media (max-width: 640px) {
  #tour-overview { flex-direction: column; gap: 20px; }
  #tour-overview > button { flex: 0 0 auto; width: 100%; }
  #tour-overview > button:not(:last-child)::after { content: "↓"; right: 50%; top: auto; bottom: -21px;
    transform: none; }
  #tour-list { order: 2; }  /* on a phone the step comes first, the list of steps under it */
  /* your text, then the step; the guide, the layer and head choices and the overview under it: step 1 on the
     first screen */
  #tour-body { order: 1; }
  #tour-intro, #tour-controls, #tour-run, #tour-overview-label, #tour-overview { order: 2; }
  #tour-glossary { order: 3; }  /* the glossary last, under the step that links to it */
  /* compact controls, so that step 1's title stays on the first screen with a long default text */
  #tour-model .wrap { flex-direction: row; flex-wrap: wrap; gap: 4px; }
  #tour-model label { padding: 2px 6px; min-width: 0; flex: 0 0 auto; font-size: 13px; }
  #tour-model label input { margin-right: 4px; }
  #tour-nav { flex-wrap: nowrap; gap: 8px; }
  #tour-nav > button { min-width: 0; flex: 1 1 0; }
  #tour-overview-label { margin-top: 12px; }
}
"""
COLOURS = {"signed": "colour: red above 0, blue below, white 0", "weights": "colour: 0 dark to 1 yellow"}


def options(service: DemoService, model, toy):
    """The layers and heads the chosen model (or its toy) has."""
    try:
        n_layers, n_heads = track_shape(tour_checkpoint(service, model, toy))
    except Exception:
        return gr.skip(), gr.skip()
    return (gr.update(choices=[(f"layer {i + 1}", i) for i in range(n_layers)], value=0),
            gr.update(choices=[(f"head {h + 1}", h) for h in range(n_heads)], value=0))


HEAD_STEPS = ("qkv", "scores", "scaling", "mask", "softmax", "weighted_sum")  # the steps that follow one head


def head_on_text(t: Tour) -> str:
    """What the chosen head does on this text, beside what the head table says it does on many: where its
    last row puts most weight (issue 61: a head named "the token just before" may look elsewhere here)."""
    attention = next((s.panels[0] for s in t.steps if s.key == "softmax"), None)
    if attention is None or len(attention.rows) < 2:
        return ""
    row = attention.values[-1]
    j, n = int(row.argmax()), len(row)
    where = "the token just before" if j == n - 2 else "itself" if j == n - 1 else f"{n - 1 - j} tokens back"
    return (f"On your text its last row puts {float(row[j]):.2f} of its weight on {code_span(attention.columns[j])} "
            f"(position {j + 1}, {where}).")


def step_markdown(t: Tour, i: int, step: Step) -> str:
    """The step's words: title, mismatches first, paragraph, formula, what the picture shows, the
    worked example and the checks."""
    shown = next((p.kind for p in step.panels), "")
    notes = [COLOURS[shown]] if shown in COLOURS else []
    notes += ["blank: masked"] if any(p.masked is not None for p in step.panels) else []
    if shown in COLOURS:  # a heatmap: no hover on a phone, so the numbers are also in a table
        notes.append("hover or tap a cell for its value, or open “Every number in a table” under the pictures")
    elif shown == "bars":
        notes.append("each bar's value is written beside it (with every bar shown, hover or tap one)")
    picture = f"**The live tensor:** {'; '.join([step.shape, *notes])}."
    parts = [f"### Step {i + 1} of {len(t.steps)}: {step.title}",
             *[f"> {c.sentence()}" for c in step.mismatches],
             link_first_uses(step.explanation), f"$${step.formula}$$", picture]
    if t.head_about and step.key in HEAD_STEPS:
        parts.append(f"**The head you picked:** {t.head_about} {head_on_text(t)}".rstrip())
    if step.worked:
        parts.append(f"**Worked out:** {step.worked}")
    parts += [c.sentence() for c in step.checks if c.ok]
    return "\n\n".join(parts)


def experiment_markdown(o: Outcome | None, notices: list[str] = (), why_not: str = "") -> str:
    """A step's experiment: what was changed, the output before and after side by side, and what it
    shows; `notices`, how the visitor's sampling settings were read; `why_not`, why there is none."""
    if o is None:
        return f"This step's experiment cannot run on this model: {why_not}." if why_not else \
            "This step has no experiment."
    if isinstance(o.before, dict):  # the classifier: P(label)
        rows = [f"| {label} | {o.before[label]:.3f} | {o.after[label]:.3f} |" for label in o.before]
        head = "| label | P before | P after |"
    else:  # the LM: its five likeliest next tokens at one position, each side its own
        rows = [f"| {code_span(visible(b))} {pb:.1%} | {code_span(visible(a))} {pa:.1%} |"  # "↵", not a broken row
                for (b, pb), (a, pa) in zip(o.before, o.after, strict=True)]
        at = f" {o.position}".replace("|", "\\|") if o.position else ""
        head = f"| next token{at}: before | after |"
    table = "\n".join([head, "| --- | --- |" + (" --- |" if isinstance(o.before, dict) else ""), *rows])
    said = f"{notice_markdown(notices)}\n\n" if notices else ""
    return said + (f"**What if this step were not there? Switch it off and see what breaks.** This step changed for "
                   f"one pass of the same model on your text: {o.change}.\n\n{table}\n\n{o.verdict}")


def step_experiment(t: Tour, key: str, temperature=SAMPLING.temperature, top_k=SAMPLING.top_k,
                    top_p=SAMPLING.top_p) -> str:
    """Step `key`'s experiment in words; the sampling step's at the settings of its controls. An experiment
    that fails is one line, never a stack trace."""
    try:
        if key != "sampling" or t.experiments is None:
            return experiment_markdown(t.experiment(key), why_not=t.experiments.why_not.get(key, "")
                                       if t.experiments is not None else "")
        settings, notices = t.experiments.settings(temperature, top_k, top_p)
        return experiment_markdown(t.experiments.sampled(settings), notices)
    except Exception as e:
        return failure(e)


def resample(t: Tour | None, index, temperature, top_k, top_p):
    """A sampling control moved: the sampling step's experiment again at the new settings."""
    if not isinstance(t, Tour) or t.steps[min(max(int(index or 0), 0), len(t.steps) - 1)].key != "sampling":
        return gr.skip()
    return step_experiment(t, "sampling", temperature, top_k, top_p)


def code_markdown(step: Step) -> str:
    code = step.code()
    if code is None:
        return ("The source lines of this step were not found (the model's code moved: re-point the step's `code=` in "
                "`demo/views/tour/`, where it is registered).")
    where, lines = listing(code)
    return f"**The code that computed it**, `{where}` (read from the file now):\n{lines}"


def show(t: Tour | None, index, show_all, *sampling):
    """Step `index` of the session's pass: its words, pieces or pictures, experiment (always in view; the
    sampling step's controls shown: `sampling` = their temperature, top-k, top-p), code, links,
    Back/Next, and the overview with the part the step belongs to highlighted."""
    if not isinstance(t, Tour):
        return (gr.skip(),) * VIEW
    i = min(max(int(index or 0), 0), len(t.steps) - 1)
    step = t.steps[i]
    here = max(n for n, (_, first) in enumerate(t.overview) if first <= i or n == 0)
    pieces = [p for p in step.panels if p.kind == "pieces"]
    pictures = [p for p in step.panels if p.kind != "pieces"]
    figures = [gr.update(value=plots.tour_panel_figure(p, bool(show_all), t.toy), visible=True) for p in pictures]
    figures += [gr.update(value=None, visible=False)] * (PLOTS - len(figures))
    html = pieces_html([(label, int(i)) for label, i in zip(pieces[0].rows, pieces[0].values, strict=True)]) \
        if pieces else ""
    numbers = plots.tour_numbers_html(pictures, bool(show_all)) or \
        "<p>This step's numbers are written in its picture or in the pieces above.</p>"
    live = step.key == "sampling"
    return (step_markdown(t, i, step), gr.update(value=html, visible=bool(pieces)), *figures,
            gr.update(value=numbers), gr.skip(), gr.update(visible=live),
            step_experiment(t, step.key, *sampling), code_markdown(step),
            gr.update(visible=step.link == "lens"), gr.update(visible=step.link == "sampling"),
            gr.update(interactive=i > 0), gr.update(interactive=i < len(t.steps) - 1),
            *[gr.update(value=label, variant="primary" if n == here else "secondary", visible=True)
              for n, (label, _) in enumerate(t.overview)],
            *[gr.update(visible=False)] * (PARTS - len(t.overview)))  # a track with fewer parts (learn: 3)


def go(t: Tour | None, index: int, show_all, *sampling):
    """Step `index` (clamped) drawn, and the list of steps moved to it."""
    if not isinstance(t, Tour):
        return (gr.skip(),) * (1 + VIEW)
    i = min(max(index, 0), len(t.steps) - 1)
    return gr.update(value=i), *show(t, i, show_all, *sampling)


def _opened(service: DemoService, text, model, layer, head, toy, shown: Tour | None, index: int, api: bool,
            *sampling):
    try:
        t = tour(service, text, model, layer, head, toy)
    except Exception as e:
        return gr.skip(), gr.skip(), gr.skip(), failure(e), *show(None, 0, False)
    i = index if isinstance(shown, Tour) and shown.model == t.model and index < len(t.steps) else 0
    steps = gr.update(choices=[(f"{n + 1}. {s.title}", n) for n, s in enumerate(t.steps)], value=i)
    return (t, tour_json(t) if api else gr.skip(), steps, notice_markdown(t.notices),
            *show(t, i, False, *sampling))


def run(service: DemoService, text, model, layer, head, toy):
    """The `/tour` API: the pass over `text` through `model` ("lm" or "sentiment"; `toy`: its toy),
    showing its first step. `layer`, `head`: 0-based. Its output holds the steps as JSON, every step's
    experiment run."""
    return _opened(service, text, model, layer, head, toy, None, 0, True)


def open_tour(service: DemoService, text, model, layer, head, toy):
    """The page's run: as `run`, without the JSON (no experiment runs before its step is shown)."""
    return _opened(service, text, model, layer, head, toy, None, 0, False)


def rerun(service: DemoService, text, model, layer, head, toy, shown, index, *sampling):
    """A control changed: the pass again, on the same step when the model's track is the same."""
    return _opened(service, text, model, layer, head, toy, shown, int(index or 0), False, *sampling)


def build(service: DemoService, compute: dict):
    """The tab; returns its handler with its inputs and outputs, for the page's load event."""
    first = LM if service.lm.ready else SENTIMENT
    gr.Markdown(TOUR_INTRO, elem_id="tour-intro")
    with gr.Row(elem_id="tour-inputs"):
        # a model of its own text starts from that text's kind (the sentiment model reads it too)
        example = lm_openings(service.lm.metrics)[0] if own_text(service.lm.metrics) else TOUR_EXAMPLE
        text = gr.Textbox(example, label="Your text (Enter runs it)", lines=1, max_lines=2, scale=3,
                          elem_id="tour-input")
        # lenient: an API caller's unknown model gets the view's one-line answer, not Gradio's refusal
        model = lenient(gr.Radio([("Language model", LM), ("Sentiment model", SENTIMENT),
                                  ("How it learns (one step)", LEARN)], value=first,
                                 label="Model", elem_id="tour-model", scale=2))
    layer_choices, head_choices = options(service, first, False)
    with gr.Row(elem_id="tour-controls"):
        layer = gr.Dropdown(layer_choices.get("choices", []), value=0, label="Layer (one block: attention, then "
                            "feed-forward)", elem_id="tour-layer", allow_custom_value=True)
        head = gr.Dropdown(head_choices.get("choices", []), value=0, label="Head (one of the attention computations "
                           "a layer runs side by side)", elem_id="tour-head", allow_custom_value=True)
        toy = gr.Checkbox(False, label="Toy model: every number on screen", elem_id="tour-toy")
    start = gr.Button("Run the forward pass", variant="primary", elem_id="tour-run")
    notice = gr.Markdown(elem_id="tour-notice")
    gr.Markdown("**Overview: the model from your text to its output.** Click a box to open the tour there.",
                elem_id="tour-overview-label")
    with gr.Row(elem_id="tour-overview"):
        parts = [gr.Button("…", size="sm", elem_classes="tour-part") for _ in range(PARTS)]
    with gr.Row(elem_id="tour-body"):
        with gr.Column(scale=1, min_width=220, elem_id="tour-list"):
            steps = gr.Radio([], label="Steps", elem_id="tour-steps")
        with gr.Column(scale=3):
            with gr.Row(elem_id="tour-nav"):
                back = gr.Button("◀ Back", size="sm", elem_id="tour-back")
                forward = gr.Button("Next ▶", size="sm", variant="primary", elem_id="tour-next")
            words = gr.Markdown(elem_id="tour-step", latex_delimiters=LATEX)
            pieces = gr.HTML(visible=False, elem_id="tour-pieces")
            # the experiment in view, under the step's words and above its pictures and code (issue 61, item 9)
            with gr.Group(elem_id="tour-experiment-box") as experiment_box:
                with gr.Row(visible=False, elem_id="tour-sampling-controls") as sampling_controls:
                    # the chat's controls, starting at its settings (those the step's picture draws with)
                    vocab = service.lm.model.config.vocab_size if service.lm.ready else 8192
                    temperature = gr.Slider(0, 2, value=SAMPLING.temperature, step=0.05,
                                            label="Temperature (0 = greedy)", elem_id="tour-temperature")
                    top_k = gr.Slider(0, vocab, value=SAMPLING.top_k, step=1, label="Top-k (0 = off)",
                                      elem_id="tour-top-k")
                    top_p = gr.Slider(0.01, 1, value=SAMPLING.top_p, step=0.01, label="Top-p (1 = off)",
                                      elem_id="tour-top-p")
                experiment = gr.Markdown(elem_id="tour-experiment")
            pictures = [gr.Plot(show_label=False, visible=False, elem_id=f"tour-plot-{n}") for n in range(PLOTS)]
            show_all = gr.Checkbox(False, label="Show every number (the pictures start with the first 16 "
                                   "dimensions, the last 32 tokens, the 15 largest bars)", elem_id="tour-all")
            with gr.Accordion("Every number in a table (for a phone: no hover needed)", open=False,
                              elem_id="tour-numbers-box"):
                numbers = gr.HTML(elem_id="tour-numbers")
            trained = why_panel.build()  # issue 60: "Trained without it", open, beside the experiment
            code = gr.Markdown(elem_id="tour-code")
            lens = gr.Button("Open the logit lens in the Chat tab (write a continuation, then “Look inside”)",
                             visible=False, size="sm", elem_id="tour-lens")
            sampling = gr.Button("Open “How was this token sampled?” in the Chat tab", visible=False, size="sm",
                                 elem_id="tour-sampling")
    gr.HTML(glossary_html(), elem_id="tour-glossary")  # each step links its first use of a word here
    data = gr.JSON(visible=False)
    shown = gr.State(None, time_to_live=MAX_SESSION_SECONDS)

    view = [words, pieces, *pictures, numbers, experiment_box, sampling_controls, experiment, code, lens, sampling,
            back, forward, *parts]
    outputs = [shown, data, steps, notice, *view]
    controls = [text, model, layer, head, toy]
    settings = [temperature, top_k, top_p]
    private = {"api_visibility": "private", "queue": False}
    # the API's own trigger: `/tour` keeps its inputs and outputs, with every experiment in its JSON, while
    # the page's events below draw without waiting for the experiments of the steps not shown
    api = gr.Button(visible=False, elem_id="tour-api")
    api.click(bind(run, service), controls, outputs, api_name="tour", **compute)
    start.click(bind(open_tour, service), controls, outputs, api_visibility="private", **compute)
    text.submit(bind(open_tour, service), controls, outputs, api_visibility="private", **compute)
    redraw = {"fn": bind(rerun, service), "inputs": [*controls, shown, steps, *settings], "outputs": outputs,
              "api_visibility": "private", "trigger_mode": "always_last", **compute}
    for control in (model, toy):
        control.change(bind(options, service), [model, toy], [layer, head], **private).then(**redraw)
    layer.input(**redraw)
    head.input(**redraw)
    # a step change is one round trip that draws the step from the session's pass (and runs its experiment
    # the first time): the list's own clicks (`input`, not `change`, which the moves below would trigger
    # again), Back, Next, the overview
    at = [shown, steps, show_all, *settings]
    steps.input(show, at, view, **private)
    show_all.input(show, at, view, **private)
    moved = [steps, *view]
    back.click(lambda t, i, a, *s: go(t, int(i or 0) - 1, a, *s), at, moved, **private)
    forward.click(lambda t, i, a, *s: go(t, int(i or 0) + 1, a, *s), at, moved, **private)
    for n, part in enumerate(parts):
        part.click(lambda t, a, *s, n=n: go(t, t.overview[n][1] if isinstance(t, Tour) else 0, a, *s),
                   [shown, show_all, *settings], moved, **private)
    for control in settings:  # dragged or typed: one pass of the model at the new settings, the last one only
        control.input(resample, [shown, steps, *settings], experiment, **private, trigger_mode="always_last")
    why_panel.attach(trained, steps, shown)  # issue 60: follows the step shown
    lens.click(None, js=browser.call("go_to", "Chat", "#chat-lens"), **private)
    sampling.click(None, js=browser.call("go_to", "Chat", "#chat-table"), **private)
    return bind(open_tour, service), controls, outputs
