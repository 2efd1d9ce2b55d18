"""benchmarks/common.py: the timing helper counts its calls as documented; every benchmark takes the
shared options from it and declares none of them itself; the JSON written holds the command, the
machine and the precision; and a benchmark asked for fp32 runs its passes in float32."""

import argparse
import ast
import importlib
import json
import pkgutil
from pathlib import Path

import pytest
import torch

import benchmarks
from benchmarks import explain_speed, service_device
from benchmarks.common import (
    RESULTS,
    SEED,
    VAL_SIZE,
    add_also,
    add_checkpoint,
    benchmark_parser,
    parse,
    timings,
    write_json,
)
from demo.serving import PRECISION_ENV
from demo.tiny import make_tiny_checkpoints, shared_tiny_checkpoints
from training.contract import TaskOptions
from training.heldout import add_held_out_arguments

HELPERS = {"common", "bootstrap"}  # modules of benchmarks/ that are not benchmarks
BENCHMARKS = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name not in HELPERS)
SHARED = {"--json", "--no-json", "--threads"}  # what every benchmark takes, from `benchmark_parser`
OWNED_BY_COMMON = {"--json", "--no-json", "--threads", "--checkpoint", "--device", "--precision"}
# the benchmarks of the app's own work that run in its precision (the rest say in their docstring why not)
APP_PRECISION = {"app_latency", "app_load", "app_soak", "app_startup", "explain_speed", "service_device"}


def test_timings_warms_up_then_times_each_repeat():
    calls = []
    answer, seconds = timings(lambda: calls.append(1) or len(calls), repeats=4, warmups=3)
    assert len(calls) == 7 and answer == 7
    assert len(seconds) == 4 and all(s >= 0 for s in seconds)


def test_held_out_defaults_are_the_ones_training_carves_out():
    parser = argparse.ArgumentParser()
    add_held_out_arguments(parser)
    args = parser.parse_args([])
    options = TaskOptions()
    assert (args.val_size, args.seed) == (VAL_SIZE, SEED) == (options.val_size, options.seed)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_benchmark_takes_the_shared_options(name: str):
    parser = importlib.import_module(f"benchmarks.{name}").arguments()
    assert parser.prog == f"python -m benchmarks.{name}"
    flags = {flag for action in parser._actions for flag in action.option_strings}
    assert SHARED <= flags
    assert ("--precision" in flags) == (name in APP_PRECISION)
    assert parser.parse_args([]).json == RESULTS / f"{name}.json"  # the one default place
    args = parser.parse_args(["--json", "elsewhere.json", "--threads", "3"])
    assert (args.json, args.threads) == (Path("elsewhere.json"), 3)
    assert parser.parse_args(["--no-json"]).json is None
    with pytest.raises(SystemExit):  # where the figures go is one choice
        parser.parse_args(["--no-json", "--json", "x.json"])
    if name in APP_PRECISION:
        assert parser.parse_args(["--precision", "fp32"]).precision == "fp32"


