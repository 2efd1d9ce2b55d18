"""The Tokenizer tab: how the byte-level BPE tokenizer cuts any text."""

import html

import gradio as gr

from demo.serving import DemoService, failure
from demo.tabs.common import bind, notice_markdown
from demo.text import TOKENIZER_EXAMPLE, TOKENIZER_INTRO
from demo.views import tokens
from tokenization import visible

PIECE_COLOURS = ("#dbeafe", "#fde68a")
CSS = """
.tok-pieces { line-height: 2.1; white-space: pre-wrap; font-family: ui-monospace, monospace; }
.tok-pieces span { border-radius: 4px; padding: 1px 2px; margin: 0 1px; color: #111; display: inline-block;
                  white-space: pre; }  /* a piece and its id never wrap apart */
.tok-pieces sub { font-size: 0.65em; color: #555; margin-left: 1px; }
.tok-pieces ruby { ruby-position: over; }  /* a letter split across tokens, over its byte pieces */
.tok-pieces rt { font-size: 0.9em; color: #111; font-weight: 600; }
"""


def pieces_html(pieces: list[tuple[str, int]], letters: list[tuple[int, int, str]] = ()) -> str:
    """BPE pieces coloured alternately, each with its id; every piece text is HTML-escaped.
    A piece made only of spaces shows them as "␣", or it would be an empty box. `letters`: runs of
    byte pieces (first, end, text) shown under the letter they spell together (ï over ⟨c3⟩ ⟨af⟩)."""
    spans = [
        f'<span style="background:{PIECE_COLOURS[i % 2]}" title="id {token_id}">'
        f"{html.escape(visible(text, show_spaces=not text.strip(' ')))}<sub>{token_id}</sub></span>"
        for i, (text, token_id) in enumerate(pieces)
    ]
    for first, end, letter in reversed(letters):  # from the end: earlier indices stay valid
        label = html.escape(visible(letter, show_spaces=True))
        spans[first:end] = [f'<ruby title="{label}: {end - first} byte tokens">{"".join(spans[first:end])}'
                            f"<rt>{label}</rt></ruby>"]
    return f'<div class="tok-pieces">{"".join(spans)}</div>'


def tokenize(service: DemoService, text):
    """The pieces as HTML, and a summary with notices."""
    try:
        result = tokens.tokenize(service, text)
    except Exception as e:
        return "", failure(e)
    ratio = result.characters / max(result.count, 1)
    summary = f"**{result.count:,} tokens** for {result.characters:,} characters ({ratio:.1f} characters/token)."
    return pieces_html(result.pieces, result.letters), "\n\n".join([summary, notice_markdown(result.notices)])


def build(service: DemoService, compute: dict):
    """The tab; returns its handler with its inputs and outputs, for the page's load event."""
    gr.Markdown(TOKENIZER_INTRO)
    text = gr.Textbox(TOKENIZER_EXAMPLE, label="Text (Enter tokenizes, Shift+Enter: new line)", lines=1, max_lines=8,
                      elem_id="tok-input")
    run = gr.Button("Tokenize", variant="primary", elem_id="tok-run")
    pieces = gr.HTML(elem_id="tok-pieces")
    summary = gr.Markdown(elem_id="tok-summary")
    run.click(bind(tokenize, service), text, [pieces, summary], api_name="tokenize", **compute)
    text.submit(bind(tokenize, service), text, [pieces, summary], api_name="tokenize_submit",
                api_visibility="private", **compute)
    return bind(tokenize, service), [text], [pieces, summary]
