"""benchmarks/common.py: the timing helper counts its calls as documented, and write_json writes
what it prints."""

import argparse
import json

from benchmarks.common import SEED, VAL_SIZE, timings, write_json
from training.heldout import add_held_out_arguments
from training.task import TaskOptions


def test_timings_warms_up_then_times_each_repeat():
    calls = []
    answer, seconds = timings(lambda: calls.append(1) or len(calls), repeats=4, warmups=3)
    assert len(calls) == 7 and answer == 7
    assert len(seconds) == 4 and all(s >= 0 for s in seconds)


def test_write_json_prints_and_writes_the_same_figures(tmp_path, capsys):
    result = {"a": 1.5, "b": {"c": [1, 2]}}
    path = tmp_path / "deeper" / "out.json"
    write_json(result, path, echo=True)
    assert json.loads(capsys.readouterr().out) == result
    assert path.read_text(encoding="utf-8") == json.dumps(result, indent=2) + "\n"


def test_held_out_defaults_are_the_ones_training_carves_out():
    parser = argparse.ArgumentParser()
    add_held_out_arguments(parser)
    args = parser.parse_args([])
    options = TaskOptions()
    assert (args.val_size, args.seed) == (VAL_SIZE, SEED) == (options.val_size, options.seed)
