"""A checkpoint named on a command line (`training.evaluate`, `training.sample`): the device and the
folder or Hub repo id read once, with a bad one answered in one line naming its flag."""

from cli import Parser
from model import PreTrainedModel, load_pretrained, resolve_device
from storage import resolve_checkpoint
from tokenization import BPETokenizer


def open_checkpoint(parser: Parser, checkpoint: str, device: str) -> tuple[PreTrainedModel, BPETokenizer]:
    """`--checkpoint` on `--device` -> (model, its tokenizer), or `parser.error` (exit status 2)."""
    try:
        device = resolve_device(device)
    except ValueError as e:  # "device cuda: no CUDA device is available ..."
        parser.error(f"--{e}")
    try:
        directory = resolve_checkpoint(checkpoint)  # a local folder or a Hub repo id
        return load_pretrained(directory, device), BPETokenizer.from_file(directory)
    except (OSError, ValueError) as e:
        parser.error(f"--checkpoint {checkpoint}: {e}")
