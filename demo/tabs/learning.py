"""The "Watch it learn" tab: a training-step slider over a run's weight snapshots, each answering the
same prompt (its continuation, its next-token probabilities, one layer's attention) beside the run's
loss curve with the snapshot marked. The computation is `demo.views.learning`; without snapshots the tab
says so and shows nothing else."""

from pathlib import Path

import gradio as gr

from demo import plots
from demo.serving import DemoService, SnapshotSet, failure
from demo.tabs.common import bind, notice_markdown
from demo.text import held_out_words, lm_openings, own_text
from demo.views.ablation import lm_head_name
from demo.views.learning import (
    MAX_NEW_TOKENS,
    NO_SNAPSHOTS,
    SAMPLED,
    HeadAcrossRun,
    RunRow,
    across_run,
    head_across_run,
    learning_view,
)
from inspection.head_kinds import THRESHOLDS

LEARNING_INTRO = (
    "### Watch it learn\n"
    "A training run kept copies of a language model's weights at a few steps, spaced evenly in log(step): "
    "early training changes the most. Move the slider and the same prompt goes through the model as it was "
    "at that step. **The model here is not the chat's** unless you serve your own run: it is a smaller language "
    "model of the same architecture, trained for ten minutes on a laptop (its size, steps and command are just "
    "below), because ten copies of the chat's model would not fit the app's 40 MB budget for them.\n"
    f"- **What it writes**: the next {MAX_NEW_TOKENS} tokens, always the most likely one (greedy), or one fixed "
    f"random draw (temperature {SAMPLED['temperature']}, top-{SAMPLED['top_k']}, seed {SAMPLED['seed']}): the "
    "draw is the same at every step, so only the weights differ.\n"
    "- **Next-token probabilities**: how likely the model found each candidate for the token right after your "
    "prompt (1.0 = certain; an untrained model spreads its guess over the whole vocabulary).\n"
    "- **Attention**: in one layer, averaged over its heads, how much each token (row) looks at each earlier "
    "token (column); each row sums to 1.\n"
    "- **Loss curve**: the validation loss during the run (cross-entropy in nats per token, lower is better; "
    "a uniform guess over the vocabulary scores its logarithm), the snapshot shown marked in red.")
DECODINGS = [("greedy (most likely token)", "greedy"), (f"sampled (seed {SAMPLED['seed']})", "sampled")]
PROMPT = "This movie was"


def run_caption(snapshots: SnapshotSet) -> str:
    """Which run the snapshots come from and how it was trained."""
    model = snapshots.checkpoint(0).model
    c = model.config
    shape = (f"{c.n_layer} layers, {c.n_head} heads, width {c.d_model}, context {c.block_size} tokens, "
             f"{model.num_parameters():,} parameters")
    steps = ", ".join(f"{e['step']:,}" for e in snapshots.entries)
    command = f"\n\nTrained with `{snapshots.commands[-1]}`." if snapshots.commands else ""
    return (f"Snapshots of `{snapshots.location}`: {shape}; {len(snapshots.entries)} snapshots, at steps "
            f"{steps}.{command}")


