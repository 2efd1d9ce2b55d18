"""The app's service layer on a given device: every tab answered once, warm requests timed.

    python -m benchmarks.service_device [--device cuda] [--checkpoints checkpoints] [--json out.json]

Run from the repository root. `demo.inference.DemoService` is what every Gradio tab calls, so
this checks the app's GPU path on a machine that has no Gradio server to start (and gives the
CPU figures to compare). Printed per device: load time, the median of 5 warm requests for a
64-token chat continuation, a ~200-word review's classification and one attention map, plus
checks that the attention rows sum to 1 and that an empty review gets the UI's message.
"""

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from benchmarks.common import timings, write_json
from demo.inference import DemoService
from demo.inputs import DemoError

T = TypeVar("T")
REVIEW = ("I went in expecting a dull remake, but the cast is wonderful and the last act is moving. "
          "The score is a little loud at times, yet I would happily watch it again.") * 6


def timed(request: Callable[[], T], runs: int = 5) -> tuple[T, float]:
    """The answer, and the median milliseconds of `runs` warm calls."""
    answer, seconds = timings(request, runs)  # every answer is read back to Python, which waits for the device
    return answer, round(statistics.median(seconds) * 1000, 1)


def check(device: str, checkpoints: Path) -> dict:
    start = time.perf_counter()
    service = DemoService(checkpoints, device=device)
    service.warmup()
    result = {"device": service.device_description(), "load_s": round(time.perf_counter() - start, 2),
              "notices": service.notices}
    _, result["chat_64_tokens_ms"] = timed(
        lambda: service.continue_text("This movie was", max_new_tokens=64, seed=0))
    _, result["classify_ms"] = timed(lambda: service.classify(REVIEW))
    attention, result["attention_ms"] = timed(
        lambda: service.attention("The plot was thin but the acting was great.", "lm_self", 0))
    weights = attention.weights  # (H, T, T)
    result["attention_shape"] = list(weights.shape)
    result["attention_rows_sum_to_1"] = bool(abs(weights.sum(-1) - 1).max() < 1e-4)
    result["tokenize_count"] = service.tokenize("Tokenizers split words into pieces.").count
    try:
        service.classify("")
    except DemoError as e:
        result["empty_review_message"] = str(e)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--checkpoints", type=Path, default=Path("checkpoints"))
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    result = check(args.device, args.checkpoints)
    write_json(result, args.json, echo=True)


if __name__ == "__main__":
    main()