def declared_flags(path: Path) -> set[str]:
    """The flags a module's own `add_argument` calls declare."""
    return {node.args[0].value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument" and node.args and isinstance(node.args[0], ast.Constant)}


@pytest.mark.parametrize("name", BENCHMARKS)
def test_no_benchmark_declares_a_shared_option_itself(name: str):
    own = declared_flags(Path(benchmarks.__path__[0]) / f"{name}.py")
    assert not own & OWNED_BY_COMMON, f"{name} declares {own & OWNED_BY_COMMON}: use benchmarks/common.py"


def test_the_app_precision_defaults_as_the_app(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    assert explain_speed.arguments().parse_args([]).precision == "auto"
    monkeypatch.setenv(PRECISION_ENV, "bf16")  # as `python -m demo` reads it
    assert explain_speed.arguments().parse_args([]).precision == "bf16"


def test_parse_resolves_the_precision_as_the_app(monkeypatch: pytest.MonkeyPatch, capsys):
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    for native, expected in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr("model.precision.bf16_native", lambda device, n=native: n)
        args = parse(explain_speed.arguments(), ["--no-json"])
        assert args.precision == args.machine["precision"] == expected
        assert f"precision {expected}" in capsys.readouterr().out  # the machine line, printed


def test_write_json_records_the_command_and_the_machine(tmp_path: Path, capsys):
    path = tmp_path / "deeper" / "out.json"
    args = parse(benchmark_parser("example", "doc"), ["--json", str(path), "--threads", "1"], precision="fp32")
    line = capsys.readouterr().out
    result = {"a": 1.5, "b": {"c": [1, 2]}}
    write_json(result, args, echo=True)
    written = json.loads(path.read_text(encoding="utf-8"))
    assert json.loads(capsys.readouterr().out) == written
    assert written["command"] == f"python -m benchmarks.example --json {path} --threads 1"
    machine = written["machine"]
    assert machine["cpu_capability"] == torch.backends.cpu.get_cpu_capability() and machine["threads"] == 1
    assert {"cpu", "avx512_bf16", "amx", "cores", "torch", "device"} <= machine.keys()
    assert machine["precision"] == "fp32" and machine["cpu_capability"] in line
    assert {k: written[k] for k in result} == result


def test_no_json_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    args = parse(benchmark_parser("example", "doc"), ["--no-json"])
    write_json({"a": 1}, args)
    assert not list(tmp_path.iterdir()) and not (RESULTS / "example.json").exists()


def test_a_missing_checkpoint_is_one_usage_line_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder, file = tmp_path / "reader", tmp_path / "config.json"
    folder.mkdir()
    file.write_text("{}")
    parser = benchmark_parser("example", "doc")
    add_checkpoint(parser)
    add_also(parser)
    assert parse(parser, ["--no-json", "--checkpoint", str(folder), "--also", str(folder)]).also == [str(folder)]
    for argv, says in ((["--checkpoint", str(tmp_path / "nope")], "is not a Hub repo id"),
                       (["--checkpoint", str(folder), "--also", "owner/not-cached"], "is not in the local cache"),
                       (["--checkpoint", str(file)], "is a file; a checkpoint is the folder that holds config.json")):
        with pytest.raises(SystemExit) as exit_:
            parse(parser, ["--no-json", *argv])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and "Traceback" not in err
        assert err.strip().splitlines()[-1].startswith("python -m benchmarks.example: error: ") and says in err


def linear_output_dtypes(run) -> set[torch.dtype]:
    """The dtypes every `nn.Linear` produced while `run()` ran."""
    seen = set()
    hook = torch.nn.modules.module.register_module_forward_hook(
        lambda module, _, out: seen.add(out.dtype) if isinstance(module, torch.nn.Linear) else None)
    try:
        run()
    finally:
        hook.remove()
    return seen


@pytest.mark.parametrize(("precision", "dtype"), [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_the_service_benchmark_runs_and_records_the_precision_asked(tmp_path: Path, precision: str, dtype):
    path = tmp_path / "service.json"
    argv = ["--device", "cpu", "--checkpoints", str(shared_tiny_checkpoints()), "--precision", precision,
            "--json", str(path)]
    dtypes = linear_output_dtypes(lambda: service_device.main(argv))
    assert dtype in dtypes and (precision == "bf16" or dtypes == {torch.float32})
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written["machine"]["precision"] == precision and written["machine"]["device"] == "cpu"
    assert written["attention_rows_sum_to_1"]


@pytest.fixture(scope="module")
def long_context_checkpoints(tmp_path_factory) -> Path:
    """Tiny checkpoints whose LM reads the lens's 20-word prompt and 64 generated tokens."""
    return make_tiny_checkpoints(tmp_path_factory.mktemp("tiny-128"), block_size=128)


@pytest.mark.parametrize(("precision", "dtype"), [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_explain_speed_times_its_passes_in_the_precision_asked(monkeypatch: pytest.MonkeyPatch,
                                                               long_context_checkpoints: Path, precision, dtype):
    ckpt = long_context_checkpoints
    monkeypatch.setattr(explain_speed, "speed_review", lambda data_dir: "a fine film with a dull middle " * 4)
    timed, real = set(), explain_speed.median_seconds

    def median_seconds(fn, repeats: int) -> float:  # each timed call also run once, its products watched
        timed.update(linear_output_dtypes(fn))
        return real(fn, repeats)

    monkeypatch.setattr(explain_speed, "median_seconds", median_seconds)
    argv = ["--sentiment", str(ckpt / "sentiment"), "--lm", str(ckpt / "lm"), "--repeats", "1",
            "--precision", precision, "--no-json"]
    explain_speed.main(argv)
    assert dtype in timed and (precision == "bf16" or timed == {torch.float32})