def loss_curve(snapshots: SnapshotSet, index: int):
    """The run's validation (and training) loss by step, every snapshot a grey dot, the one shown red."""
    import plotly.graph_objects as go  # on first use: keeps it off the start-up path

    figure = go.Figure()
    history = [h for h in snapshots.history if h.get("val_loss") is not None]
    if history:
        figure.add_scatter(x=[h["step"] for h in history], y=[h["val_loss"] for h in history], mode="lines+markers",
                           name="validation loss (periodic sample)", line={"color": "#2563eb"})
    trained = [h for h in snapshots.history if h.get("train_loss") is not None]
    if trained:
        figure.add_scatter(x=[h["step"] for h in trained], y=[h["train_loss"] for h in trained], mode="lines",
                           name="training loss (mean since the last evaluation)",
                           line={"color": "#9ca3af", "dash": "dot"})
    points = [e for e in snapshots.entries if e.get("val_loss") is not None]
    figure.add_scatter(x=[e["step"] for e in points], y=[e["val_loss"] for e in points], mode="markers",
                       name="snapshots", marker={"color": "#6b7280", "size": 8})
    shown = snapshots.entries[index]
    if shown.get("val_loss") is not None:
        figure.add_scatter(x=[shown["step"]], y=[shown["val_loss"]], mode="markers", name=f"step {shown['step']:,}",
                           marker={"color": "#dc2626", "size": 14, "symbol": "circle"})
    figure.update_layout(height=360, xaxis_title="training step", yaxis_title="loss (nats per token)",
                         margin={"l": 50, "r": 10, "b": 40}, legend={"orientation": "h", "y": -0.25})
    return plots.titled(figure, "Loss during training", size=14)  # below Plotly's toolbar


def learning(service: DemoService, index, prompt, decoding, layer):
    """The step line, the continuation, the next-token probabilities, the attention map, the loss
    curve and notices, for snapshot `index`."""
    try:
        view = learning_view(service, index, prompt, decoding == "sampled", layer)
        heatmap = plots.heatmap(view.attention, plots.MEAN, key_labels=plots.KEY_LABELS)  # apart on a phone
        curve = loss_curve(service.snapshots, view.index)
    except Exception as e:
        return failure(e), "", None, None, None, ""
    # the loss in both units: nats per token (the curve's) and bits per byte (the table across the run's, issue 61)
    loss = f" · validation loss **{view.val_loss:.3f}** nats per token" if view.val_loss is not None else ""
    if view.val_bpb is not None:
        loss += f"{' =' if loss else ' · validation'} **{view.val_bpb:.3f}** bits per byte"
    step = (f"**Step {view.step:,}** (snapshot {view.index + 1} of {len(service.snapshots.entries)}) · "
            f"{view.tokens:,} training tokens seen{loss}")
    probabilities = {token: prob for token, prob in view.next_token}
    return step, view.continuation, probabilities or None, heatmap, curve, notice_markdown(view.notices)


HEAD_MAPS = 3  # a head is shown at the first, middle and last snapshots (`shown_snapshots`)
NAMED_HEAD = -1  # the head picker's "strongest previous-token head" (`head_across_run`)
RUN_HEADERS = ["step", "tokens seen", "validation bits/byte", "loss on your prompt (nats)", "previous-token head",
               "its score", "induction head", "its score", "copy gain (nats)"]


def run_summary(rows: list[RunRow], held_out: str = "held-out reviews") -> str:
    """What the table shows, in sentences computed from it (`held_out`: what its bits per byte were measured on)."""
    first, last = rows[0], rows[-1]
    lines = [f"From step {first.step:,} to {last.step:,} the loss on your prompt falls from {first.prompt_loss:.2f} "
             f"to {last.prompt_loss:.2f} nats"]
    if first.val_bpb is not None and last.val_bpb is not None:
        lines[0] += f", and on {held_out} from {first.val_bpb:.2f} to {last.val_bpb:.2f} bits per byte"
    for kind, pick in (("previous-token", lambda r: r.previous), ("induction", lambda r: r.induction)):
        threshold = THRESHOLDS["previous" if kind == "previous-token" else "induction"]
        named = next((r for r in rows if pick(r).named), None)
        when = (f"first reaches {threshold:.2f} (named) at step {named.step:,}" if named else
                f"never reaches {threshold:.2f}, where this app names one")
        lines.append(f"the strongest {kind} head scores {pick(first).score:.2f} at the start and "
                     f"{pick(last).score:.2f} at the end: it {when}")
    gain = last.copy_gain
    copies = "it has begun to copy in context" if gain > 0.5 else "it barely copies in context"
    lines.append(f"on a repeated random sequence the last snapshot predicts the second copy {gain:.2f} nats better "
                 f"than the first ({copies})")
    return "; ".join(lines) + "."


