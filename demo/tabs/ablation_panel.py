"""The "knock out a head" panel, shown in the Attention and Sentiment tabs: ablate any set of heads
and see the prediction's probability move, or rank every head by its own effect, plotted against
how strongly each head looks at its top token, so that attention and causal effect can be compared;
a sentence says what the sign of each change means."""

import html

import gradio as gr

from demo import plots
from demo.serving import SENTIMENT, DemoService, failure
from demo.tabs import export_panel
from demo.tabs.common import bind, lenient, notice_markdown
from demo.text import code_span
from demo.views.ablation import HeadRanking, ablate_heads, head_names, lm_head_name, rank_heads
from demo.views.heads import head_table
from demo.views.meanings import EXAMPLE as MEANINGS_EXAMPLE
from demo.views.meanings import meanings
from inspection.head_kinds import KINDS

ABLATION_INTRO = ("### Knock out a head\n"
                  "Attention shows where a head looks, not whether it matters. Knock heads out (**zero**: the head "
                  "writes nothing; **mean**: it writes its average over this text's positions) and watch the "
                  "prediction move: P(label) for the sentiment model, the next token's probability for the "
                  "language model. *Rank every head* knocks each one out alone.")
RANK_HEADERS = ["rank", "head", "P after", "change", "looks most at", "its weight"]
NO_EFFECT = 0.005  # a smaller change of the probability is read as none


def effect_sentence(prediction: str, before: float, after: float, heads: list[str]) -> str:
    """What knocking `heads` out did, and what its sign means: a head whose removal lowers the
    probability was helping the prediction; one whose removal raises it was pushing against it."""
    which = ", ".join(heads)
    it = "this head" if len(heads) == 1 else "these heads"
    change = after - before
    if abs(change) < NO_EFFECT:
        return (f"Knocking out {which} leaves {prediction} at {before:.3f} → {after:.3f}: the prediction does not "
                f"rest on {it} here.")
    if change < 0:
        return (f"Knocking out {which} **lowered** {prediction}, {before:.3f} → {after:.3f} ({change:+.3f}): "
                f"{it} helped the prediction.")
    return (f"Knocking out {which} **raised** {prediction}, {before:.3f} → {after:.3f} ({change:+.3f}): {it} "
            "pushed *against* the prediction.")


def ranking_figure(ranking: HeadRanking):
    """Each head: its top attention weight (x) against the probability change when it is knocked out (y)."""
    import plotly.graph_objects as go

    rows = ranking.rows
    figure = go.Figure(go.Scatter(
        x=[r.weight for r in rows], y=[r.delta for r in rows], mode="markers+text", text=[r.head for r in rows],
        textposition="top center", textfont={"size": 9},
        marker={"color": [plots.score_colour(-1.0 if r.delta > 0 else 1.0, 1.0) for r in rows]},
        customdata=[[html.escape(r.looks_at, quote=False), r.ablated] for r in rows],
        hovertemplate="%{text}: looks at “%{customdata[0]}” with weight %{x:.2f}<br>knocked out: "
                      f"{ranking.prediction} = %{{customdata[1]:.3f}} (%{{y:+.3f}})<extra></extra>"))
    figure.add_hline(y=0, line={"color": "grey", "width": 1})
    plots.titled(figure, f"Where a head looks vs what it does ({ranking.mode})<br>blue: helps the prediction, "
                         "orange: against it", f"rank correlation of |change| and weight: {ranking.agreement:.2f}")
    figure.update_layout(xaxis_title="the head's weight on the token it looks at most",
                         yaxis_title=f"change of {ranking.prediction}", height=480,
                         margin={"l": 10, "r": 10, "b": 10}, plot_bgcolor="white")
    return figure


def head_choices(service: DemoService, model_name):
    """The head checkboxes for a model (none when it is not loaded)."""
    try:
        return gr.update(choices=head_names(service, model_name), value=[])
    except Exception:
        return gr.update(choices=[], value=[])


