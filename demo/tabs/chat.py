"""The Chat tab: the language model continues a review, streamed, with each token's probability."""

from contextlib import closing

import gradio as gr

from demo import plots
from demo.serving import DemoError, DemoService, Replies, failure, paced, read_number, run_ahead, visitor_text
from demo.tabs import browser, export_panel, sampling_panel, token_panel
from demo.tabs.common import bind, lenient, notice_markdown
from demo.text import LENS_INTRO, PROBABILITY_BANDS, TABLE_HEADERS, TABLE_LABEL, chat_intro, lm_openings, own_text
from demo.views import chat as chat_view
from demo.views import sentiment
from demo.views.chat import TokenView, empty_prompt
from demo.views.lens import LensView, lens_view
from tokenization import clean_text, visible

CONTINUATION = "…"  # the bot's message continues the visitor's text, so it starts with an ellipsis
# at most 8 updates a second: each costs the server a few ms of Python that the model waits out
# (streamed tokens/s against direct: 85-95% at 10 a second, 93-96% at 8; docs/log.md)
UPDATE_SECONDS = 0.125
PROBABILITY_COLOURS = {category: colour for _, category, colour in PROBABILITY_BANDS}
REPLIES = Replies()  # the reply each visitor's session is streaming, for Stop and Clear to end
SPEEDS = [("1", 1), ("3", 3), ("8", 8), ("20", 20), ("max", 0)]  # tokens a second; 0: as fast as it computes
DEFAULT_SPEED = 8  # slow enough to read the tokens arrive, fast enough not to wait
# On a phone the chat box starts small, so that the text box is on the first screen, a table's headings
# wrap between words, never inside one ("probab / ility"), and the logit lens's cells narrow (more layers in view)
CSS = """
#chat-table th, #chat-table th * { overflow-wrap: normal !important; word-break: normal !important; hyphens: none; }
@media (max-width: 640px) { #chatbot { max-height: 260px !important; } }
@media (max-width: 640px) {
  #chat-lens-table td { max-width: 4.5em !important; } #chat-lens-table table { font-size: 11px !important; }
  /* tables wider than a phone scroll sideways in their own box: say so, since a phone shows no scroll bar */
  #chat-lens-table .lens::before, #chat-table::after { display: block; font-size: 12px; color: #64748b;
    content: "Swipe the table sideways for every column."; }
  #chat-table::after { padding: 4px 8px; }
}
"""


def message_text(message: dict) -> str:
    """Text of a chat message, whether its content is a string or Gradio's list of parts."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def probability_band(prob: float) -> str:
    return next(category for bound, category, _ in PROBABILITY_BANDS if prob >= bound)


def token_highlights(steps: list[TokenView]) -> list[tuple[str, str]]:
    """Generated tokens coloured by the model's probability of them, in four bands (the exact
    numbers are in the table below)."""
    return [(visible(step.token).replace("↵", "↵\n"), probability_band(step.prob)) for step in steps]


def token_table(steps: list[TokenView], first: int = 1) -> list[list]:
    """One row per generated step, numbered from `first`: the token, its probability and the top
    alternatives."""
    rows = []
    for i, step in enumerate(steps, start=first):
        alternatives = "   ".join(f"{visible(t, show_spaces=True)} {p:.3f}" for t, p in step.alternatives)
        rows.append([i, visible(step.token, show_spaces=True), round(step.prob, 3), alternatives])
    return rows


def retry_button(streaming: bool):
    """Retry is disabled while a reply streams: as in the chat tools people use, only Stop acts on a
    reply in progress, and Retry never starts a second reply beside the first."""
    return gr.Button(interactive=not streaming)


def session_of(request: gr.Request | None) -> str | None:
    """The visitor's session, which Stop and Clear share with the reply they end (None: a direct call)."""
    return request.session_hash if request else None


def tokens_per_second(speed: object) -> float:
    """The speed control's value as tokens a second; 0 (or anything not a positive number): as fast as
    the model computes them."""
    return read_number(speed, 0, low=0, high=1000)