def whole_run(service: DemoService, prompt):
    """Every snapshot's row of `RUN_HEADERS` and the summary."""
    try:
        rows = across_run(service, prompt)
    except Exception as e:
        return [], failure(e)
    table = [[r.step, r.tokens, None if r.val_bpb is None else round(r.val_bpb, 3), round(r.prompt_loss, 3),
              lm_head_name(r.previous.layer, r.previous.head), round(r.previous.score, 3),
              lm_head_name(r.induction.layer, r.induction.head), round(r.induction.score, 3), round(r.copy_gain, 3)]
             for r in rows]
    return table, run_summary(rows, snapshot_held_out(service, service.snapshots))


def _theirs(service: DemoService, snapshots: SnapshotSet | None) -> bool:
    """Whether `snapshots` are the served LM's own (else the shipped laptop run's, of movie reviews)."""
    directory = service.lm.directory
    return snapshots is not None and directory is not None and \
        snapshots.folder.resolve().parent == Path(directory).resolve()


def first_prompt(service: DemoService, snapshots: SnapshotSet) -> str:
    """The snapshots' own kind of text: the served LM's openings when they are its snapshots (a model of
    its own text starts from that text), else PROMPT (the shipped laptop run's, of movie reviews)."""
    return lm_openings(service.lm.metrics)[0] if _theirs(service, snapshots) and own_text(service.lm.metrics) \
        else PROMPT


def snapshot_held_out(service: DemoService, snapshots: SnapshotSet | None) -> str:
    """What the snapshots' run held out, in words: the served LM's own text's part, or reviews."""
    return held_out_words(service.lm.metrics) if _theirs(service, snapshots) else "held-out reviews"


def head_summary(view: HeadAcrossRun) -> str:
    """What the three maps show, in one sentence computed from their weights."""
    which = lm_head_name(view.layer, view.head)
    if view.named:
        which += (f", the last snapshot's strongest previous-token head (score {view.named.score:.2f} on the page's "
                  "example texts)")
    previous, start = (" → ".join(f"{v:.2f}" for v in shares) for shares in (view.previous, view.start))
    steps = ", ".join(f"{s:,}" for s in view.steps[:-1]) + f" and {view.steps[-1]:,}"
    return (f"On your prompt, {which} puts {previous} of its attention on the previous token and {start} on the "
            f"start token `<s>`, at steps {steps}.")


def head_maps(service: DemoService, prompt, head):
    """One head's attention at the shown snapshots, side by side, and the sentence that reads them."""
    try:
        view = head_across_run(service, prompt, head)
    except Exception as e:
        return *(None,) * HEAD_MAPS, failure(e)
    figures = [plots.heatmap(m, view.head, key_labels=plots.KEY_LABELS) for m in view.maps]
    figures += [None] * (HEAD_MAPS - len(figures))  # fewer snapshots than maps: the rest stay empty
    return *figures, head_summary(view) + ("\n\n" + notice_markdown(view.notices) if view.notices else "")


