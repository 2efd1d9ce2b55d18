"""The Gradio app: one `gr.Blocks` page with Chat, Sentiment, Attention, Tokenizer and About tabs.

This module only wires `demo.inference.DemoService` into components: every handler turns the
service's dataclasses into component values and every failure into a friendly notice (a
`gr.Markdown`), so a visitor never sees an error box or a stack trace.

Run it with `python -m demo` or, as Hugging Face Spaces does with its `app_file`,
`python demo/app.py`.
"""

import argparse
import base64
import html
import json
import logging
import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# `python demo/app.py` puts demo/ first on sys.path, where the `model` and `tokenization`
# packages are not; put the repository root there instead (and keep demo/ from shadowing
# top-level modules).
if sys.path and Path(sys.path[0] or ".").resolve() == REPO_ROOT / "demo":
    sys.path[0] = str(REPO_ROOT)
elif str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import gradio as gr  # noqa: E402
import torch  # noqa: E402

from demo import plots  # noqa: E402
from demo.inference import (  # noqa: E402
    EMPTY_PROMPT,
    LM,
    SENTIMENT,
    ChatUpdate,
    CheckpointInfo,
    DemoError,
    DemoService,
    clean_text,
    model_text,
    scrub_paths,
    visible,
)

log = logging.getLogger("demo")

DEFAULT_CHECKPOINTS = REPO_ROOT / "checkpoints"
CONCURRENCY = 4  # requests computed at once; more wait in the queue (2 CPU cores on a free Space)
QUEUE_SIZE = 64
CONTINUATION = "…"  # the bot's message continues the visitor's text, so it starts with an ellipsis
INTERNAL_ERROR = "Sorry, something went wrong on our side (it has been logged). Please try other input."

CHAT_EXAMPLES = [
    "This movie was",
    "I went into this film expecting very little, but",
    "The acting was wooden and the plot",
    "If you love old westerns, you will",
    "My kids dragged me to see this and honestly",
]
SENTIMENT_EXAMPLES = [
    "A wonderful film. The acting is superb, the story is moving and the ending left me in tears. "
    "One of the best movies I have seen in years, highly recommended!",
    "I loved every minute of it: funny, clever and beautifully shot. I will watch it again.",
    "What a waste of time. The plot makes no sense, the dialogue is awful and the acting is even worse. "
    "Avoid this one.",
    "Boring and far too long. I fell asleep halfway through and did not miss anything.",
]
ATTENTION_EXAMPLE = "The movie was not bad at all, I really enjoyed it."

CSS = """
.tok-pieces { line-height: 2.1; white-space: pre-wrap; font-family: ui-monospace, monospace; }
.tok-pieces span { border-radius: 4px; padding: 1px 2px; margin: 0 1px; color: #111; }
.tok-pieces sub { font-size: 0.65em; color: #555; margin-left: 1px; }
"""


def lenient(component):
    """Let the component's API accept any value. `gr.Slider`/`gr.Number` reject out-of-range or
    non-numeric values with an error, while the service clamps them and says so (a script may
    send temperature -1 or top-k 10**6).

    The check is switched off on the instance: subclassing a Gradio component would make Gradio
    write a `.pyi` stub next to this file at import time.
    """
    component.preprocess = lambda payload: payload  # type: ignore[method-assign]
    return component


# ---------------------------------------------------------------------------------------------
# formatting helpers (pure functions: service results -> component values)


def notice_markdown(notices: list[str]) -> str:
    """Notices as a Markdown list (never containing visitor text, so no escaping is needed)."""
    return "\n".join(f"- ℹ️ {n}" for n in notices)


def failure(e: Exception) -> str:
    """The notice for an exception: the visitor's own message, or a generic one (and a log)."""
    if isinstance(e, DemoError):
        return f"ℹ️ {e}"
    log.exception("request failed")
    return f"⚠️ {INTERNAL_ERROR}"


