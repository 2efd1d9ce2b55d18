"""What every benchmark shares, so that all of them are run and read the same way: the options, the
JSON rule, the record of the machine and precision a figure came from, the held-out rows and timing
(the median of repeats after a warm-up).

Options: each benchmark builds its parser with `benchmark_parser` and adds only what is its own.
Every one takes

    --json PATH   where the figures go (default: benchmarks/results/NAME.json)
    --no-json     only print them (a quick look that must not replace the committed figures)
    --threads N   torch CPU threads (default 1, as the app serves a request; 0: torch's default)

and, from the pieces below where they apply, `--checkpoint` (one model's folder), `--device` and
`--precision auto|fp32|bf16` (`add_precision`: the benchmarks that time the app's own work run it
in the precision the app would pick on the same machine, so their figures are what visitors get).

The JSON rule (`write_json`): every run writes its figures to the `--json` path unless `--no-json`,
with `command`, the command that made them, and `machine` (`machine`): the CPU, the flags that
decide its speed (`torch.backends.cpu.get_cpu_capability()`, AVX512-BF16, AMX), cores, torch
threads and version, the device and the precision the run used. `parse` prints that record as one
line before the run starts, so the console shows it too.

Benchmarks run as modules from the repository root (`python -m benchmarks.NAME`), so `model`,
`training`, ... import as they do in the tests, with no `sys.path` edits.
"""

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch

from classifier import Classifier, Reader
from model import PRECISIONS, resolve_precision
from storage import resolve_checkpoint
from tokenization import clean_texts
from training.data import validation_rows
from training.heldout import SEED, VAL_SIZE

__all__ = ["RESULTS", "SEED", "VAL_SIZE", "WORDS", "add_also", "add_checkpoint", "add_device", "add_precision",
           "add_speed_arguments", "benchmark_parser", "machine", "median_seconds", "parse", "read_classifier",
           "speed_review", "timings", "write_json"]

T = TypeVar("T")
RESULTS = Path(__file__).resolve().parent / "results"
WORDS = 200  # the speed benchmarks' review length: a typical IMDB review


def benchmark_parser(name: str, doc: str) -> argparse.ArgumentParser:
    """The parser of `python -m benchmarks.NAME`, holding the options every benchmark takes."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", metavar="PATH", type=Path, default=RESULTS / f"{name}.json",
                        help=f"write the figures here (default: benchmarks/results/{name}.json)")
    output.add_argument("--no-json", dest="json", action="store_const", const=None, help="only print them")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="torch CPU threads (default 1, as the app serves a request; 0: torch's default)")
    return parser


def checkpoint_argument(name: str) -> str:
    """The `type` of every checkpoint option: a folder that is not there (nor a cached Hub repo) is
    argparse's one-line usage error before any work, not a traceback after the other models ran."""
    try:
        resolve_checkpoint(name)
    except OSError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return name


def add_checkpoint(parser: argparse.ArgumentParser, default: str | None = "checkpoints/sentiment",
                   what: str = "the classifier's folder") -> None:
    """`--checkpoint`: the one model a benchmark reads."""
    parser.add_argument("--checkpoint", metavar="DIR", default=default, type=checkpoint_argument,
                        help=what + (f" (default: {default})" if default else ""))


def add_also(parser: argparse.ArgumentParser) -> None:
    """`--also`: more classifiers whose probabilities are averaged with `--checkpoint`'s, as the app's
    verdict averages its readers (`checkpoints/sentiment-backward`: ULMFiT's forward + backward ensemble)."""
    parser.add_argument("--also", nargs="+", default=[], metavar="DIR", type=checkpoint_argument,
                        help="more classifiers whose probabilities are averaged with the checkpoint's, as the app's "
                             "verdict averages its readers (e.g. checkpoints/sentiment-backward)")


def read_classifier(checkpoints: list[str], device: str = "cpu") -> Classifier:
    """Sentiment checkpoints as the app reads a text: one reader each, their verdict averaged
    (`classifier.Classifier`: each review read whole as `tokenization.source_windows` reads it, every
    label word scored, each reader at its temperature, the pair at its own)."""
    return Classifier([Reader.from_pretrained(resolve_checkpoint(c), device, name=f"{i}:{c}")
                       for i, c in enumerate(checkpoints)])


def add_device(parser: argparse.ArgumentParser, default: str = "cpu") -> None:
    """`--device`: where the models run."""
    parser.add_argument("--device", default=default, help=f"cpu, cuda or cuda:N (default: {default})")


