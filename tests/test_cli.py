"""Every CLI answers a bad argument with one line that names the flag and points at --help, exit
status 2 (`cli.Parser`), instead of argparse's usage block; and a model that is not there stops the
app at start with one line."""

import subprocess
import sys
from pathlib import Path

import pytest

from demo import app
from publishing import snapshots as ship_snapshots
from training import evaluate, evidence, run, sample

ROOT = Path(__file__).resolve().parents[1]

CASES = [  # (main, argv, the flag the line must name)
    (run.main, ["--task", "lmm"], "--task"),
    (run.main, ["--task", "lm", "--lr", "abc"], "--lr"),
    (run.main, ["--preset", "tiny"], "--task"),  # required
    (run.main, ["--task", "lm", "--frobnicate"], "--frobnicate"),
    (run.main, ["--task", "lm", "--ou", "x"], "--ou"),  # no abbreviations: a run records its exact command
    (run.main, ["--task", "lm", "--preset", "huge"], "--preset"),  # found after parsing: the same one line
    (run.main, ["--task", "lm", "--threads", "0"], "--threads"),
    (evaluate.main, ["--checkpoint", "x"], "--checkpoint x"),  # alone it scores the run's own held-out rows
    (evaluate.main, ["--checkpoint", "x", "--data-dir", "d", "--limit", "many"], "--limit"),
    (evaluate.main, ["--checkpoint", "x", "--data-dir", "d", "--split", "everything"], "--split"),
    (evaluate.main, ["--checkpoint", str(ROOT / "no-such-checkpoint"), "--data", "x.txt"], "--checkpoint"),
    (sample.main, ["This movie was"], "--checkpoint"),
    (sample.main, ["--checkpoint", "x", "--top-k", "many"], "--top-k"),
    (sample.main, ["--checkpoint", "x", "--num-samples", "0"], "--num-samples"),
    (sample.main, ["--checkpoint", "x", "--top-k", "-3"], "--top-k"),
    (app.main, ["--port", "abc"], "--port"),
    (app.main, ["--device", "tpu"], "--device"),
    (ship_snapshots.main, ["run", "--max-mb", "0"], "--max-mb"),
    (evidence.main, ["--split", "everything"], "--split"),
    (evidence.main, ["--split", "train", "--start", "-1"], "--start"),  # found after parsing
]


@pytest.mark.parametrize("main, argv, flag", CASES, ids=[" ".join(c[1]) for c in CASES])
def test_a_bad_argument_is_one_line_naming_the_flag(main, argv, flag, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and flag in err, err
    assert err.rstrip().endswith("--help") and "usage:" not in err


def test_the_training_cli_itself_prints_one_line():
    """The real command, as a user types it: the line is all that is printed."""
    done = subprocess.run([sys.executable, "-m", "training.run", "--task", "lmm"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("error: argument --task: invalid choice: 'lmm' (choose from 'lm', 'sentiment', "
                           "'seq2seq', 'span'); see: python -m training.run --help\n")


def test_help_still_prints_in_full(capsys):
    with pytest.raises(SystemExit) as exc:
        run.main(["--help"])
    assert exc.value.code == 0 and "--preset" in capsys.readouterr().out