def message_text(message: dict) -> str:
    """Text of a chat message, whether its content is a string or Gradio's list of parts."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _fmt(value) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _short_params(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}k"


def header_markdown(service: DemoService) -> str:
    """Which device and checkpoints are in use, with a warning for missing or untrained ones."""
    lines = ["# Tiny Transformers, built from scratch",
             "A small GPT-style language model and an encoder-decoder sentiment model, "
             "both written from scratch in PyTorch and trained on IMDb movie reviews.",
             ""]
    parts = [f"**Device:** {service.device_description()}"]
    for info, title in [(service.lm_info, "LM"), (service.sentiment_info, "Sentiment")]:
        if info.ready:
            m = info.metrics
            score = ""
            if "val_ppl" in m:
                score = f", val ppl {_fmt(m['val_ppl'])}"
            elif "val_accuracy" in m:
                score = f", val acc {_fmt(m['val_accuracy'])}"
            parts.append(f"**{title}:** `{info.location}` ({_short_params(info.parameters)} params{score})")
        else:
            parts.append(f"**{title}:** not loaded")
    lines.append(" · ".join(parts))
    warnings = list(service.notices)
    for info, title in [(service.lm_info, "Language model"), (service.sentiment_info, "Sentiment model")]:
        if info.message:
            warnings.append(f"{title}: {info.message}.")
    lines += [""] + [f"> ⚠️ {w}" for w in warnings]
    return "\n".join(lines)


PROBABILITY_BANDS = [  # (lower bound, category, colour): a legend a visitor can read at a glance
    (0.5, "likely (≥ 50%)", "#86efac"),
    (0.1, "plausible (10–50%)", "#fde68a"),
    (0.01, "unlikely (1–10%)", "#fdba74"),
    (0.0, "surprising (< 1%)", "#fca5a5"),
]
PROBABILITY_COLOURS = {category: colour for _, category, colour in PROBABILITY_BANDS}


def probability_band(prob: float) -> str:
    return next(category for bound, category, _ in PROBABILITY_BANDS if prob >= bound)


def token_highlights(update: ChatUpdate) -> list[tuple[str, str]]:
    """Generated tokens coloured by the model's probability of them, in four bands (the exact
    numbers are in the table below)."""
    return [(visible(step.token).replace("↵", "↵\n"), probability_band(step.prob)) for step in update.steps]


def token_table(update: ChatUpdate) -> list[list]:
    """One row per generated step: the token, its probability and the top alternatives."""
    rows = []
    for i, step in enumerate(update.steps, start=1):
        alternatives = "   ".join(f"{visible(t, show_spaces=True)} {p:.3f}" for t, p in step.alternatives)
        rows.append([i, visible(step.token, show_spaces=True), round(step.prob, 4), alternatives])
    return rows


TABLE_HEADERS = ["step", "token", "probability", "top alternatives (probability)"]
PIECE_COLOURS = ("#dbeafe", "#fde68a")


def pieces_html(pieces: list[tuple[str, int]]) -> str:
    """BPE pieces coloured alternately, each with its id; every piece text is HTML-escaped.
    A piece made only of spaces shows them as "␣", or it would be an empty box."""
    spans = [
        f'<span style="background:{PIECE_COLOURS[i % 2]}" title="id {token_id}">'
        f"{html.escape(visible(text, show_spaces=not text.strip(' ')))}<sub>{token_id}</sub></span>"
        for i, (text, token_id) in enumerate(pieces)
    ]
    return f'<div class="tok-pieces">{"".join(spans)}</div>'


HIDDEN_METRICS = {"history", "model_config", "train_config", "samples", "data"}  # shown otherwise, or too long
MAX_METRIC_CHARS = 120


def metric_rows(metrics: dict) -> list[tuple[str, str]]:
    """(name, value) rows for whatever metrics.json holds: scalars as they are, one level of a
    nested dict flattened (`tokenizer.vocab_size`), short lists inline, long ones counted.
    Absolute paths are shortened (see `scrub_paths`)."""
    rows = []
    for key, value in metrics.items():
        if key in HIDDEN_METRICS:
            continue
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for sub, v in items:
            name = f"{key}.{sub}" if sub is not None else str(key)
            text = _fmt(v) if isinstance(v, (int, float, str)) else json.dumps(v, ensure_ascii=False)
            if len(text) > MAX_METRIC_CHARS:
                text = f"({len(v)} entries)" if isinstance(v, (list, dict)) else text[:MAX_METRIC_CHARS] + "…"
            rows.append((name, scrub_paths(text)))
    return rows


def _tail_note(config: dict) -> str:
    tail = config.get("src_keep_tail") or 0
    return f" (a longer review: its start and its last {tail})" if tail else ""


def _data_line(info: CheckpointInfo) -> str:
    default = {LM: "IMDb movie reviews (Maas et al., 2011): next-token prediction on the review text.",
               SENTIMENT: "IMDb movie reviews (Maas et al., 2011) with their labels: the encoder reads a "
                          "review, the decoder writes the label word."}[info.name]
    data = info.metrics.get("data") or info.metrics.get("dataset")
    if isinstance(data, dict):
        details = ", ".join(f"{k.replace('_', ' ')}: {_fmt(v)}" for k, v in data.items()
                            if isinstance(v, (int, float, str)))
        return f"{default} ({scrub_paths(details)})" if details else default
    return f"{default} ({scrub_paths(_fmt(data))})" if data else default


def _table_cell(text: str, code: bool = False) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return f"`{text.replace('`', 'ʼ')}`" if code else text


def about_markdown(service: DemoService) -> str:
    """Each model's size, architecture, data and metrics (whatever metrics.json holds)."""
    sections = []
    titles = {LM: "Language model (decoder-only, GPT-style)",
              SENTIMENT: "Sentiment model (encoder-decoder, text-to-text)"}
    for info in service.checkpoints:
        lines = [f"## {titles[info.name]}", ""]
        if not info.ready:
            lines.append(f"⚠️ Not loaded: {info.message}.")
            sections.append("\n".join(lines))
            continue
        c = info.config
        if info.name == LM:
            arch = (f"{c.get('n_layer')} layers, {c.get('n_head')} heads, d_model {c.get('d_model')}, "
                    f"context {c.get('block_size')} tokens, vocabulary {c.get('vocab_size')}")
        else:
            arch = (f"{c.get('n_encoder_layer')} encoder + {c.get('n_decoder_layer')} decoder layers, "
                    f"{c.get('n_head')} heads, d_model {c.get('d_model')}, reads up to {c.get('max_src_len')} "
                    f"tokens{_tail_note(c)}, labels {', '.join(c.get('labels') or [])}")
        lines += [f"- **Checkpoint:** `{info.location}`",
                  f"- **Parameters:** {info.parameters:,}",
                  f"- **Architecture:** {arch}",
                  f"- **Data:** {_data_line(info)}",
                  ""]
        if info.message:
            lines += [f"⚠️ {info.message}.", ""]
        rows = metric_rows(info.metrics)
        if rows:
            lines += ["| metric | value |", "| --- | --- |"]
            lines += [f"| {_table_cell(k)} | {_table_cell(v, code=k == 'command')} |" for k, v in rows]
        samples = info.metrics.get("samples")
        if isinstance(samples, list) and samples:
            lines += ["", "**Samples written at the end of training:**", ""]
            for sample in samples[:5]:  # model output: shown as code, never rendered as Markdown
                lines += ["```text", str(sample).replace("```", "ʼʼʼ"), "```"]
        sections.append("\n".join(lines))
    sections.append(
        "## Device and retraining\n\n"
        f"Running on **{service.device_description()}**.\n\n"
        "To retrain the models, see the **Retraining** section of the repository's README, or run "
        "`python -m training.run --help`. A new checkpoint directory is picked up at the next start "
        "(`python -m demo --checkpoints DIR`).")
    return "\n\n".join(sections)


