"""The Gradio app: one `gr.Blocks` page with How it works (where it opens), Chat, Sentiment, Attention,
Tokenizer, Watch it learn and About tabs.

This module only assembles the page: each tab's layout and handlers live in `demo.tabs.<tab>`,
its computation in `demo.views`, its words in `demo.text`; the models, the compute budget and
Gradio's queue are `demo.serving`'s. Every handler turns failures into a one-line notice
(`demo.serving.failure`), so a visitor never sees an error box or a stack trace.

Run it with `python -m demo` or, as Hugging Face Spaces does with its `app_file`,
`python demo/app.py`.
"""

import argparse
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

from cli import Parser  # noqa: E402
from demo.serving import (  # noqa: E402
    COMPUTE,
    LM,
    PRECISION_ENV,
    SENTIMENT,
    SENTIMENT_BACKWARD,
    DemoService,
    start_queue,
    trim_when_idle,
)
from demo.serving.sessions import start_sessions_lazily  # noqa: E402
from demo.tabs import about, attention, chat, induction_panel, learning, sentiment, tokenizer, tour  # noqa: E402
from demo.text import TITLE  # noqa: E402
from demo.views import warm_up  # noqa: E402
from model import PRECISIONS  # noqa: E402

log = logging.getLogger("demo")

DEFAULT_CHECKPOINTS = REPO_ROOT / "checkpoints"
MAX_FILE_SIZE = "1kb"  # the app has no file inputs: Gradio's upload route gets nothing to keep
DELETE_CACHE = (3600, 3600)  # every hour, delete the files Gradio wrote (plot images) older than an hour
# Code and model samples wrap rather than run off the right edge; on a phone (< 640 px) the columns and
# form groups of a row take the full width each, rather than squeezing text into ~100 px side by side
CSS = """
.prose pre, .prose pre code { white-space: pre-wrap; overflow-wrap: anywhere; }
.prose code { overflow-wrap: anywhere; }
@media (max-width: 640px) { .row > .column, .row > .form, .form > .block { min-width: 100% !important; } }
"""


def build_app(service: DemoService) -> gr.Blocks:
    """Build the page: each tab adds its components and events."""
    start_sessions_lazily()  # a new session (each session-less API call) no longer builds every component's config
    with gr.Blocks(title=TITLE, analytics_enabled=False, delete_cache=DELETE_CACHE) as app:
        gr.Markdown(about.header_markdown(service), elem_id="header")
        with gr.Tabs(overflow_behavior="wrap"):  # on a phone the tabs wrap: none hides behind a "⋯" menu
            with gr.Tab("How it works", id="tour"):  # the first tab: where a learner starts
                on_load = [tour.build(service, COMPUTE)]
            with gr.Tab("Chat", id="chat"):
                chat.build(service, COMPUTE)
            with gr.Tab("Sentiment", id="sentiment"):
                opened = sentiment.build(service, COMPUTE)
            with gr.Tab("Attention", id="attention"):
                on_load.append(attention.build(service, COMPUTE))
            with gr.Tab("Tokenizer", id="tokenizer"):
                on_load.append(tokenizer.build(service, COMPUTE))
            on_load.append(opened)
            with gr.Tab("Watch it learn", id="learning") as learning_tab:
                learned = learning.build(service, COMPUTE)  # None: no snapshots, nothing to draw
                induced = induction_panel.build()  # issue 60: an induction head forming, drawn when opened
            with gr.Tab("About", id="about"):
                about.build(service)
        for i, (handler, inputs, outputs) in enumerate(on_load):  # the example tabs open already drawn
            app.load(handler, inputs, outputs, api_name=f"example_{i}", api_visibility="private", **COMPUTE)
        if learned:  # drawn when opened: few visitors open it, and every page load would pay for it
            learning_tab.select(*learned, api_name="learning_opened", api_visibility="private", **COMPUTE)
        learning_tab.select(*induced, api_visibility="private", queue=False)
    start_queue(app)
    return app


def launch(app: gr.Blocks, host: str = "127.0.0.1", port: int = 7860, share: bool = False, **kwargs):
    """Start the server. No `allowed_paths`: Gradio serves only its own assets and the files the
    app creates (plot images), never the repository or the checkpoints."""
    return app.launch(server_name=host, server_port=port, share=share, show_error=False,
                      theme=gr.themes.Soft(), css=CSS + chat.CSS + attention.CSS + tokenizer.CSS + tour.CSS,
                      max_file_size=MAX_FILE_SIZE, **kwargs)


def build_parser() -> Parser:
    parser = Parser("python -m demo", "Serve the Tiny Transformers demo.")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="interface to listen on (default: $GRADIO_SERVER_NAME or 127.0.0.1)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
                        help="port (default: $GRADIO_SERVER_PORT or 7860)")
    parser.add_argument("--share", action="store_true", help="also create a public gradio.live link")
    parser.add_argument("--checkpoints", type=Path,
                        default=Path(os.environ.get("DEMO_CHECKPOINTS", DEFAULT_CHECKPOINTS)),
                        help="directory holding lm/, sentiment/ and tokenizer.json (default: checkpoints/)")
    parser.add_argument(f"--{LM}", metavar="PATH",
                        help="serve this language model instead: a training run's folder (runs/...), a checkpoint "
                             "folder or a Hub repo id, with its tokenizer.json beside the weights; its weight "
                             "snapshots, if it kept any, fill the 'Watch it learn' tab")
    parser.add_argument(f"--{SENTIMENT}", metavar="PATH", help="serve this sentiment model instead (as --lm)")
    parser.add_argument(f"--{SENTIMENT_BACKWARD}", metavar="PATH",
                        help="its backward reader, combined with it in the verdict (the mean of their "
                             "log-probabilities at the pair's temperature; a classifier fine-tuned from a backward LM; "
                             "beside --sentiment, none unless given)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto = CUDA when available")
    parser.add_argument("--precision", choices=PRECISIONS, default=os.environ.get(PRECISION_ENV, "auto"),
                        help="batched passes in bf16 or fp32; auto = bf16 where the CPU/GPU has it natively "
                             f"(default: ${PRECISION_ENV} or auto)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads per request (default 1, see main())")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Serve the demo until interrupted.

    torch gets one CPU thread by default: the compute budget runs one model call per core at once
    (`demo.serving.budget.machine_slots`), and these models' per-token matrix products are too small to
    gain from intra-op threads, which then only fight each other (measured on 2 busy cores: ~20
    tokens/s with 2 threads against ~800 with 1, tiny model).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    named = {name: getattr(args, name.replace("-", "_")) for name in (LM, SENTIMENT, SENTIMENT_BACKWARD)
             if getattr(args, name.replace("-", "_")) is not None}
    service = DemoService(args.checkpoints, args.device, precision=args.precision, models=named)
    for ckpt in service.checkpoints:  # a model asked for by name is served, or the app does not start
        if ckpt.name in named and not ckpt.ready:
            parser.error(f"--{ckpt.name} {named[ckpt.name]}: {ckpt.message}")
    for ckpt in service.checkpoints:
        log.info("%s: %s %s", ckpt.name, ckpt.status, ckpt.message)
    log.info("compute slots: %d", service.budget.slots)
    warm_up(service)
    trim_when_idle(service.budget)  # resident memory stays put under mixed requests (demo.serving.memory)
    launch(build_app(service), args.host, args.port, args.share)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
