"""The app under load: another visitor's sentiment request while 8 max-length chats stream.

    python -m benchmarks.app_load [--url URL | --checkpoints DIR] [--chats 8] [--tokens 512]
                                  [--threads 1] [--precision auto|fp32|bf16]

Run from the repository root. Without `--url`, a `python -m demo --device cpu` server is started
on a free port (shipped `checkpoints/` when complete, else a tiny random checkpoint) with the
benchmark's `--threads` and `--precision` (resolved as the app resolves it), and stopped at the end.
`--chats` visitors each stream chats of `--tokens` new tokens (the API's cap, 512, by default),
starting a new one when the model ends a review early, until `--tokens` tokens have streamed:
`--chats` chats stream at once for the whole run. Meanwhile, `/classify` requests are sent one
after another, and each one's latency through the server is recorded.
Printed: the worst and median sentiment latency, how many requests were made, how long the chats
took, and the number of errors (an exception, or a chat or review answered with anything but a
result). Target: the worst sentiment latency within 3 s, with 0 errors.
"""

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.app_latency import PROMPT, REVIEW, percentile
from benchmarks.app_startup import add_server_arguments, pick_checkpoints, serving
from benchmarks.common import benchmark_parser, parse, write_json


def run_chat(url: str, i: int, tokens: int) -> tuple[int, list[str]]:
    """Visitor `i` streams max-length chats on its own client, starting a new one whenever the model
    ends its review early (it writes an end-of-text token), until `tokens` tokens have streamed: so
    that every visitor keeps a chat streaming for the whole run. Returns the tokens streamed and each
    chat's final notice."""
    from gradio_client import Client

    client, streamed, notices = Client(url, verbose=False), 0, []
    while streamed < tokens:
        _, _, _, table, notice = client.predict(f"{PROMPT} (visitor {i})", [], tokens, 0.8, 40, 0.95,
                                                1000 * i + len(notices), 0, api_name="/chat")  # 0: full speed
        streamed += len(table["data"]) if isinstance(table, dict) else 0
        notices.append(str(notice))
        if "Done" not in notices[-1]:
            break
    return streamed, notices


def load(url: str, chats: int, tokens: int) -> dict:
    from gradio_client import Client

    reviewer = Client(url, verbose=False)
    reviewer.predict(REVIEW, api_name="/classify")  # warm
    latencies, errors = [], []
    t0 = time.perf_counter()
    with ThreadPoolExecutor(chats) as pool:
        futures = [pool.submit(run_chat, url, i, tokens) for i in range(chats)]
        time.sleep(1.0)  # let every chat start streaming
        while not all(f.done() for f in futures):
            t = time.perf_counter()
            try:
                label, _, notice = reviewer.predict(REVIEW, api_name="/classify")
                if not label or "label" not in label:
                    errors.append(f"sentiment: {notice}")
            except Exception as e:  # a refused or failed request is an error, and timed too
                errors.append(f"sentiment: {e!r}")
            latencies.append(time.perf_counter() - t)
        chat_seconds = time.perf_counter() - t0
        generated = []
        for f in futures:
            try:
                n, notices = f.result()
                generated.append(n)
                errors += [f"chat: {notice}" for notice in notices if "Done" not in notice]
            except Exception as e:
                errors.append(f"chat: {e!r}")
    return {"sentiment_worst_s": max(latencies), "sentiment_p50_s": statistics.median(latencies),
            "sentiment_p95_s": percentile(latencies, 95), "sentiment_requests": len(latencies),
            "chats": chats, "tokens_requested": tokens, "tokens_generated": generated,
            "chats_seconds": chat_seconds, "errors": errors}


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("app_load", __doc__)
    add_server_arguments(parser)  # --url, --checkpoints, --precision
    parser.add_argument("--chats", type=int, default=8, help="concurrent chats (default 8)")
    parser.add_argument("--tokens", type=int, default=512, help="new tokens per chat (default 512, the cap)")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)

    with tempfile.TemporaryDirectory() as scratch:
        checkpoints, kind = pick_checkpoints(args.checkpoints, Path(scratch))
        log: list[str] = []
        with serving(args, checkpoints, log) as url:
            result = load(url, args.chats, args.tokens)
    if log:
        result["server_tracebacks"] = log[0].count("Traceback")
    result["checkpoints"] = kind if args.url is None else "server at " + args.url
    print(f"checkpoints: {result['checkpoints']}")
    print(f"{args.chats} concurrent chats of {args.tokens} tokens: done in {result['chats_seconds']:.1f} s, "
          f"tokens streamed per visitor {sorted(result['tokens_generated'])}")
    print(f"sentiment during the chats ({result['sentiment_requests']} requests): worst "
          f"{result['sentiment_worst_s'] * 1000:.0f} ms, p95 {result['sentiment_p95_s'] * 1000:.0f} ms, "
          f"p50 {result['sentiment_p50_s'] * 1000:.0f} ms")
    print(f"errors: {len(result['errors'])}" + (f" ({result['errors'][:3]})" if result["errors"] else "")
          + (f", server tracebacks: {result['server_tracebacks']}" if "server_tracebacks" in result else ""))
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()
