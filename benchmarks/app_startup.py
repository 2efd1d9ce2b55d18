"""Start-up to ready: seconds from launching the demo process to its server answering HTTP.

    python -m benchmarks.app_startup [--checkpoints DIR] [--runs 3] [--entry module|script]
                                     [--threads 1] [--precision auto|fp32|bf16]

Run from the repository root. Each run starts a fresh `python -m demo` (or `python demo/app.py`,
the Hugging Face Spaces way, with `--entry script`) on a free port and polls `GET /` until it
answers 200; the time includes the Python, torch and Gradio imports, loading the checkpoints and
the warm-up pass. Without `--checkpoints`, the shipped `checkpoints/` is used when it holds both
models, else a tiny random checkpoint is built in a temporary directory (and reported as such).
The server gets `--threads` and `--precision` (resolved here as the app resolves it, so the record
says what it ran: its warm-up pass is part of the time). The median over `--runs` is printed.
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from benchmarks.common import add_precision, benchmark_parser, parse, write_json
from model import resolve_device

REPO_ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pick_checkpoints(requested: str | None, scratch: Path) -> tuple[Path, str]:
    """The checkpoints to serve, and a label saying which kind they are."""
    from storage import CONFIG_NAME

    if requested:
        return Path(requested), "given"
    shipped = REPO_ROOT / "checkpoints"
    if all((shipped / name / CONFIG_NAME).is_file() for name in ("lm", "sentiment")):
        return shipped, "shipped"
    from demo.tiny import make_tiny_checkpoints

    return make_tiny_checkpoints(scratch / "tiny"), "tiny (random init)"


def start_server(checkpoints: Path, port: int, entry: str = "module", extra_env: dict | None = None,
                 use_env_port: bool = False, device: str = "auto",
                 extra_args: list[str] | None = None) -> subprocess.Popen:
    """Launch the demo as a child process. Its output goes to a temporary file rather than a pipe,
    which would block the server once full if nobody read it; `stop_server` returns it."""
    target = ["-m", "demo"] if entry == "module" else [str(REPO_ROOT / "demo" / "app.py")]
    args = [sys.executable, *target, "--checkpoints", str(checkpoints), "--device", device, *(extra_args or [])]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "GRADIO_ANALYTICS_ENABLED": "False", **(extra_env or {})}
    if use_env_port:
        env["GRADIO_SERVER_PORT"] = str(port)  # as on Spaces
    else:
        args += ["--port", str(port)]
    log = tempfile.TemporaryFile("w+", encoding="utf-8")
    process = subprocess.Popen(args, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    process.log = log  # type: ignore[attr-defined]
    return process


def server_output(process: subprocess.Popen) -> str:
    process.log.seek(0)  # type: ignore[attr-defined]
    return process.log.read()  # type: ignore[attr-defined]


def wait_ready(process: subprocess.Popen, port: int, timeout: float = 120.0) -> float:
    """Poll until `GET /` answers 200; return the seconds since now. Raises if the process dies."""
    t0 = time.perf_counter()
    url = f"http://127.0.0.1:{port}/"
    while time.perf_counter() - t0 < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"the demo exited with {process.returncode}:\n{server_output(process)}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return time.perf_counter() - t0
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.05)
    raise TimeoutError(f"the demo did not answer on port {port} within {timeout:.0f} s")


def stop_server(process: subprocess.Popen) -> str:
    """Terminate the child (and only it) and return its output."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    output = server_output(process)
    process.log.close()  # type: ignore[attr-defined]
    return output


def add_server_arguments(parser: argparse.ArgumentParser, url: bool = True) -> None:
    """The options of the benchmarks that start a demo server: the checkpoints it serves and its
    `--precision` (its `--threads` are the shared option), and with `url`, a running one instead
    (see `serving`)."""
    if url:
        parser.add_argument("--url", help="an already running demo, whose own settings then hold (default: start one)")
    parser.add_argument("--checkpoints", metavar="DIR", help="default: checkpoints/ if complete, else tiny")
    add_precision(parser)


def server_arguments(args: argparse.Namespace) -> list[str]:
    """The command-line options a started server gets from the benchmark's (after `parse`)."""
    return ["--threads", str(args.threads), "--precision", args.precision]


@contextmanager
def serving(args: argparse.Namespace, checkpoints: Path, log: list[str] | None = None):
    """The URL of a demo: `args.url` when given, else a `python -m demo --device cpu` with the
    benchmark's threads and precision, started on a free port and stopped at the end (its output
    appended to `log`)."""
    if args.url is not None:
        yield args.url
        return
    port = free_port()
    process = start_server(checkpoints, port, device="cpu", extra_args=server_arguments(args))
    try:
        wait_ready(process, port)
        yield f"http://127.0.0.1:{port}/"
    finally:
        output = stop_server(process)
        if log is not None:
            log.append(output)


def measure(checkpoints: Path, entry: str, extra_args: list[str]) -> float:
    port = free_port()
    t0 = time.perf_counter()
    process = start_server(checkpoints, port, entry, extra_args=extra_args)
    try:
        wait_ready(process, port)
        return time.perf_counter() - t0
    finally:
        stop_server(process)


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("app_startup", __doc__)
    add_server_arguments(parser, url=False)
    parser.add_argument("--runs", type=int, default=3, help="fresh starts to time (default 3)")
    parser.add_argument("--entry", choices=["module", "script"], default="module",
                        help="python -m demo (module) or python demo/app.py (script)")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv, device=resolve_device("auto"))  # the server's --device auto

    with tempfile.TemporaryDirectory() as scratch:
        checkpoints, kind = pick_checkpoints(args.checkpoints, Path(scratch))
        seconds = [measure(checkpoints, args.entry, server_arguments(args)) for _ in range(args.runs)]
    result = {"startup_to_ready_s": {"median": statistics.median(seconds), "min": min(seconds),
                                     "max": max(seconds), "runs": seconds},
              "entry": "python -m demo" if args.entry == "module" else "python demo/app.py",
              "checkpoints": kind}
    print(f"start-up to ready ({result['entry']}, {kind} checkpoints, {args.runs} runs): "
          f"median {result['startup_to_ready_s']['median']:.2f} s "
          f"(min {min(seconds):.2f} s, max {max(seconds):.2f} s)")
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()