def build(service: DemoService, compute: dict):
    """The tab; returns its handler with its inputs and outputs, which `build_app` runs when the tab
    is opened, or None (nothing to draw) when the served LM has no snapshots."""
    gr.Markdown(LEARNING_INTRO)
    snapshots = service.snapshots
    if snapshots is None:
        gr.Markdown(f"**{NO_SNAPSHOTS}**", elem_id="learn-none")
        return None
    gr.Markdown(run_caption(snapshots), elem_id="learn-run")
    n_layers = snapshots.checkpoint(0).model.config.n_layer
    last = len(snapshots.entries) - 1
    slider = gr.Slider(0, last, value=last, step=1, label="Snapshot (0 = the random start; drag right to train)",
                       elem_id="learn-slider")
    step = gr.Markdown(elem_id="learn-step")
    with gr.Row():
        prompt = gr.Textbox(first_prompt(service, snapshots), label="Prompt (Enter redraws)", lines=1, max_lines=3,
                            elem_id="learn-prompt", scale=3)
        decoding = gr.Radio(DECODINGS, value="greedy", label="Decoding", elem_id="learn-decoding", scale=2)
        layer = gr.Dropdown([(f"layer {i + 1}", i) for i in range(n_layers)], value=n_layers - 1,
                            label="Attention layer",
                            elem_id="learn-layer", scale=1)
    show = gr.Button("Show", variant="primary", elem_id="learn-show")
    with gr.Row():
        continuation = gr.Textbox(label="What the model writes at this step", interactive=False, lines=3,
                                  elem_id="learn-continuation", scale=3)
        probabilities = gr.Label(label="Next-token probabilities (after the prompt)", num_top_classes=6,
                                 elem_id="learn-next", scale=2)
    with gr.Row():
        heatmap = gr.Plot(label="Attention", show_label=False, elem_id="learn-attention")
        curve = gr.Plot(label="Loss curve", show_label=False, elem_id="learn-curve")
    notice = gr.Markdown(elem_id="learn-notice")
    with gr.Accordion("Across the whole run: what training changes, in numbers", open=False):
        gr.Markdown(f"Every snapshot at once: how well it predicts ({snapshot_held_out(service, snapshots)}, and "
                    "your prompt), and what its "
                    "heads have learned to do (their scores as in the Attention tab's *Heads with names*, on the "
                    "page's example texts). The first time takes a few seconds: every snapshot is scored.")
        across = gr.Button("Compare every snapshot", elem_id="learn-across")
        run_table = gr.Dataframe(headers=RUN_HEADERS, interactive=False, elem_id="learn-run-table")
        run_notes = gr.Markdown(elem_id="learn-run-summary")
    with gr.Accordion("One head as it learns: its attention at three snapshots", open=False):
        gr.Markdown("One head at the random start, at the middle snapshot and at the last, attending over your "
                    "prompt (each row: a token; each column: a token it may read). The sentence under the maps says "
                    "how much it reads the token just before (the diagonal under the main one, what a previous-token "
                    "head does) and the start token, at each snapshot.")
        c = snapshots.checkpoint(0).model.config
        heads = [("strongest previous-token head (last snapshot)", NAMED_HEAD),
                 *[(lm_head_name(i, h), i * c.n_head + h) for i in range(c.n_layer) for h in range(c.n_head)]]
        with gr.Row():
            head = gr.Dropdown(heads, value=NAMED_HEAD, label="Head", elem_id="learn-head", scale=2)
            head_show = gr.Button("Show the head at three snapshots", elem_id="learn-head-show", scale=1)
        with gr.Row(elem_id="learn-head-maps"):
            maps = [gr.Plot(show_label=False, elem_id=f"learn-head-map-{n}") for n in range(HEAD_MAPS)]
        head_notes = gr.Markdown(elem_id="learn-head-summary")
    across.click(bind(whole_run, service), prompt, [run_table, run_notes], api_name="learning_run",
                 api_visibility="private", **compute)
    head_drawn = {"fn": bind(head_maps, service), "inputs": [prompt, head], "outputs": [*maps, head_notes],
                  "api_visibility": "private", "trigger_mode": "always_last", **compute}
    head_show.click(**head_drawn)
    head.input(**head_drawn)

    draw = bind(learning, service)
    inputs, outputs = [slider, prompt, decoding, layer], [step, continuation, probabilities, heatmap, curve, notice]
    show.click(draw, inputs, outputs, api_name="learning", **compute)
    redraw = {"fn": draw, "inputs": inputs, "outputs": outputs, "api_visibility": "private",
              "trigger_mode": "always_last", **compute}
    slider.change(**redraw)  # dragging: only the last position of a burst is drawn
    prompt.submit(**redraw)
    decoding.input(**redraw)
    layer.input(**redraw)
    return draw, inputs, outputs
