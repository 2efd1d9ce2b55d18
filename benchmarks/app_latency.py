"""Latency of the running demo, measured the way a visitor's browser sees it (through the server).

    python -m benchmarks.app_latency [--url URL | --checkpoints DIR] [--chat-runs 5] [--tokens 64]
                                     [--requests 100] [--threads 1] [--precision auto|fp32|bf16]

Run from the repository root. Without `--url`, a `python -m demo --device cpu` server is started
on a free port (shipped `checkpoints/` when complete, else a tiny random checkpoint) with the
benchmark's `--threads` and `--precision` (resolved as the app resolves it), and stopped at the end;
the direct calls run with the same. Reported:

- chat: time to first streamed token (from submitting the request to the first update holding a
  generated token) and decode speed in tokens/s after the first token, medians over
  `--chat-runs` streamed requests of `--tokens` new tokens (sampling, fixed seeds). For
  comparison, the same figures calling `DemoService` directly, without the server. The three
  ways (client, raw HTTP, direct) take turns request by request, so that a slow spell of a shared
  machine hits all of them, and the streamed figure is also printed as a share of the direct one.
- sentiment: p50/p95/mean latency of `--requests` sequential `/classify` requests (`REVIEW`, 69
  words: 80 tokens, eos included, with the shipped tokenizer).
- the floor: the same latency for `/clear`, which runs no model and returns constants: what a
  request costs the server and the client alone.

Each server figure is measured twice: through `gradio_client` (the lines kept from earlier runs,
so that they stay comparable) and through Gradio's plain HTTP API (`POST /gradio_api/call/<api>`,
then its event stream read as it arrives, as a browser reads its stream). `gradio_client` checks
for a new message every 50 ms (`time.sleep(0.05)` in its message loop), which adds up to 50 ms to
each message it waits for: the "raw HTTP" lines leave that client-side delay out. Those two lines
say whether they meet issue 21's targets (`TARGETS`).
"""

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.app_startup import add_server_arguments, pick_checkpoints, serving
from benchmarks.common import benchmark_parser, parse, timings, write_json

PROMPT = "I went into this film expecting very little, but"
REVIEW = ("I went into this film expecting very little, but it turned out to be one of the most charming "
          "movies I have seen this year. The acting is superb, especially the two leads, and the script "
          "is sharp and funny without ever becoming silly. The middle drags a little and one subplot goes "
          "nowhere, but the ending more than makes up for it. Highly recommended for a quiet evening.")

TARGETS = {"sentiment_raw_http_p95_s": 0.050, "chat_raw_http_first_token_s": 0.050}


def verdict(seconds: float, target: float) -> str:
    return f" (target <= {target * 1000:.0f} ms: {'met' if seconds <= target else 'MISSED'})"


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def client_stream(client):
    """`stream(api, data)` through `gradio_client`: each output as the client hands it over."""
    def stream(api: str, data: list):
        job = client.submit(*data, api_name=api)
        yield from job  # each streamed update
        yield job.result()

    return stream


def http_stream(url: str):
    """`stream(api, data)` through Gradio's HTTP API: each output as its server-sent event arrives."""
    import httpx

    http = httpx.Client(timeout=600)

    def stream(api: str, data: list):
        event_id = http.post(f"{url}gradio_api/call/{api.strip('/')}", json={"data": data}).json()["event_id"]
        with http.stream("GET", f"{url}gradio_api/call/{api.strip('/')}/{event_id}") as response:
            event = None
            for line in response.iter_lines():
                if line.startswith("event:"):
                    event = line.removeprefix("event:").strip()
                elif line.startswith("data:") and event in ("generating", "complete"):
                    yield json.loads(line.removeprefix("data:"))
                elif line.startswith("data:") and event == "error":
                    raise RuntimeError(f"{api} failed: {line}")

    return stream


def first_token_and_speed(updates, tokens_in) -> tuple[float | None, float | None, int]:
    """(time to first token, tokens/s after it, tokens) of a stream of cumulative updates, timed as
    they arrive; `tokens_in(update)` is how many tokens an update holds."""
    t0 = time.perf_counter()
    t_first, n = None, 0
    for update in updates:
        n = tokens_in(update)
        if t_first is None and n:
            t_first = time.perf_counter()
    t_end = time.perf_counter()
    if t_first is None:
        return None, None, n
    return t_first - t0, (n - 1) / (t_end - t_first) if n > 1 else None, n


def chat_through_server(stream, tokens: int, seed: int) -> tuple[float | None, float | None, int]:
    """One streamed chat request at full speed (the last argument, 0: not the page's pace for reading): its
    token table (output 3) holds a row per token so far."""
    return first_token_and_speed(stream("/chat", [PROMPT, [], tokens, 0.8, 40, 0.95, seed, 0]),
                                 lambda update: len(update[3]["data"]) if update[3] else 0)


def chat_direct(service, tokens: int, seed: int) -> tuple[float | None, float | None, int]:
    """The same request calling the chat's computation in this process, without a server."""
    from demo.views.chat import stream_continuation

    return first_token_and_speed(stream_continuation(service, PROMPT, tokens, 0.8, 40, 0.95, seed),
                                 lambda update: len(update.steps))