def chat(service: DemoService, message, history, max_new_tokens, temperature, top_k, top_p, seed,
         speed=DEFAULT_SPEED, request: gr.Request | None = None):
    """Stream a continuation of `message` at `speed` tokens a second (0: as fast as it computes):
    outputs are chatbot, textbox, tokens, table, notice, and (not part of the API: a `gr.State` and a
    button) the token ids for the logit lens once done and the Retry button, disabled until the reply
    ends. Stop and Clear end it at its next update (`demo.serving.replies`), with a last update that shows the
    stopped reply or the cleared chat."""
    history = list(history or [])
    text, cleaning = visitor_text(message)  # the history shows the cleaned text
    if not clean_text(text):
        empty = failure(DemoError(empty_prompt(service.lm.metrics)))
        yield history, message, gr.skip(), gr.skip(), empty, gr.skip(), gr.skip()
        return
    history += [{"role": "user", "content": text}, {"role": "assistant", "content": CONTINUATION}]
    session = session_of(request)
    with REPLIES.streaming(session) as reply:  # Stop and Clear reach it from here on
        yield history, "", [], [], "✍️ Writing…", None, retry_button(streaming=True)
        try:
            updates = paced(chat_view.stream_continuation(service, text, max_new_tokens, temperature, top_k, top_p,
                                                          seed), tokens_per_second(speed))
            highlights, rows = [], []  # grown by the new steps of each update: every update holds all steps
            with closing(run_ahead(updates, UPDATE_SECONDS)) as stream:  # generation goes on while Gradio renders
                for update in stream:
                    if reply.ended_by is not None:
                        if not REPLIES.is_latest(session, reply):
                            return
                        if reply.ended_by == "clear":
                            yield cleared(textbox=gr.skip())  # text typed since Clear stays
                        else:  # stopped: the reply stays as shown, and so does the lens it leaves
                            yield gr.skip(), gr.skip(), gr.skip(), gr.skip(), stopped_notice(len(rows)), gr.skip(), \
                                retry_button(streaming=False)
                        return
                    history[-1] = {"role": "assistant", "content": CONTINUATION + update.text}
                    notices = cleaning + update.notices + (
                        [f"Done: {len(update.steps)} tokens (seed {update.seed})."] if update.done else [])
                    generated = (list(update.token_ids), len(update.steps))  # kept at each step: Stop leaves a lens
                    new = update.steps[len(rows):]
                    highlights += token_highlights(new)
                    rows += token_table(new, first=len(rows) + 1)
                    # gr.skip() for the textbox: what the visitor types during the stream stays
                    yield (history, gr.skip(), list(highlights), list(rows), notice_markdown(notices), generated,
                           retry_button(streaming=not update.done))
        except Exception as e:
            if message_text(history[-1]) == CONTINUATION:
                history = history[:-1]  # no reply at all: drop the empty bubble
            yield history, gr.skip(), gr.skip(), gr.skip(), failure(e), gr.skip(), retry_button(streaming=False)


