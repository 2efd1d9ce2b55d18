"""The Chat tab's "Why this token?" panel: one generated token attributed to every earlier token
(`demo.views.token_explain`), optionally against an alternative; and the `/explain_token` endpoint, which
does the same for any text."""

import gradio as gr

from demo import plots
from demo.serving import DemoService, failure
from demo.tabs import export_panel
from demo.tabs.common import DEFAULT_METHOD, bind, lenient, notice_markdown
from demo.tabs.sampling_panel import pick_row
from demo.text import METHOD_CHOICES, method_name
from demo.views import token_explain
from demo.views.token_explain import TokenExplanation

TOKEN_INTRO = ("### Why this token?\n"
               "Pick a step (or click its row in the table) and a method: every earlier token, prompt and "
               "generated, is shaded by how much it raised or lowered the model's log-probability of that token. "
               "Type an alternative (e.g. copied from the row's top list, where ␣ is a space; a word's first token "
               "is used) to ask why this token *rather than* that one.")


def _summary(result: TokenExplanation) -> str:
    return notice_markdown(result.notices) + "\n\n" + result.summary


def shading(result: TokenExplanation) -> tuple:
    """The shading's data (segments, heading, prediction), as `plots.shading_html` draws it."""
    towards = f"“{result.token}”" + (f" rather than “{result.alternative}”" if result.alternative else "")
    return result.highlights, f"Earlier tokens, shaded by {method_name(result.method)}", towards


def explain_token(service: DemoService, text: str, position: float, method: str = DEFAULT_METHOD,
                  alternative: str = "") -> tuple[list | None, str]:
    """/explain_token: token `position` (1-based, after the start token) of `text` -> shading
    [(token, score in [-1, 1] or None)], a Markdown summary."""
    try:
        result = token_explain.explain_text(service, text, position, method, alternative)
    except Exception as e:
        return None, failure(e)
    return result.highlights, _summary(result)


def explain_step(service: DemoService, generated, step, method, alternative):
    """The page's panel: the shading drawn, the summary, and the shading's data for the export."""
    try:
        result = token_explain.explain_step(service, generated, step, method, alternative)
    except Exception as e:
        return "", failure(e), None
    data = shading(result)
    return plots.shading_html(*data), _summary(result), data


def build(service: DemoService, compute: dict, generated: gr.State, table: gr.Dataframe) -> list[gr.Component]:
    """The panel under the chat's table; `generated` holds the last continuation's token ids. Returns
    its views (shading, summary), for the chat to empty when the reply they describe goes."""
    with gr.Accordion("Why this token?", open=False):
        gr.Markdown(TOKEN_INTRO)
        with gr.Row():
            step = lenient(gr.Number(value=1, precision=0, label="Step", minimum=1, elem_id="token-step"))
            method = lenient(gr.Radio(METHOD_CHOICES, value=DEFAULT_METHOD, label="Method", elem_id="token-method",
                                      scale=2))
            alternative = gr.Textbox(label="Alternative (optional)", placeholder=" terrible", max_lines=1,
                                     elem_id="token-alternative")
        button = gr.Button("Explain this token", elem_id="token-explain")
        summary = gr.Markdown(elem_id="token-summary")
        shaded = gr.HTML(elem_id="token-shading")
        data = gr.State(None)  # the shading's data, for the export
        export_panel.html_button("Why this token?", "why-token", [("markdown", summary), ("shading", data)])
    gr.api(bind(explain_token, service), api_name="explain_token", **compute)  # any text: no chat needed
    button.click(bind(explain_step, service), [generated, step, method, alternative], [shaded, summary, data],
                 api_name="explain_step", api_visibility="private", **compute)
    table.select(pick_row, None, step, queue=False, api_visibility="private")
    return [shaded, summary]
