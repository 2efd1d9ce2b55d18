"""The app's service layer on a given device: every tab answered once, warm requests timed.

    python -m benchmarks.service_device [--device cuda] [--checkpoints checkpoints] [--precision auto|fp32|bf16]

Run from the repository root. `demo.serving.DemoService` and the views' computations (`demo.views`)
are what every Gradio tab calls, so this checks the app's GPU path on a machine that has no Gradio
server to start (and gives the CPU figures to compare). Its batched passes run in `--precision`,
resolved as the app resolves it. Printed per device: load time, the median of 5 warm requests for a
64-token chat continuation, a ~200-word review's classification and one attention map, plus checks
that the attention rows sum to 1 and that an empty review gets the UI's message.
"""

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from benchmarks.common import add_device, add_precision, benchmark_parser, parse, timings, write_json
from demo.serving import DemoError, DemoService
from demo.views import warm_up
from demo.views.attention import attention_view
from demo.views.chat import continue_text
from demo.views.sentiment import classify
from demo.views.tokens import tokenize

T = TypeVar("T")
REVIEW = ("I went in expecting a dull remake, but the cast is wonderful and the last act is moving. "
          "The score is a little loud at times, yet I would happily watch it again.") * 6


def timed(request: Callable[[], T], runs: int = 5) -> tuple[T, float]:
    """The answer, and the median milliseconds of `runs` warm calls."""
    answer, seconds = timings(request, runs)  # every answer is read back to Python, which waits for the device
    return answer, round(statistics.median(seconds) * 1000, 1)


def check(device: str, checkpoints: Path, precision: str) -> dict:
    start = time.perf_counter()
    service = DemoService(checkpoints, device=device, precision=precision)
    warm_up(service)
    result = {"device": service.device_description(), "load_s": round(time.perf_counter() - start, 2),
              "notices": service.notices}
    _, result["chat_64_tokens_ms"] = timed(
        lambda: continue_text(service, "This movie was", max_new_tokens=64, seed=0))
    _, result["classify_ms"] = timed(lambda: classify(service, REVIEW))
    attention, result["attention_ms"] = timed(
        lambda: attention_view(service, "The plot was thin but the acting was great.", "lm_self", 0))
    weights = attention.weights  # (H, T, T)
    result["attention_shape"] = list(weights.shape)
    result["attention_rows_sum_to_1"] = bool(abs(weights.sum(-1) - 1).max() < 1e-4)
    result["tokenize_count"] = tokenize(service, "Tokenizers split words into pieces.").count
    try:
        classify(service, "")
    except DemoError as e:
        result["empty_review_message"] = str(e)
    return result


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("service_device", __doc__)
    add_device(parser, default="cuda")  # the app's GPU path is what this is for
    add_precision(parser)
    parser.add_argument("--checkpoints", metavar="DIR", type=Path, default=Path("checkpoints"))
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)
    result = check(args.device, args.checkpoints, args.precision)
    write_json(result, args, echo=True)
    return result


if __name__ == "__main__":
    main()