def add_precision(parser: argparse.ArgumentParser) -> None:
    """`--precision`, with the app's default: $DEMO_PRECISION, else "auto" (bf16 where the device
    multiplies it natively: `model.resolve_precision`). `parse` resolves it to "fp32" or "bf16"."""
    from demo.serving import PRECISION_ENV  # the app's own variable; only these benchmarks import demo

    parser.add_argument("--precision", choices=PRECISIONS, default=os.environ.get(PRECISION_ENV, "auto"),
                        help=f"the app's batched passes in bf16 or fp32 (default: ${PRECISION_ENV} or auto, "
                             "as the app: bf16 where the CPU/GPU has it natively)")


def add_speed_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the explanation-speed benchmarks: both checkpoints, the data, repeats."""
    parser.add_argument("--sentiment", default="checkpoints/sentiment", type=checkpoint_argument)
    parser.add_argument("--lm", default="checkpoints/lm", type=checkpoint_argument)
    parser.add_argument("--data-dir", default="../shared/data/imdb")
    parser.add_argument("--repeats", type=int, default=5)


def parse(parser: argparse.ArgumentParser, argv: list[str] | None, device: str = "cpu",
          precision: str | None = "fp32") -> argparse.Namespace:
    """The options, and the run set up from them, so that no benchmark does it its own way: torch
    threads set; `args.precision` resolved as the app resolves it where the benchmark takes
    `--precision`, else `precision` (what it always runs in; None where no torch model runs);
    `args.command` and `args.machine` kept for `write_json`, the machine printed as one line.
    `device` is where the models run when the benchmark has no `--device`."""
    args = parser.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = getattr(args, "device", device)
    if "precision" in args:
        args.precision = precision = resolve_precision(args.precision, device)
    args.command = f"{parser.prog} {shlex.join(sys.argv[1:] if argv is None else argv)}".strip()
    args.machine = machine(device, precision)
    print(machine_line(args.machine), flush=True)
    return args


def cpu_name() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo; elsewhere what `platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(device: str = "cpu", precision: str | None = None) -> dict:
    """Where a figure came from. The same code on another CPU can differ several times over: the
    vector width PyTorch dispatches to (`get_cpu_capability`), and whether bfloat16 is native
    (AVX512-BF16 or AMX; `model/precision.py`) decide how fast the products run."""
    record = {"cpu": cpu_name(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
              "avx512_bf16": torch.cpu._is_avx512_bf16_supported(), "amx": torch.cpu._is_amx_tile_supported(),
              "cores": os.cpu_count(), "threads": torch.get_num_threads(), "torch": torch.__version__,
              "device": device}
    if device.startswith("cuda") and torch.cuda.is_available():
        record["gpu"] = torch.cuda.get_device_name(torch.device(device))
    if precision:
        record["precision"] = precision
    return record


def machine_line(record: dict) -> str:
    yes = {True: "yes", False: "no"}
    threads = record["threads"]
    return (f"machine: {record['cpu']} ({record['cpu_capability']}, AVX512-BF16 {yes[record['avx512_bf16']]}, "
            f"AMX {yes[record['amx']]}), {record['cores']} cores, {threads} torch thread{'s' * (threads != 1)}, "
            f"torch {record['torch']}; device {record.get('gpu', record['device'])}"
            + (f", precision {record['precision']}" if "precision" in record else ""))


def write_json(result: dict, args: argparse.Namespace, echo: bool = False) -> None:
    """The JSON rule: `result` with the run's `command` and `machine` (a result gathering figures of
    several runs, as faithfulness's can, carries each part's own), printed when `echo`, and written
    to `args.json` unless it is None (`--no-json`)."""
    text = json.dumps({"command": args.command, "machine": args.machine, **result}, indent=2)
    if echo:
        print(text)
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
        print(f"figures written to {path}", file=sys.stderr)


def speed_review(data_dir: str) -> str:
    """The first held-out review of at least WORDS words, cut to WORDS: what the speed benchmarks time."""
    review = next(t for t in validation_rows(data_dir, VAL_SIZE, SEED)["text"] if len(t.split()) >= WORDS)
    return " ".join(clean_texts([review])[0].split()[:WORDS])


def timings(fn: Callable[[], T], repeats: int, warmups: int = 1) -> tuple[T, list[float]]:
    """(the last answer, the seconds of each of `repeats` calls): `warmups` untimed calls first pay
    for lazy allocations and first-call dispatch."""
    for _ in range(warmups):
        answer = fn()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        answer = fn()
        seconds.append(time.perf_counter() - start)
    return answer, seconds


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median seconds of `repeats` calls of `fn()`, after one warm-up."""
    return statistics.median(timings(fn, repeats)[1])