def chat_rounds(ways: dict, tokens: int, runs: int) -> dict:
    """`runs` timed requests per way (after one warm-up each), the ways taking turns; medians."""
    measured = {name: [] for name in ways}
    for run in range(runs + 1):  # run 0 warms up
        order = list(ways)[run % len(ways):] + list(ways)[:run % len(ways)]  # who goes first rotates
        for name in order:
            first, speed, n = ways[name](tokens, run)
            if run and first is not None:
                measured[name].append((first, speed, n))
    result = {}
    for name, rows in measured.items():
        speeds = [speed for _, speed, _ in rows if speed is not None]
        result[name] = {"time_to_first_token_s": statistics.median(first for first, _, _ in rows),
                        "tokens_per_s": statistics.median(speeds) if speeds else None,
                        "tokens_per_run": [n for _, _, n in rows], "runs": len(rows)}
    return result


def latency(request, requests: int) -> dict:
    """p50/p95/mean of `requests` sequential calls of `request()`, after 3 warm-up calls."""
    _, seconds = timings(request, requests, warmups=3)
    return {"p50_s": percentile(seconds, 50), "p95_s": percentile(seconds, 95),
            "mean_s": statistics.mean(seconds), "requests": requests}


def sentiment_through_server(stream, requests: int) -> dict:
    def classify() -> None:
        *_, (label, _, _) = stream("/classify", [REVIEW])
        assert label and label.get("label"), "no label came back"

    return latency(classify, requests)


def floor_through_server(stream, requests: int) -> dict:
    def clear() -> None:
        *_, outputs = stream("/clear", [])
        assert outputs[0] == [], "/clear did not clear"

    return latency(clear, requests)


def ms(figures: dict) -> str:
    return (f"p50 {figures['p50_s'] * 1000:.0f} ms, p95 {figures['p95_s'] * 1000:.0f} ms, "
            f"mean {figures['mean_s'] * 1000:.0f} ms")


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("app_latency", __doc__)
    add_server_arguments(parser)  # --url, --checkpoints, --precision (server and direct)
    parser.add_argument("--chat-runs", type=int, default=5, help="timed chat requests (default 5)")
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per chat request (default 64)")
    parser.add_argument("--requests", type=int, default=100, help="sentiment requests (default 100)")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)

    from gradio_client import Client

    from demo.serving import DemoService

    with tempfile.TemporaryDirectory() as scratch:
        checkpoints, kind = pick_checkpoints(args.checkpoints, Path(scratch))
        service = DemoService(checkpoints, device="cpu", precision=args.precision)
        with serving(args, checkpoints) as url:
            through_client, through_http = client_stream(Client(url, verbose=False)), http_stream(url)
            chats = chat_rounds({"client": lambda n, seed: chat_through_server(through_client, n, seed),
                                 "http": lambda n, seed: chat_through_server(through_http, n, seed),
                                 "direct": lambda n, seed: chat_direct(service, n, seed)},
                                args.tokens, args.chat_runs)
            sentiment = sentiment_through_server(through_client, args.requests)
            sentiment_http = sentiment_through_server(through_http, args.requests)
            floor = floor_through_server(through_client, args.requests)
            floor_http = floor_through_server(through_http, args.requests)
    served, served_http, direct = chats["client"], chats["http"], chats["direct"]

    result = {"checkpoints": kind if args.url is None else "server at " + args.url,
              "chat_server": served, "chat_direct": direct, "sentiment_server": sentiment,
              "chat_server_raw_http": served_http, "sentiment_server_raw_http": sentiment_http,
              "floor_server": floor, "floor_server_raw_http": floor_http,
              "new_tokens_requested": args.tokens, "targets": TARGETS}
    tps = served["tokens_per_s"]
    print(f"checkpoints: {result['checkpoints']}")
    print(f"chat via server: time to first token {served['time_to_first_token_s'] * 1000:.0f} ms, "
          f"{tps:.1f} tokens/s" if tps else "chat via server: no tokens generated")
    print(f"chat direct (no server): time to first token {direct['time_to_first_token_s'] * 1000:.0f} ms, "
          f"{direct['tokens_per_s']:.1f} tokens/s" if direct["tokens_per_s"] else "chat direct: no tokens")
    print(f"sentiment via server ({args.requests} requests): {ms(sentiment)}")
    tps = served_http["tokens_per_s"]
    first = served_http["time_to_first_token_s"]
    print(f"chat via server, raw HTTP: time to first token {first * 1000:.0f} ms, {tps:.1f} tokens/s"
          + verdict(first, TARGETS["chat_raw_http_first_token_s"]) if tps else "chat via server, raw HTTP: no tokens")
    print(f"sentiment via server, raw HTTP ({args.requests} requests): {ms(sentiment_http)}"
          + verdict(sentiment_http["p95_s"], TARGETS["sentiment_raw_http_p95_s"]))
    if tps and direct["tokens_per_s"]:
        result["streamed_share_of_direct_raw_http"] = tps / direct["tokens_per_s"]
        print(f"streamed tokens/s, raw HTTP: {100 * tps / direct['tokens_per_s']:.0f}% of direct "
              f"(medians of {args.chat_runs} turns each)")
    print(f"floor, no model (/clear) via server: {ms(floor)}; raw HTTP: {ms(floor_http)}")
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()
