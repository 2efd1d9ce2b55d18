"""Latency of the running demo, measured the way a visitor's browser sees it (through the server).

    python -m benchmarks.app_latency [--url URL | --checkpoints DIR] [--chat-runs 5] [--tokens 64]
                                     [--requests 100] [--json out.json]

Run from the repository root. Without `--url`, a `python -m demo --device cpu` server is started
on a free port (shipped `checkpoints/` when complete, else a tiny random checkpoint) and stopped
at the end. Reported:

- chat: time to first streamed token (from submitting the request to the first update holding a
  generated token) and decode speed in tokens/s after the first token, medians over
  `--chat-runs` streamed requests of `--tokens` new tokens (sampling, fixed seeds). For
  comparison, the same figures calling `DemoService` directly, without the server.
- sentiment: p50/p95/mean latency of `--requests` sequential `/classify` requests.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # also runnable as `python benchmarks/app_latency.py`
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.app_startup import free_port, pick_checkpoints, start_server, stop_server, wait_ready  # noqa: E402

PROMPT = "I went into this film expecting very little, but"
REVIEW = ("I went into this film expecting very little, but it turned out to be one of the most charming "
          "movies I have seen this year. The acting is superb, especially the two leads, and the script "
          "is sharp and funny without ever becoming silly. The middle drags a little and one subplot goes "
          "nowhere, but the ending more than makes up for it. Highly recommended for a quiet evening.")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def chat_through_server(client, tokens: int, runs: int) -> dict:
    first, speeds, counts = [], [], []
    for run in range(runs + 1):  # run 0 warms up
        t0 = time.perf_counter()
        job = client.submit(PROMPT, [], tokens, 0.8, 40, 0.95, run, api_name="/chat")
        t_first = None
        for update in job:  # yields each streamed update as it arrives
            if t_first is None and update[3] and update[3]["data"]:
                t_first = time.perf_counter()
        final = job.result()
        t_end = time.perf_counter()
        n = len(final[3]["data"])
        if run == 0 or t_first is None:
            continue
        first.append(t_first - t0)
        counts.append(n)
        if n > 1:
            speeds.append((n - 1) / (t_end - t_first))
    return {"time_to_first_token_s": statistics.median(first),
            "tokens_per_s": statistics.median(speeds) if speeds else None,
            "tokens_per_run": counts, "runs": len(first)}


def chat_direct(service, tokens: int, runs: int) -> dict:
    first, speeds = [], []
    for run in range(runs + 1):
        t0 = time.perf_counter()
        t_first, n = None, 0
        for update in service.stream_continuation(PROMPT, tokens, 0.8, 40, 0.95, run):
            if t_first is None and update.steps:
                t_first = time.perf_counter()
            n = len(update.steps)
        t_end = time.perf_counter()
        if run == 0 or t_first is None:
            continue
        first.append(t_first - t0)
        if n > 1:
            speeds.append((n - 1) / (t_end - t_first))
    return {"time_to_first_token_s": statistics.median(first),
            "tokens_per_s": statistics.median(speeds) if speeds else None}


def sentiment_through_server(client, requests: int) -> dict:
    for _ in range(3):
        client.predict(REVIEW, api_name="/classify")
    seconds = []
    for _ in range(requests):
        t0 = time.perf_counter()
        client.predict(REVIEW, api_name="/classify")
        seconds.append(time.perf_counter() - t0)
    return {"p50_s": percentile(seconds, 50), "p95_s": percentile(seconds, 95),
            "mean_s": statistics.mean(seconds), "requests": requests}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an already running demo (default: start one)")
    parser.add_argument("--checkpoints", metavar="DIR", help="default: checkpoints/ if complete, else tiny")
    parser.add_argument("--chat-runs", type=int, default=5, help="timed chat requests (default 5)")
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per chat request (default 64)")
    parser.add_argument("--requests", type=int, default=100, help="sentiment requests (default 100)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, server and direct (default 1)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)

    import torch
    from gradio_client import Client

    from demo.inference import DemoService

    with tempfile.TemporaryDirectory() as scratch:
        checkpoints, kind = pick_checkpoints(args.checkpoints, Path(scratch))
        process = None
        url = args.url
        if url is None:
            port = free_port()
            process = start_server(checkpoints, port, device="cpu", extra_args=["--threads", str(args.threads)])
            wait_ready(process, port)
            url = f"http://127.0.0.1:{port}/"
        try:
            client = Client(url, verbose=False)
            served = chat_through_server(client, args.tokens, args.chat_runs)
            sentiment = sentiment_through_server(client, args.requests)
        finally:
            if process is not None:
                stop_server(process)
        torch.set_num_threads(args.threads)
        direct = chat_direct(DemoService(checkpoints, device="cpu"), args.tokens, args.chat_runs)

    result = {"checkpoints": kind if args.url is None else "server at " + args.url, "device": "cpu",
              "chat_server": served, "chat_direct": direct, "sentiment_server": sentiment,
              "new_tokens_requested": args.tokens, "threads": args.threads}
    tps = served["tokens_per_s"]
    print(f"checkpoints: {result['checkpoints']} (CPU, {args.threads} torch thread(s))")
    print(f"chat via server: time to first token {served['time_to_first_token_s'] * 1000:.0f} ms, "
          f"{tps:.1f} tokens/s" if tps else "chat via server: no tokens generated")
    print(f"chat direct (no server): time to first token {direct['time_to_first_token_s'] * 1000:.0f} ms, "
          f"{direct['tokens_per_s']:.1f} tokens/s" if direct["tokens_per_s"] else "chat direct: no tokens")
    print(f"sentiment via server ({args.requests} requests): p50 {sentiment['p50_s'] * 1000:.0f} ms, "
          f"p95 {sentiment['p95_s'] * 1000:.0f} ms, mean {sentiment['mean_s'] * 1000:.0f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
