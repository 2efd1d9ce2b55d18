"""Does the running demo's memory stay put? A soak of mixed requests over every public endpoint.

    python -m benchmarks.app_soak [--requests 1000] [--checkpoints DIR] [--threads 1] [--precision auto|fp32|bf16]

Run from the repository root. A `python -m demo --device cpu` server is started on a free loopback
port (shipped `checkpoints/` when complete, else a tiny random checkpoint) with the benchmark's
`--threads` and `--precision` (resolved as the app resolves it), and stopped at the end.
Requests go one at a time through `gradio_client`, cycling over chats, classifications, every
explanation method, two reviews side by side, attention maps, query·key,
head ablation and ranking, and the tokenizer, with texts that vary from request to request.

Prints the server's resident memory (VmRSS) every 100 requests, the ratio of the last reading to
the one after the first 100, and the number of failed requests. Goal (issue #21): within 10% over
1,000 requests, 0 errors.
"""

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.app_latency import REVIEW
from benchmarks.app_startup import (
    add_server_arguments,
    free_port,
    pick_checkpoints,
    server_arguments,
    start_server,
    stop_server,
    wait_ready,
)
from benchmarks.common import benchmark_parser, parse, write_json
from inspection import METHODS

WARM_UP = 100  # the baseline is read after this many requests: allocator pools and caches are full by then
OPENINGS = ["I went into this film", "The acting was", "Honestly, the plot", "What a waste of", "This movie was"]


def resident_mib(pid: int) -> float:
    """The process's resident set (VmRSS) in MiB, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def requests_cycle():
    """(endpoint, arguments) forever, every endpoint in turn, the texts changing from round to round."""
    methods = itertools.cycle(METHODS)
    for i in itertools.count():
        opening = OPENINGS[i % len(OPENINGS)]
        review = f"{opening} {REVIEW[: 80 + 37 * (i % 7)]}"  # lengths vary: new shapes now and then
        yield from [
            ("/chat", [opening, [], 12, 0.8, 40, 0.95, i, 0]),  # 0: full speed, not the page's pace
            ("/classify", [review]),
            ("/explain", [review, next(methods)]),
            ("/explain_token", [review, 6 + i % 5, next(methods), ""]),
            ("/attention", [review, "lm_self", i % 2, -1]),
            ("/query_key", [review, "lm_self", 0, i % 2, -1]),
            ("/tokenize", [review]),
            ("/classify", [review.upper()]),
            ("/ablate", [opening, "lm", ["L1 H1"], "zero"]),
            ("/compare_reviews", [review, review.replace("charming", "dull"), "occlusion"]),
            ("/rank_heads", [review[:120], "sentiment", "zero"]),
        ]


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("app_soak", __doc__)
    add_server_arguments(parser, url=False)  # it reads the server's memory: it starts its own
    parser.add_argument("--requests", type=int, default=1000, help=f"more than {WARM_UP} (default 1000)")
    return parser


def main(argv: list[str] | None = None) -> dict:
    parser = arguments()
    args = parse(parser, argv)
    if args.requests <= WARM_UP:
        parser.error(f"--requests must be more than {WARM_UP} (the baseline is read after {WARM_UP})")
    from gradio_client import Client

    with tempfile.TemporaryDirectory() as scratch:
        checkpoints, kind = pick_checkpoints(args.checkpoints, Path(scratch))
        port = free_port()
        process = start_server(checkpoints, port, device="cpu", extra_args=server_arguments(args))
        errors, per_endpoint, memory = [], {}, {}
        t0 = time.perf_counter()
        try:
            wait_ready(process, port)
            memory["start"] = resident_mib(process.pid)
            client = Client(f"http://127.0.0.1:{port}/", verbose=False)
            for n, (api, data) in enumerate(itertools.islice(requests_cycle(), args.requests), start=1):
                per_endpoint[api] = per_endpoint.get(api, 0) + 1
                try:
                    client.predict(*data, api_name=api)
                except Exception as error:  # noqa: BLE001 - every failure counts, whatever its kind
                    errors.append(f"{api}: {type(error).__name__}: {str(error)[:200]}")
                if n % WARM_UP == 0 or n == args.requests:  # the curve: a leak climbs, a filling cache levels off
                    memory[n] = resident_mib(process.pid)
                    print(f"after {n} requests: {memory[n]:.0f} MiB resident ({time.perf_counter() - t0:.0f} s)",
                          file=sys.stderr, flush=True)
        finally:
            stop_server(process)

    growth = memory[args.requests] / memory[WARM_UP]
    result = {"checkpoints": kind, "requests": args.requests, "errors": len(errors), "error_samples": errors[:5],
              "resident_mib": memory, "growth_after_warm_up": growth, "per_endpoint": per_endpoint,
              "seconds": time.perf_counter() - t0}
    print(f"checkpoints: {kind}; {args.requests} requests over {len(per_endpoint)} endpoints, {len(errors)} errors")
    print(f"resident memory: {memory[WARM_UP]:.0f} MiB after {WARM_UP} requests, {memory[args.requests]:.0f} MiB "
          f"after {args.requests} ({100 * (growth - 1):+.1f}%)")
    for error in errors[:5]:
        print("error:", error)
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()