def knock_out(service: DemoService, text, model_name, heads, mode):
    """The prediction's probability with every head and with the chosen heads knocked out."""
    try:
        result = ablate_heads(service, model_name, text, heads, mode)
    except Exception as e:
        return failure(e)
    return notice_markdown(result.notices) + "\n\n" + effect_sentence(result.prediction, result.before, result.after,
                                                                      result.heads) + f" ({result.mode} ablation)"


def rank(service: DemoService, text, model_name, mode):
    """Every head knocked out alone: a plot against attention, the table, and a summary."""
    try:
        ranking = rank_heads(service, model_name, text, mode)
    except Exception as e:
        return None, None, failure(e)
    table = [[i, r.head, round(r.ablated, 4), round(r.delta, 4), r.looks_at, round(r.weight, 3)]
             for i, r in enumerate(ranking.rows, start=1)]
    top = ranking.rows[0]
    most_attentive = max(ranking.rows, key=lambda r: r.weight)
    summary = (f"Each head knocked out alone; the one that moves {ranking.prediction} most is **{top.head}**. "
               + effect_sentence(ranking.prediction, ranking.base, top.ablated, [top.head])
               + f" The head that looks hardest at one token, {most_attentive.head} ({most_attentive.weight:.2f} on "
               f"{code_span(most_attentive.looks_at)}), ranks #{ranking.rows.index(most_attentive) + 1} of "
               f"{len(ranking.rows)} by effect: where a head looks does not say what it does.")
    return ranking_figure(ranking), table, notice_markdown(ranking.notices) + "\n\n" + summary


HEADS_INTRO = ("### Heads with names\n"
               "Some heads do one recognisable thing. Each head of the language model is scored for four behaviours "
               "with names in the literature: the share of its attention on the start token (**sink**), on the token "
               "just before (**previous**), on what followed an earlier occurrence of the current token in a repeated "
               "random sequence (**induction**, Olsson et al. 2022), and on a negation from the word after it, beyond "
               "what it gives any previous token (**negation**). A head is *named* when its score reaches the kind's "
               "threshold.")
# four short columns, the head in one ("L1 H2"): on a phone (390 px) "named" stays in view (issue 61)
HEADS_HEADERS = ["head", "kind", "score", "named"]
HEADS_WIDTHS = ["22%", "30%", "23%", "25%"]  # shares of the table's width: no column pushed out of its box
HEADS_ORDER = "in the order the kinds are named above, best first within each"


def named_heads(service: DemoService) -> list[dict]:
    """/heads: every head of the served LM scored for each kind, layers and heads counted from 0 as in the
    model: [{"layer", "head", "kind", "score", "named"}, …]."""
    try:
        return head_table(service).rows()
    except Exception as e:
        return [{"error": failure(e)}]


def name_heads(service: DemoService):
    """The page's table (heads named as the page names them, "L1 H2": counted from 1), `HEADS_ORDER`, and
    its summary."""
    try:
        table = head_table(service)
    except Exception as e:
        return [], failure(e)
    rows = [[lm_head_name(s.layer, s.head), s.kind, round(s.score, 3), "yes" if s.named else ""]
            for s in sorted(table.scores, key=lambda s: (KINDS.index(s.kind), -s.score))]
    return rows, table.summary()


MEANINGS_INTRO = ("One word in three sentences: its vector (the residual stream at the word) after every layer of the "
                  "language model, and the cosine between them: 1 = the same direction, 0 = unrelated. At the "
                  "embedding a word is one row of the table whatever its meaning; the layers mix in its context, and "
                  "in this causal model only the words before it: put the words that settle its meaning first.")


def compare_meanings(service: DemoService, word, first, other, same) -> str:
    """The two cosines by depth, as a table, and what they say."""
    try:
        m = meanings(service, word, first, other, same)
    except Exception as e:
        return failure(e)
    rows = "\n".join(f"| {d} | {a:.2f} | {b:.2f} |" for d, a, b in zip(m.depths, m.other, m.same, strict=True))
    return (f"| depth | cosine, other meaning | cosine, same meaning |\n| --- | --- | --- |\n{rows}\n\n"
            + m.summary())


