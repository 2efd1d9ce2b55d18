"""Upload a checkpoint folder to the Hugging Face Hub, with its model card.

    python -m publishing.push --checkpoint checkpoints/sentiment --repo-id you/tiny-sentiment [--private]
    python -m publishing.push --checkpoint checkpoints/lm --repo-id you/tiny-lm-gpt2 --format transformers

Uploads what loading and reading the model need: config.json, model.safetensors, tokenizer.json,
metrics.json, training_curve.png and README.md, the model card. A folder without a card gets one
first, written from its metrics.json (`publishing.report`). Never uploads trainer_state.pt (the
optimizer state, only useful for --resume). Refuses a folder a run is still writing into
(RUN_IN_PROGRESS), and one whose config.json and weights do not load.

`--format transformers` (the language model only) uploads instead the folder `publishing.export_hf` writes:
the same weights laid out as GPT-2, which `transformers`' `AutoModelForCausalLM` opens with no custom code.

Needs a Hub token with write access: `hf auth login`, or the HF_TOKEN variable. Once pushed,
`load_pretrained("you/tiny-sentiment")` and `BPETokenizer.from_file("you/tiny-sentiment")` load it.
"""

import argparse
import sys
import tempfile
from pathlib import Path

from model import load_pretrained
from storage import (
    CARD_NAME,
    CLASSIFIER_NAME,
    CONFIG_NAME,
    CURVE_NAME,
    IN_PROGRESS_NAME,
    METRICS_NAME,
    TOKENIZER_NAME,
    WEIGHTS_NAME,
    is_being_written,
)
from training.errors import UsageError

from .report import write_card

UPLOADED = (CONFIG_NAME, CLASSIFIER_NAME, WEIGHTS_NAME, TOKENIZER_NAME, METRICS_NAME, CURVE_NAME, CARD_NAME)


def files_to_push(directory: Path) -> list[str]:
    """The files of `directory` that go to the Hub, after checking it holds a finished, loadable checkpoint."""
    if not directory.is_dir():
        raise UsageError(f"--checkpoint {directory}: no such folder")
    if is_being_written(directory):
        raise UsageError(f"--checkpoint {directory}: a training run is still writing into it ({IN_PROGRESS_NAME}); "
                         "push it once the run has written its metrics.json")
    missing = [name for name in (CONFIG_NAME, WEIGHTS_NAME) if not (directory / name).is_file()]
    if missing:
        raise UsageError(f"--checkpoint {directory}: not a checkpoint, it lacks {' and '.join(missing)}")
    if not (directory / CARD_NAME).is_file() and not (directory / METRICS_NAME).is_file():
        raise UsageError(f"--checkpoint {directory}: no {CARD_NAME} and no {METRICS_NAME} to write one from")
    try:
        load_pretrained(directory)  # what a visitor of the repo will do first
    except (ValueError, OSError) as e:
        raise UsageError(f"--checkpoint {directory}: does not load: {e}") from None
    return [name for name in UPLOADED if (directory / name).is_file() or name == CARD_NAME]


def push(directory: Path, repo_id: str, private: bool = False) -> str:
    """Create the repo if needed and upload the checkpoint in one commit; return the commit's URL."""
    from huggingface_hub import HfApi

    files = files_to_push(directory)
    if not (directory / CARD_NAME).is_file():
        print(f"wrote {write_card(directory)}")
    api = HfApi()
    api.create_repo(repo_id, private=private, exist_ok=True)
    commit = api.upload_folder(repo_id=repo_id, folder_path=directory, allow_patterns=files,
                               commit_message=f"Upload {directory.name} checkpoint ({', '.join(files)})")
    return commit.commit_url


def push_transformers(directory: Path, repo_id: str, private: bool = False) -> str:
    """Export the LM as GPT-2 (`publishing.export_hf`) into a temporary folder and upload that in one commit."""
    from huggingface_hub import HfApi

    from .export_hf import export

    with tempfile.TemporaryDirectory() as tmp:
        try:
            folder = export(directory, Path(tmp) / "export", repo_id)
        except ValueError as e:
            raise UsageError(str(e)) from None
        api = HfApi()
        api.create_repo(repo_id, private=private, exist_ok=True)
        files = sorted(p.name for p in folder.iterdir())
        message = f"Upload {directory.name} as GPT-2 for transformers ({', '.join(files)})"
        commit = api.upload_folder(repo_id=repo_id, folder_path=folder, commit_message=message)
    return commit.commit_url


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m publishing.push", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, type=Path, help="the checkpoint folder to upload")
    parser.add_argument("--repo-id", required=True, help="the Hub model repo, owner/name (created if missing)")
    parser.add_argument("--private", action="store_true", help="create the repo private")
    parser.add_argument("--format", choices=["native", "transformers"], default="native",
                        help="native: the checkpoint as this project's code reads it (default); transformers: the "
                             "language model exported as GPT-2 (publishing.export_hf), for AutoModelForCausalLM")
    args = parser.parse_args(argv)
    try:
        url = (push_transformers if args.format == "transformers" else push)(args.checkpoint, args.repo_id,
                                                                              args.private)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except Exception as e:  # the Hub's answer (no token, no network, no rights) as one line
        print(f"error: the upload to {args.repo_id} failed: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"pushed {args.checkpoint} to {url}")


if __name__ == "__main__":
    main()
