"""The app as a Space runs it: start-up time and resident memory of `python demo/app.py` started from the
tree `publishing.space` uploads.

    python -m benchmarks.space_startup [--runs 3] [--tree DIR]

Builds the tree (`python -m publishing.space --dry-run`) in a temporary folder (or takes `--tree`),
then `--runs` times starts `python -I demo/app.py` in it with GRADIO_SERVER_NAME=0.0.0.0 and
GRADIO_SERVER_PORT set, as Spaces starts it, and reads:

- seconds from launch until `GET /` answers 200 (Python, torch and Gradio imports, the checkpoints loaded,
  the warm-up pass);
- the process's resident memory (VmRSS) then, and after a first chat, classification and tour (what the
  first visitor pays), and its peak (VmHWM).

No `--precision`: a Space passes none, so the app picks its own (`auto`: bf16 where the CPU has it
natively), and the record says which. The medians are printed and written as JSON. A free CPU Space
has 2 vCPUs and 16 GB of memory: run it on 2 cores (`taskset -c 0,1`), nothing else running, to read
the figures as a Space's.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.app_startup import free_port, stop_server, wait_ready
from benchmarks.common import benchmark_parser, parse, write_json
from model import resolve_precision
from publishing import space


def status_mib(pid: int, field: str) -> float:
    """A /proc/PID/status memory field (VmRSS: resident now, VmHWM: the peak) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for process {pid}")


def start(tree: Path, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DEMO_CHECKPOINTS")}
    env.update(GRADIO_SERVER_NAME="0.0.0.0", GRADIO_SERVER_PORT=str(port), PYTHONUNBUFFERED="1",
               GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1")
    log = tempfile.TemporaryFile("w+", encoding="utf-8")
    process = subprocess.Popen([sys.executable, "-I", "demo/app.py"], cwd=tree, env=env, stdout=log,
                               stderr=subprocess.STDOUT, text=True)
    process.log = log  # type: ignore[attr-defined]  # what stop_server reads back
    return process


def first_visitor(port: int) -> None:
    """A chat reply, a classification and a tour: each view's first call."""
    from gradio_client import Client

    client = Client(f"http://127.0.0.1:{port}/", verbose=False)
    client.predict("This movie was", [], 20, 0.0, 40, 0.95, 1, 0, api_name="/chat")
    client.predict("A wonderful, moving film. Loved it!", api_name="/classify")
    client.predict("This movie was", "lm", 0, 0, False, api_name="/tour")


def measure(tree: Path) -> dict:
    port = free_port()
    t0 = time.perf_counter()
    process = start(tree, port)
    try:
        wait_ready(process, port, timeout=600)
        ready = time.perf_counter() - t0
        at_ready = status_mib(process.pid, "VmRSS")
        first_visitor(port)
        after = status_mib(process.pid, "VmRSS")
        peak = status_mib(process.pid, "VmHWM")
    finally:
        stop_server(process)
    return {"ready_s": ready, "rss_ready_mib": at_ready, "rss_after_first_requests_mib": after, "peak_mib": peak}


def arguments():
    parser = benchmark_parser("space_startup", __doc__)
    parser.add_argument("--runs", type=int, default=3, help="fresh starts (default 3)")
    parser.add_argument("--tree", type=Path, help="a tree written by publishing.space --dry-run (default: build one)")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv, precision=resolve_precision("auto", "cpu"))  # what the app picks on its own
    with tempfile.TemporaryDirectory() as scratch:
        tree = args.tree
        if tree is None:
            tree = Path(scratch) / "space"
            count, size = space.build(tree)
            print(f"tree: {count} files, {size / 1e6:.1f} MB")
        runs = []
        for i in range(args.runs):
            runs.append(measure(tree))
            print(f"run {i + 1}: ready in {runs[-1]['ready_s']:.2f} s, {runs[-1]['rss_ready_mib']:.0f} MiB resident, "
                  f"{runs[-1]['rss_after_first_requests_mib']:.0f} MiB after a chat, a classification and a tour "
                  f"(peak {runs[-1]['peak_mib']:.0f} MiB)", flush=True)
    medians = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    result = {"entry": "python -I demo/app.py, from the publishing.space tree", "median": medians, "runs": runs}
    m = medians
    print(f"median of {args.runs}: ready in {m['ready_s']:.2f} s; resident {m['rss_ready_mib']:.0f} MiB, "
          f"{m['rss_after_first_requests_mib']:.0f} MiB after the first requests, peak {m['peak_mib']:.0f} MiB")
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()