def build(service: DemoService, compute: dict, text: gr.Textbox, model: gr.Radio | None = None) -> None:
    """The panel under `text`; `model` picks the model (the Attention tab's radio), else the sentiment
    model. Endpoints `/ablate` and `/rank_heads` take the model explicitly (the Attention tab's)."""
    model_state = model if model is not None else gr.State(SENTIMENT)
    first = model.value if model is not None else SENTIMENT
    with gr.Accordion("Knock out a head (ablation)", open=False):
        gr.Markdown(ABLATION_INTRO)
        # lenient: the API takes any names (the other model's heads too), and the service explains a bad one
        heads = lenient(gr.CheckboxGroup(head_choices(service, first)["choices"], label="Heads to knock out",
                                         elem_classes=["ablation-heads"]))
        with gr.Row():
            mode = lenient(gr.Radio(["zero", "mean"], value="zero", label="Ablation"))
            knock = gr.Button("Knock out", variant="primary")
            rank_btn = gr.Button("Rank every head by its effect")
        result = gr.Markdown()
        name = "ablation" if model is not None else "ablation-sentiment"  # the panel is on the page twice
        plot = gr.Plot(label="Each head: attention weight vs effect of knocking it out", show_label=False,
                       elem_id=f"{name}-plot")
        export_panel.image_buttons(plot)
        table = gr.Dataframe(headers=RANK_HEADERS, label="Heads by effect (largest change first)",
                             interactive=False, max_height=320)
        export_panel.html_button("Knocking out attention heads", name,
                                 [("markdown", result), ("figure", plot), ("table", table)])
    if model is not None:  # the language model's heads, once on the page
        with gr.Accordion("Heads with names", open=False):
            gr.Markdown(HEADS_INTRO)
            name_btn = gr.Button("Score every head of the language model", elem_id="heads-score")
            head_rows = gr.Dataframe(headers=HEADS_HEADERS, interactive=False, max_height=320,
                                     column_widths=HEADS_WIDTHS, label=f"Every head and kind ({HEADS_ORDER})",
                                     elem_id="heads-table")
            head_summary = gr.Markdown()
        name_btn.click(bind(name_heads, service), None, [head_rows, head_summary], api_name="name_heads",
                       api_visibility="private", **compute)
        gr.api(bind(named_heads, service), api_name="heads", **compute)
        with gr.Accordion("Same word, two meanings", open=False):
            gr.Markdown(MEANINGS_INTRO)
            word = gr.Textbox(MEANINGS_EXAMPLE[0], label="Word", max_lines=1, elem_id="meanings-word")
            first, other, same = (gr.Textbox(text, label=label, max_lines=2) for text, label in zip(
                MEANINGS_EXAMPLE[1:], ("A sentence", "The word meaning something else",
                                       "The word meaning what it meant in the first"), strict=True))
            compare_btn = gr.Button("Compare the word's vectors", elem_id="meanings-run")
            compared = gr.Markdown(elem_id="meanings-result")
        compare_btn.click(bind(compare_meanings, service), [word, first, other, same], compared,
                          api_name="two_meanings", api_visibility="private", **compute)
    public = {"api_visibility": "public" if model is not None else "private"}
    suffix = "" if model is not None else "_sentiment"
    if model is not None:
        model.change(bind(head_choices, service), model, heads, api_name="ablation_heads",
                     api_visibility="private", queue=False)
    knock.click(bind(knock_out, service), [text, model_state, heads, mode], result, api_name="ablate" + suffix,
                **public, **compute)
    rank_btn.click(bind(rank, service), [text, model_state, mode], [plot, table, result],
                   api_name="rank_heads" + suffix, **public, **compute)

