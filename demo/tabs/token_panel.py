"""The Chat tab's "Why this token?" panel: one generated token attributed to every earlier token
(`demo.token_explain`), optionally against an alternative; and the `/explain_token` endpoint, which
does the same for any text."""

import gradio as gr

from demo.inference import DemoService
from demo.tabs import export_panel
from demo.tabs.common import DEFAULT_METHOD, bind, failure, lenient, notice_markdown
from demo.tabs.sampling_panel import pick_row
from demo.token_explain import TokenExplanation
from inspection import METHODS

TOKEN_INTRO = ("### Why this token?\n"
               "Pick a step (or click its row in the table) and a method: every earlier token, prompt and "
               "generated, is shaded by how much it raised (red) or lowered (blue) the model's log-probability "
               "of that token. Type an alternative (e.g. copied from the row's top list, where ␣ is a space; a "
               "word's first token is used) to ask why this token *rather than* that one.")


def _outputs(result: TokenExplanation) -> tuple[list, str]:
    return result.highlights, notice_markdown(result.notices) + "\n\n" + result.summary


def explain_token(service: DemoService, text: str, position: float, method: str = DEFAULT_METHOD,
                  alternative: str = "") -> tuple[list | None, str]:
    """/explain_token: token `position` (1-based, after the start token) of `text` -> shading
    [(token, score in [-1, 1] or None)], a Markdown summary."""
    try:
        return _outputs(service.explain_token(text, position, method, alternative))
    except Exception as e:
        return None, failure(e)


def explain_step(service: DemoService, generated, step, method, alternative):
    try:
        return _outputs(service.explain_step(generated, step, method, alternative))
    except Exception as e:
        return None, failure(e)


def build(service: DemoService, compute: dict, generated: gr.State, table: gr.Dataframe) -> list[gr.Component]:
    """The panel under the chat's table; `generated` holds the last continuation's token ids. Returns
    its views (shading, summary), for the chat to empty when the reply they describe goes."""
    with gr.Accordion("Why this token?", open=False):
        gr.Markdown(TOKEN_INTRO)
        with gr.Row():
            step = lenient(gr.Number(value=1, precision=0, label="Step", minimum=1, elem_id="token-step"))
            method = lenient(gr.Radio(list(METHODS), value=DEFAULT_METHOD, label="Method", elem_id="token-method",
                                      scale=2))
            alternative = gr.Textbox(label="Alternative (optional)", placeholder=" terrible", max_lines=1,
                                     elem_id="token-alternative")
        button = gr.Button("Explain this token", elem_id="token-explain")
        summary = gr.Markdown(elem_id="token-summary")
        shaded = gr.HighlightedText(label="Earlier tokens (red = for the token, blue = against)", show_legend=False,
                                    combine_adjacent=False, elem_id="token-shading")
        export_panel.html_button("Why this token?", "why-token", [("markdown", summary), ("highlights", shaded)])
    gr.api(bind(explain_token, service), api_name="explain_token", **compute)  # any text: no chat needed
    button.click(bind(explain_step, service), [generated, step, method, alternative], [shaded, summary],
                 api_name="explain_step", api_visibility="private", **compute)
    table.select(pick_row, None, step, queue=False, api_visibility="private")
    return [shaded, summary]
