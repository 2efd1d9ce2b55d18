"""A checkpoint named on a command line (`training.evaluate`, `training.sample`): the device and the
folder or Hub repo id read once, with a bad one answered in one line naming its flag. A run folder whose
run was stopped (Ctrl-C, SIGTERM, --max-minutes before its first evaluation, a crash) says so, with the
command that resumes it, rather than that it lacks a config.json."""

import shlex
import sys
from pathlib import Path

from cli import Parser
from model import PreTrainedModel, load_pretrained, resolve_device
from storage import CONFIG_NAME, STATE_NAME, is_being_written, resolve_checkpoint, run_marker
from tokenization import BPETokenizer


def open_checkpoint(parser: Parser, checkpoint: str, device: str) -> tuple[PreTrainedModel, BPETokenizer]:
    """`--checkpoint` on `--device` -> (model, its tokenizer), or `parser.error` (exit status 2)."""
    try:
        device = resolve_device(device)
    except ValueError as e:  # "device cuda: no CUDA device is available ..."
        parser.error(f"--{e}")
    stopped = unfinished(Path(checkpoint))
    if stopped and not (Path(checkpoint) / CONFIG_NAME).is_file():
        parser.error(f"--checkpoint {checkpoint}: {stopped}")
    if stopped:  # it kept the best model of its evaluations so far: that is what is read
        print(f"note: {checkpoint} holds an unfinished run ({stopped}); reading the model it kept so far",
              file=sys.stderr)
    try:
        directory = resolve_checkpoint(checkpoint)  # a local folder or a Hub repo id
        return load_pretrained(directory, device), BPETokenizer.from_file(directory)
    except (OSError, ValueError) as e:
        parser.error(f"--checkpoint {checkpoint}: {e}")


def unfinished(folder: Path) -> str | None:
    """What a local run folder whose run has not finished says of it (`storage.run_folder`): "interrupted at
    step N: resume with: COMMAND", or that a run is still writing it; None for a finished run or a
    checkpoint folder."""
    if not folder.is_dir() or not is_being_written(folder):
        return None
    marker = run_marker(folder)
    stopped = marker.get("interrupted")
    if isinstance(stopped, dict) and "step" in stopped:
        return f"interrupted at step {stopped['step']}: resume with: {stopped.get('resume', '--resume')}"
    if not (folder / STATE_NAME).is_file():
        return "a training run is writing it (it holds RUN_IN_PROGRESS) and has saved no step yet"
    command = marker.get("command", "python -m training.run ... --out " + shlex.quote(str(folder)))
    words = shlex.split(command)
    if "--out" not in words and not any(w.startswith("--out=") for w in words):
        command += " --out " + shlex.quote(str(folder))
    resume = command if "--resume" in words else command + " --resume"
    return (f"a training run is writing it, or stopped without a word (killed, out of memory); its saved state "
            f"({STATE_NAME}) resumes with: {resume}")