def curve_html(info: CheckpointInfo) -> str:
    """The training curve inlined as a data URI: nothing from disk is served to the browser."""
    if not info.training_curve_png:
        return ""
    data = base64.b64encode(info.training_curve_png).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="training curve of the {info.name} model" '
            f'style="max-width:640px;width:100%"><figcaption>Training curve: {info.name}</figcaption></figure>')


# ---------------------------------------------------------------------------------------------
# the app


def build_app(service: DemoService) -> gr.Blocks:
    """Build the page. Every handler catches its own exceptions (see `failure`)."""

    # -- handlers: chat ---------------------------------------------------------------------

    def chat(message, history, max_new_tokens, temperature, top_k, top_p, seed):
        """Stream a continuation of `message`: outputs are chatbot, textbox, tokens, table, notice."""
        history = list(history or [])
        text, cleaning = clean_text(message)  # the history shows the cleaned text
        if not model_text(text):
            yield history, message, gr.skip(), gr.skip(), failure(DemoError(EMPTY_PROMPT))
            return
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": CONTINUATION}]
        yield history, "", [], [], "✍️ Writing…"
        try:
            for update in service.stream_continuation(text, max_new_tokens, temperature, top_k, top_p, seed):
                history[-1] = {"role": "assistant", "content": CONTINUATION + update.text}
                notices = cleaning + update.notices + (
                    [f"Done: {len(update.steps)} tokens (seed {update.seed})."] if update.done else [])
                yield history, "", token_highlights(update), token_table(update), notice_markdown(notices)
        except Exception as e:
            if message_text(history[-1]) == CONTINUATION:
                history = history[:-1]  # no reply at all: drop the empty bubble
            yield history, "", gr.skip(), gr.skip(), failure(e)

    def retry(history, max_new_tokens, temperature, top_k, top_p, seed):
        """Drop the last exchange and generate again from the same opening."""
        history = list(history or [])
        users = [i for i, m in enumerate(history) if isinstance(m, dict) and m.get("role") == "user"]
        if not users:
            yield history, gr.skip(), gr.skip(), gr.skip(), failure(DemoError("Nothing to retry yet."))
            return
        last = users[-1]
        yield from chat(message_text(history[last]), history[:last], max_new_tokens, temperature, top_k, top_p,
                        seed)

    def clear():
        return [], "", [], [], "", None

    def rate_reply(history):
        """Classify the bot's last reply with the sentiment model."""
        replies = [message_text(m) for m in (history or []) if isinstance(m, dict) and m.get("role") == "assistant"]
        reply = replies[-1].removeprefix(CONTINUATION) if replies else ""
        if not reply.strip():
            return None, failure(DemoError("Generate a reply first, then ask how positive it is."))
        try:
            result = service.classify(reply)
        except Exception as e:
            return None, failure(e)
        return result.probabilities, notice_markdown(
            [f"The sentiment model read the reply and says: **{result.label}**."] + result.notices)

    # -- handlers: sentiment, attention, tokenizer ------------------------------------------

    def classify(text):
        try:
            result = service.classify(text)
        except Exception as e:
            return None, None, failure(e)
        return result.probabilities, result.highlights, notice_markdown(result.notices)

    def attention_options(model_name, kind):
        """Kinds available for the chosen model, and the layers and heads of the chosen kind."""
        kinds = service.attention_kinds(model_name)
        if not kinds:
            return (gr.update(choices=[], value=None), gr.update(choices=[], value=None),
                    gr.update(choices=[], value=None))
        if kind not in [k for _, k in kinds]:
            kind = kinds[0][1]
        n_layers, n_heads = service.attention_shape(kind)
        layers = [(f"layer {i + 1}", i) for i in range(n_layers)]
        heads = [("mean over heads", plots.MEAN)] + [(f"head {h + 1}", h) for h in range(n_heads)]
        return (gr.update(choices=kinds, value=kind), gr.update(choices=layers, value=n_layers - 1),
                gr.update(choices=heads, value=plots.MEAN))

    def attention(text, kind, layer, head):
        try:
            result = service.attention(text, kind, layer)
            figure, grid = plots.heatmap(result, head), plots.heads_grid(result)
        except Exception as e:
            return None, None, failure(e)
        notes = list(result.notices)
        if result.causal:
            notes.append("The blank upper triangle is the causal mask: a token cannot look at later tokens.")
        return figure, grid, notice_markdown(notes)

    def tokenize(text):
        try:
            result = service.tokenize(text)
        except Exception as e:
            return "", failure(e)
        ratio = result.characters / max(result.count, 1)
        summary = f"**{result.count:,} tokens** for {result.characters:,} characters ({ratio:.1f} characters/token)."
        return pieces_html(result.pieces), "\n\n".join([summary, notice_markdown(result.notices)])

    # -- layout -----------------------------------------------------------------------------

    vocab = service.lm.config.vocab_size if service.lm is not None else 8192
    first_model = LM if service.lm is not None else SENTIMENT
    init_kind, init_layer, init_head = attention_options(first_model, None)
    with gr.Blocks(title="Tiny Transformers demo", analytics_enabled=False) as app:
        gr.Markdown(header_markdown(service), elem_id="header")
        with gr.Tabs():
            with gr.Tab("Chat", id="chat"):
                gr.Markdown("Write the opening of a movie review: the language model continues it, "
                            "token by token. Each message starts a new review.")
                with gr.Row():
                    with gr.Column(scale=3):
                        chatbot = gr.Chatbot(label="Review writer", height=360, elem_id="chatbot",
                                             render_markdown=False, feedback_options=None, buttons=["copy"])
                        prompt = gr.Textbox(label="Opening of a review", placeholder="This movie was",
                                            lines=2, max_lines=8, elem_id="chat-input")
                        with gr.Row():
                            send = gr.Button("Continue", variant="primary", elem_id="chat-send")
                            stop = gr.Button("Stop", variant="stop", elem_id="chat-stop")
                            retry_btn = gr.Button("Retry", elem_id="chat-retry")
                            clear_btn = gr.Button("Clear", elem_id="chat-clear")
                        chat_notice = gr.Markdown(elem_id="chat-notice")
                        gr.Examples(CHAT_EXAMPLES, inputs=prompt, label="Example openings")
                    with gr.Column(scale=2):
                        max_new = lenient(gr.Slider(1, 256, value=60, step=1, label="Max new tokens"))
                        temperature = lenient(gr.Slider(0, 2, value=0.8, step=0.05,
                                                        label="Temperature (0 = greedy)"))
                        top_k = lenient(gr.Slider(0, vocab, value=40, step=1, label="Top-k (0 = off)"))
                        top_p = lenient(gr.Slider(0.01, 1, value=0.95, step=0.01, label="Top-p (1 = off)"))
                        seed = lenient(gr.Number(value=-1, precision=0, label="Seed (-1 = random)"))
                        rate = gr.Button("How positive is this?", elem_id="chat-rate")
                        rating = gr.Label(label="Sentiment of the reply", num_top_classes=3, elem_id="chat-rating")
                        rate_notice = gr.Markdown()
                token_view = gr.HighlightedText(
                    label="Generated tokens, coloured by the model's probability of each", elem_id="chat-tokens",
                    color_map=PROBABILITY_COLOURS, show_legend=True, show_inline_category=False,
                    combine_adjacent=False)
                table = gr.Dataframe(headers=TABLE_HEADERS, label="Each step: probability and top alternatives",
                                     interactive=False, max_height=320, wrap=True, elem_id="chat-table")

            with gr.Tab("Sentiment", id="sentiment"):
                gr.Markdown("Paste a review: the sentiment model writes a label, and the review is shaded by "
                            "how much the label step's cross-attention looked at each token "
                            "(mean over heads and layers; darkest = most).")
                review = gr.Textbox(label="Review", lines=5, max_lines=14, elem_id="review-input")
                classify_btn = gr.Button("Classify", variant="primary", elem_id="review-classify")
                with gr.Row():
                    label = gr.Label(label="Sentiment", num_top_classes=5, elem_id="review-label", scale=1)
                    looked = gr.HighlightedText(label="What the model looked at (darker = more attention)",
                                                show_legend=False, combine_adjacent=False,
                                                elem_id="review-attention", scale=2)
                review_notice = gr.Markdown(elem_id="review-notice")
                gr.Examples([[t] for t in SENTIMENT_EXAMPLES], inputs=review, label="Examples (2 positive, 2 negative)")

            with gr.Tab("Attention", id="attention"):
                gr.Markdown("Any text, either model: rows are the tokens attending, columns the tokens "
                            "attended to. For the sentiment decoder the rows are the start token and the "
                            "predicted label.")
                att_text = gr.Textbox(ATTENTION_EXAMPLE, label="Text", lines=2, elem_id="att-input")
                with gr.Row():
                    att_model = gr.Radio([("Language model", LM), ("Sentiment model", SENTIMENT)],
                                         value=first_model, label="Model")
                    att_kind = gr.Dropdown(init_kind["choices"], value=init_kind["value"], label="Attention",
                                           allow_custom_value=True)
                    att_layer = gr.Dropdown(init_layer["choices"], value=init_layer["value"], label="Layer",
                                            allow_custom_value=True)
                    att_head = gr.Dropdown(init_head["choices"], value=init_head["value"], label="Head",
                                           allow_custom_value=True)
                att_btn = gr.Button("Show attention", variant="primary", elem_id="att-show")
                att_notice = gr.Markdown(elem_id="att-notice")
                with gr.Row():  # the figures carry their own titles; a label would cover them
                    att_plot = gr.Plot(label="Heatmap", show_label=False, elem_id="att-heatmap", format="png")
                    att_grid = gr.Plot(label="All heads of this layer", show_label=False, elem_id="att-grid",
                                       format="png")

            with gr.Tab("Tokenizer", id="tokenizer"):
                gr.Markdown("How the byte-level BPE tokenizer cuts text into pieces (colours alternate; "
                            "the small number is the token id; ↵ is a newline, ⟨f0 9f⟩ a piece of a "
                            "multi-byte character).")
                tok_text = gr.Textbox("Tokenization isn't magic: it's BPE! 🎬 naïve café, 映画", label="Text",
                                      lines=3, elem_id="tok-input")
                tok_btn = gr.Button("Tokenize", variant="primary", elem_id="tok-run")
                tok_html = gr.HTML(elem_id="tok-pieces")
                tok_summary = gr.Markdown(elem_id="tok-summary")

            with gr.Tab("About", id="about"):
                gr.Markdown(about_markdown(service), elem_id="about")
                for info in service.checkpoints:
                    if info.training_curve_png:
                        gr.HTML(curve_html(info))

        # -- events -----------------------------------------------------------------------
        settings = [max_new, temperature, top_k, top_p, seed]
        chat_outputs = [chatbot, prompt, token_view, table, chat_notice]
        chat_events = [
            prompt.submit(chat, [prompt, chatbot, *settings], chat_outputs, api_name="chat",
                          concurrency_id="lm", concurrency_limit=CONCURRENCY, show_progress="hidden"),
            send.click(chat, [prompt, chatbot, *settings], chat_outputs, api_name="chat_click",
                       api_visibility="private", concurrency_id="lm", concurrency_limit=CONCURRENCY,
                       show_progress="hidden"),
            retry_btn.click(retry, [chatbot, *settings], chat_outputs, api_name="retry",
                            concurrency_id="lm", concurrency_limit=CONCURRENCY, show_progress="hidden"),
        ]
        stop.click(None, None, None, cancels=chat_events, api_name="stop", api_visibility="private")
        clear_btn.click(clear, None, [*chat_outputs, rating], api_name="clear", queue=False)
        rate.click(rate_reply, chatbot, [rating, rate_notice], api_name="rate_reply")

        review.submit(classify, review, [label, looked, review_notice], api_name="classify_submit",
                      api_visibility="private")
        classify_btn.click(classify, review, [label, looked, review_notice], api_name="classify")

        option_outputs = [att_kind, att_layer, att_head]
        att_model.change(attention_options, [att_model, att_kind], option_outputs, api_name="attention_options",
                         queue=False)
        att_kind.change(attention_options, [att_model, att_kind], option_outputs, api_name="attention_kind",
                        api_visibility="private", queue=False)
        att_btn.click(attention, [att_text, att_kind, att_layer, att_head], [att_plot, att_grid, att_notice],
                      api_name="attention")

        tok_btn.click(tokenize, tok_text, [tok_html, tok_summary], api_name="tokenize")
        tok_text.submit(tokenize, tok_text, [tok_html, tok_summary], api_name="tokenize_submit",
                        api_visibility="private")
    app.queue(default_concurrency_limit=CONCURRENCY, max_size=QUEUE_SIZE)
    return app