def retry(service: DemoService, history, max_new_tokens, temperature, top_k, top_p, seed, speed=DEFAULT_SPEED,
          request: gr.Request | None = None):
    """Drop the last exchange and generate again from the same opening."""
    history = list(history or [])
    users = [i for i, m in enumerate(history) if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        yield (history, gr.skip(), gr.skip(), gr.skip(), failure(DemoError("Nothing to retry yet.")), gr.skip(),
               gr.skip())
        return
    last = users[-1]
    yield from chat(service, message_text(history[last]), history[:last], max_new_tokens, temperature, top_k,
                    top_p, seed, speed, request)


def stopped_notice(n: int) -> str:
    return f"⏹ Stopped after {n} tokens; the logit lens reads the {n} shown." if n else "⏹ Stopped before any token."


def stopped(generated, request: gr.Request | None = None):
    """Stop was pressed: the reply in progress ends at its next update; say so now, with what the
    logit lens will read (the reply's own last update confirms it); Retry can regenerate the turn."""
    REPLIES.end(session_of(request), "stop")
    return stopped_notice(generated[1] if generated else 0), retry_button(streaming=False)


def clear(request: gr.Request | None = None):
    """An empty chat and every view of it emptied (tokens, table, notice, rating, lens); the reply in
    progress ends at its next update, with the same empty chat. Retry enabled, as the reply in
    progress had disabled it."""
    REPLIES.end(session_of(request), "clear")
    *chat_views, retry_enabled = cleared(textbox="")
    return *chat_views, None, "", "", "", retry_enabled, None  # and the rating, the lens, their notices, the lens data


def cleared(textbox) -> tuple:
    """The chat's outputs emptied: chat, textbox, tokens, table, notice, lens token ids, Retry enabled."""
    return [], textbox, [], [], "", None, retry_button(streaming=False)


def emptying(views: list[gr.Component]) -> str:
    """A browser-side function giving each of `views` its empty value, as the server would send it."""
    empty = [getattr(value, "model_dump", lambda: value)() for value in (view.postprocess(None) for view in views)]
    return browser.call("set_outputs", empty)


def lens_summary(view: LensView) -> str:
    """What the lens says, from its numbers: for how many tokens written the model's own first choice
    (the last column) was that token, and from which layer on, on average, it had been the best guess;
    the others the sampler drew from further down the list."""
    n, layers = len(view.tokens), len(view.layers)
    formed = []  # for each token the model ranked first: the first column from which it stays the best guess
    for j, token in enumerate(view.tokens):
        column = layers
        while column > 0 and view.top_tokens[column - 1][j][0] == token:
            column -= 1
        if column < layers:
            formed.append(column)
    if not formed:
        return (f"None of the {n} tokens written was the model's own first choice (last column): the sampler "
                "drew a less likely token each time, as a temperature above 0 and top-k / top-p allow.")
    average = sum(formed) / len(formed)
    others = n - len(formed)
    drawn = (f"; the other {'one was' if others == 1 else f'{others} were'} drawn from further down its list"
             if others else "")
    return (f"The model's own first choice (last column) was the token written for **{len(formed)} of {n}** "
            f"tokens{drawn}. Those became the best guess, and stayed it, from **{view.layers[round(average)]}** "
            "on average: the layers before it guessed something else, or echoed the input.")


def look_inside(service: DemoService, generated):
    """The logit lens of the last continuation: a table, a notice that says what it shows, and (a
    `gr.State`, for the export) the view it was drawn from."""
    try:
        token_ids, n_generated = generated or ((), 0)
        view = lens_view(service, token_ids, n_generated)
        return plots.lens_html(view), notice_markdown(view.notices) + "\n\n" + lens_summary(view), view
    except Exception as e:
        return "", failure(e), None


def rate_reply(service: DemoService, history):
    """Classify the bot's last reply with the sentiment model."""
    replies = [message_text(m) for m in (history or []) if isinstance(m, dict) and m.get("role") == "assistant"]
    reply = replies[-1].removeprefix(CONTINUATION) if replies else ""
    if not reply.strip():
        return None, failure(DemoError("Generate a reply first, then ask how positive it is."))
    try:
        result = sentiment.classify(service, reply)
    except Exception as e:
        return None, failure(e)
    return result.probabilities, notice_markdown(
        [f"The sentiment model read the reply and says: **{result.label}**."] + result.notices)


def build(service: DemoService, compute: dict) -> None:
    """The tab's components and events; `compute` holds the queue settings every model call shares."""
    vocab = service.lm.model.config.vocab_size if service.lm.ready else 8192
    openings, kind = lm_openings(service.lm.metrics), "text" if own_text(service.lm.metrics) else "review"
    gr.Markdown(chat_intro(service.lm.metrics))
    with gr.Row():
        with gr.Column(scale=3):
            # grows with the reply up to 360 px, rather than an empty 360 px box above the text box
            chatbot = gr.Chatbot(label=f"{kind.capitalize()} writer", height=None, min_height=100, max_height=360,
                                 elem_id="chatbot", render_markdown=False, feedback_options=None, buttons=["copy"])
            prompt = gr.Textbox(label=f"Opening of a {kind} (Enter sends, Shift+Enter: new line)",
                                placeholder=openings[0], lines=1, max_lines=8, elem_id="chat-input")
            with gr.Row():
                send = gr.Button("Continue", variant="primary", elem_id="chat-send")
                stop = gr.Button("Stop", variant="stop", elem_id="chat-stop")
                retry_btn = gr.Button("Retry", elem_id="chat-retry")
                clear_btn = gr.Button("Clear", elem_id="chat-clear")
            chat_notice = gr.Markdown(elem_id="chat-notice")
            gr.Examples(openings, inputs=prompt, label="Example openings")
        with gr.Column(scale=2):
            speed = lenient(gr.Radio(SPEEDS, value=DEFAULT_SPEED, label="Speed: tokens per second (max: as fast "
                                     "as the model writes)", elem_id="chat-speed"))
            max_new = lenient(gr.Slider(1, 256, value=60, step=1, label="Max new tokens"))
            temperature = lenient(gr.Slider(0, 2, value=0.8, step=0.05, label="Temperature (0 = greedy)"))
            top_k = lenient(gr.Slider(0, vocab, value=40, step=1, label="Top-k (0 = off)"))
            top_p = lenient(gr.Slider(0.01, 1, value=0.95, step=0.01, label="Top-p (1 = off)"))
            seed = lenient(gr.Number(value=-1, precision=0, label="Seed (-1 = random)", elem_id="chat-seed"))
            # the IMDb classifier's verdict: meant for a movie review, so not offered on a reply in another text's
            # style (`python -m demo --lm RUN` of a text of its own)
            reviews = own_text(service.lm.metrics) is None
            rate = gr.Button("How positive is this?", elem_id="chat-rate", visible=reviews)
            rating = gr.Label(label="Sentiment of the reply", num_top_classes=3, elem_id="chat-rating",
                              visible=reviews)
            rate_notice = gr.Markdown(visible=reviews)
    token_view = gr.HighlightedText(
        label="Generated tokens, coloured by the model's probability of each", elem_id="chat-tokens",
        color_map=PROBABILITY_COLOURS, show_legend=True, show_inline_category=False, combine_adjacent=False)
    table = gr.Dataframe(headers=TABLE_HEADERS, label=TABLE_LABEL, interactive=False, max_height=320, wrap=True,
                         elem_id="chat-table")
    gr.Markdown(LENS_INTRO)
    lens_btn = gr.Button("Look inside: logit lens", elem_id="chat-lens")
    lens_notice = gr.Markdown(elem_id="chat-lens-notice")
    lens_plot = gr.HTML(elem_id="chat-lens-table")
    lens_drawn = gr.State(None)  # what the lens was drawn from, for the export
    export_panel.html_button("Logit lens", "logit-lens", [("markdown", lens_notice), ("lens", lens_drawn)])
    generated = gr.State(None)  # (token ids, number generated) of the last continuation
    panel_views = [*sampling_panel.build(service, compute, generated, temperature, top_k, top_p, table),
                   *token_panel.build(service, compute, generated, table)]

    settings = [max_new, temperature, top_k, top_p, seed, speed]
    outputs = [chatbot, prompt, token_view, table, chat_notice, generated]
    stream = {**compute, "show_progress": "hidden"}
    replying = [*outputs, retry_btn]  # and the Retry button, disabled while the reply streams (no part of the API)
    # the panels' figures, tables and texts describe the last reply: emptied when Clear removes it or a new
    # reply replaces it (an event of their own: /clear's and /chat's outputs are the API's). The browser
    # runs one trigger's events in order, each once the last has ended: registered after /chat, this
    # would wait for the whole new reply; as a server call, it would hold up the reply by a round trip.
    # So it comes first and runs in the browser.
    gr.on([clear_btn.click, prompt.submit, send.click, retry_btn.click], None, None, panel_views,
          js=emptying(panel_views), queue=False)
    # Enter and Continue are one event: sent during a reply, the new text waits for the reply to end and
    # then goes (Gradio would otherwise drop the press silently, or run a second reply beside the first)
    gr.on([prompt.submit, send.click], bind(chat, service), [prompt, chatbot, *settings], replying,
          api_name="chat", trigger_mode="always_last", **stream)
    retry_btn.click(bind(retry, service), [chatbot, *settings], replying, api_name="retry", trigger_mode="always_last",
                    **stream)
    # Stop and Clear end the reply in progress from inside it, not by Gradio's `cancels` (see demo/serving/replies.py)
    stop.click(stopped, generated, [chat_notice, retry_btn], api_name="stop", api_visibility="private", queue=False)
    clear_btn.click(clear, None, [*outputs, rating, lens_plot, rate_notice, lens_notice, retry_btn, lens_drawn],
                    api_name="clear", queue=False)
    rate.click(bind(rate_reply, service), chatbot, [rating, rate_notice], api_name="rate_reply", **compute)
    lens_btn.click(bind(look_inside, service), generated, [lens_plot, lens_notice, lens_drawn], api_name="logit_lens",
                   api_visibility="private", **compute)
