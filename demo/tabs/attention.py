"""The Attention tab, in the manner of bertviz: any text through either model, an interactive
heatmap of one layer (one head or their mean), a sentence on where its attention goes (the `<s>`
sink), and every layer and head as thumbnails; a click on one draws that head in the interactive
heatmap. It opens with an example drawn, not empty."""

import gradio as gr
import numpy as np

from demo import plots
from demo.serving import LM, SENTIMENT, DemoService, failure
from demo.tabs import ablation_panel, browser, export_panel, qk_panel
from demo.tabs.common import bind, notice_markdown
from demo.text import ATTENTION_INTRO, CAUSAL_NOTE, attention_example, code_span
from demo.views.attention import AttentionResult, attention_kinds, attention_shape, attention_view, served

# Gradio's gallery is a fixed-height scroll box with captions laid over the thumbnails: here it grows
# to hold every layer and head on the page, each caption under its picture; two columns on a phone
CSS = """
#att-grid, #att-grid .grid-wrap { height: auto !important; max-height: none !important; overflow: visible !important; }
#att-grid .grid-container { padding-top: 36px !important; }  /* under the gallery's label */
#att-grid .thumbnail-item { aspect-ratio: auto; height: auto; flex-direction: column; }
#att-grid .thumbnail-item img { height: auto; }
#att-grid .caption-label { position: static; max-width: 100%; transform: none; background: none; color: inherit; }
@media (max-width: 640px) { #att-grid .grid-container { grid-template-columns: repeat(2, minmax(0, 1fr)) !important; } }
#att-heatmap { scroll-margin-top: 8px; }
"""
CHOICE = 8  # a causal map's rows from the one that sees this many tokens on are those a sink is read from
SINK = 0.25  # a key taking this share of a map's attention, on average over its rows, dominates the map
SPECIAL = {"<s>": "the start token", "</s>": "the end token"}


def sink_sentence(keys: list[str], weights: np.ndarray, causal: bool) -> str:
    """Which key takes the largest share of a map's attention, averaged over the rows that have a
    choice (a causal map's first row can only look at the first token). A start or end token that
    dominates is an *attention sink*: it means nothing itself, heads park their weight there when no
    other token is relevant to them, and a learner should read the rest of the rows."""
    # a causal map's early rows choose among a few keys, where any key takes a large share: past `CHOICE` rows the
    # share is read from the rows that choose among `CHOICE` keys or more (issue 61, item 2)
    first = (CHOICE - 1 if len(weights) > CHOICE else 1) if causal else 0
    rows = weights[first:] if len(weights) > first else weights
    share = rows.mean(axis=0)
    top = int(share.argmax())
    key, part = keys[top], float(share[top])
    over = f" (over rows {first + 1} to {len(weights)}, which see {CHOICE} tokens or more)" if first > 1 else ""
    if part < SINK:
        return (f"No token dominates this map{over}: the largest share of a row's attention, {part:.0%} on average, "
                f"goes to {code_span(key)}. The weight is spread over the text.")
    if key in SPECIAL:
        return (f"On average{over} **{part:.0%}** of each row's attention goes to {code_span(key)}, {SPECIAL[key]}: an "
                "*attention sink*. It carries no meaning of its own; a head parks its weight there when no other "
                "token is relevant to it, so what the head does is in the rest of each row.")
    return (f"On average{over} **{part:.0%}** of each row's attention goes to one token, {code_span(key)}: this map "
            "mostly looks at it.")


def attention_options(service: DemoService, model_name, kind):
    """Kinds available for the chosen model, and the layers and heads of the chosen kind."""
    kinds = attention_kinds(service, model_name)
    if not kinds:
        return gr.update(choices=[], value=None), gr.update(choices=[], value=None), gr.update(choices=[], value=None)
    if kind not in [k for _, k in kinds]:
        kind = kinds[0][1]
    n_layers, n_heads = attention_shape(served(service, kind), kind)
    layers = [(f"layer {i + 1}" + (" (last)" if i == n_layers - 1 else ""), i) for i in range(n_layers)]
    heads = [("mean over heads", plots.MEAN)] + [(f"head {h + 1}", h) for h in range(n_heads)]
    return (gr.update(choices=kinds, value=kind), gr.update(choices=layers, value=n_layers - 1),
            gr.update(choices=heads, value=plots.MEAN))