def launch(app: gr.Blocks, host: str = "127.0.0.1", port: int = 7860, share: bool = False, **kwargs):
    """Start the server. No `allowed_paths`: Gradio serves only its own assets and the files the
    app creates (plot images), never the repository or the checkpoints."""
    return app.launch(server_name=host, server_port=port, share=share, show_error=False,
                      theme=gr.themes.Soft(), css=CSS, **kwargs)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m demo", description="Serve the Tiny Transformers demo.")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="interface to listen on (default: $GRADIO_SERVER_NAME or 127.0.0.1)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
                        help="port (default: $GRADIO_SERVER_PORT or 7860)")
    parser.add_argument("--share", action="store_true", help="also create a public gradio.live link")
    parser.add_argument("--checkpoints", type=Path,
                        default=Path(os.environ.get("DEMO_CHECKPOINTS", DEFAULT_CHECKPOINTS)),
                        help="directory holding lm/, sentiment/ and tokenizer.json (default: checkpoints/)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto = CUDA when available")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads per request (default 1, see main())")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Serve the demo until interrupted.

    torch gets one CPU thread by default: the queue runs up to CONCURRENCY requests at once, and
    these models' per-token matrix products are too small to gain from intra-op threads, which
    then only fight each other (measured on 2 busy cores: ~20 tokens/s with 2 threads against
    ~800 with 1, tiny model).
    """
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    service = DemoService(args.checkpoints, args.device)
    for info in service.checkpoints:
        log.info("%s: %s %s", info.name, info.status, info.message)
    service.warmup()
    launch(build_app(service), args.host, args.port, args.share)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