def attention(service: DemoService, text, kind, layer, head):
    """The heatmap of one layer (one head or their mean), every layer and head, and notices."""
    try:
        result = attention_view(service, text, kind, layer)
        figure, overview = plots.heatmap(result, head), plots.overview(result)
    except Exception as e:
        return None, None, failure(e)
    return figure, overview, map_notice(result, head)


def map_notice(result: AttentionResult, head) -> str:
    """What the map drawn shows (`sink_sentence`), then the notices."""
    notes = list(result.notices) + ([CAUSAL_NOTE] if result.causal else [])
    weights, _ = plots.select_head(result, head)
    return sink_sentence(result.key_tokens, weights, result.causal) + "\n\n" + notice_markdown(notes)


def focus(service: DemoService, text, kind, evt: gr.SelectData):
    """A thumbnail was clicked: draw its layer and head anew in the interactive heatmap."""
    try:
        n_heads = attention_shape(served(service, kind), kind)[1]
        layer, head = divmod(int(evt.index), n_heads)
        result = attention_view(service, text, kind, layer)
        figure = plots.heatmap(result, head)
    except Exception as e:
        return gr.skip(), gr.skip(), gr.skip(), failure(e)
    return layer, head, figure, map_notice(result, head)


def build(service: DemoService, compute: dict):
    """The tab; returns its drawing handler with its inputs and outputs, for the page's load event."""
    first_model = LM if service.lm.ready else SENTIMENT
    init_kind, init_layer, init_head = attention_options(service, first_model, None)
    gr.Markdown(ATTENTION_INTRO)
    text = gr.Textbox(attention_example(service.lm.metrics), label="Text", lines=2, elem_id="att-input")
    with gr.Row():
        model = gr.Radio([("Language model", LM), ("Sentiment model", SENTIMENT)], value=first_model, label="Model",
                         elem_id="att-model")
        kind = gr.Dropdown(init_kind["choices"], value=init_kind["value"], label="Attention", allow_custom_value=True)
        layer = gr.Dropdown(init_layer["choices"], value=init_layer["value"], label="Layer", allow_custom_value=True)
        head = gr.Dropdown(init_head["choices"], value=init_head["value"], label="Head", allow_custom_value=True,
                           elem_id="att-head")
    show = gr.Button("Show attention", variant="primary", elem_id="att-show")
    notice = gr.Markdown(elem_id="att-notice")
    heatmap = gr.Plot(label="Heatmap", show_label=False, elem_id="att-heatmap")  # a label would cover the title
    export_panel.image_buttons(heatmap)
    export_panel.html_button("Attention heatmap", "attention", [("markdown", notice), ("figure", heatmap)])
    overview = gr.Gallery(label="Every head of every layer, one picture each (layer 1's heads first): click one "
                                "to draw it above",
                          columns=max(len(init_head["choices"]) - 1, 1), height="auto", object_fit="contain",
                          format="png", elem_id="att-grid", preview=False, allow_preview=False)
    qk_panel.build(service, compute, text, kind, layer, head)
    ablation_panel.build(service, compute, text, model)

    options = bind(attention_options, service)
    draw = bind(attention, service)
    drawn = {"fn": draw, "inputs": [text, kind, layer, head], "outputs": [heatmap, overview, notice]}
    # every control change redraws (only the last of a burst runs): the view never shows other controls' map
    redraw = {**drawn, "api_visibility": "private", "trigger_mode": "always_last", **compute}
    show.click(**drawn, api_name="attention", **compute)  # first: the public name is taken before the redraws'
    model.change(options, [model, kind], [kind, layer, head], api_name="attention_options", queue=False).then(
        **redraw)
    kind.change(options, [model, kind], [kind, layer, head], api_name="attention_kind", api_visibility="private",
                queue=False).then(**redraw)
    layer.input(**redraw)
    head.input(**redraw)
    overview.select(bind(focus, service), [text, kind], [layer, head, heatmap, notice], api_name="attention_focus",
                    api_visibility="private", **compute).then(None, js=browser.call("scroll_to", "#att-heatmap"))
    return draw, [text, kind, layer, head], [heatmap, overview, notice]
