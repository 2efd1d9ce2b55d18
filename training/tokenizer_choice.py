"""Which tokenizer a run reads its text with, said in its start line and kept in metrics.json.

The shipped tokenizer (`checkpoints/tokenizer.json`) was trained on IMDB reviews: on other text it
still encodes every byte, but in many more, rarer pieces (a model of Shakespeare through it spends its
vocabulary on "movie" and "<br />"). So a run on your own text (`--data`) trains a byte-level BPE
tokenizer of its own on the training part only (the held-out part must stay unseen), with a
vocabulary sized to the text (`own_text.vocab_size_for`, or `--vocab-size`), and the run folder
keeps it beside the weights, where `training.sample`, `training.evaluate` and the app read it.
Reusing another one is explicit: `--tokenizer PATH`. In order:

1. `--tokenizer PATH`: that file (trained on the training text and saved there if missing);
2. `--resume`: the run's own `tokenizer.json`;
3. `--init-from CHECKPOINT`: the checkpoint's own, the one its weights were trained with;
4. `--data`: a new one, trained on the training part;
5. else the shipped `checkpoints/tokenizer.json` (IMDB's: `--data-dir` and `--dataset` name IMDB-like
   tables).

Under torchrun, rank 0 trains a tokenizer and sends it to the other ranks, so that every rank reads
the same ids without a first single-process run.
"""

from dataclasses import dataclass
from pathlib import Path

import torch.distributed as dist
from tokenizers import Tokenizer

from storage import TOKENIZER_NAME
from tokenization import BPETokenizer

from .own_text import vocab_size_for

DEFAULT_TOKENIZER = "checkpoints/tokenizer.json"
DEFAULT_VOCAB_SIZE = 8192  # the shipped tokenizer's


@dataclass(frozen=True)
class TokenizerChoice:
    tokenizer: BPETokenizer
    origin: str  # for the start line: where it came from
    path: str | None  # the file it was read from or saved to; None: the run's own, saved with the run
    trained: bool  # trained by this run

    def record(self) -> dict:
        """What metrics.json keeps of it."""
        return {"path": self.path or TOKENIZER_NAME, "origin": self.origin, "trained": self.trained,
                "vocab_size": self.tokenizer.vocab_size}


def choose_tokenizer(args, train_texts: list[str], out: Path, is_main: bool, world_size: int) -> TokenizerChoice:
    """The run's tokenizer, in the order of the module docstring."""
    if args.tokenizer:
        return _file(Path(args.tokenizer), args.vocab_size, train_texts, is_main, world_size)
    if args.resume and (out / TOKENIZER_NAME).is_file():
        return TokenizerChoice(BPETokenizer.from_file(out), "the run's own", str(out / TOKENIZER_NAME), False)
    if args.init_from:
        return TokenizerChoice(BPETokenizer.from_file(args.init_from), f"{args.init_from}'s", args.init_from, False)
    if not args.data:
        return _file(Path(DEFAULT_TOKENIZER), args.vocab_size, train_texts, is_main, world_size)
    n_bytes = sum(len(t.encode("utf-8")) for t in train_texts)
    tokenizer = _trained(train_texts, args.vocab_size or vocab_size_for(n_bytes), is_main, world_size)
    sized = "" if args.vocab_size else "; its vocabulary sized to it, --vocab-size to choose"
    origin = f"its own, trained on the training part ({n_bytes / 1e6:.2f} MB{sized})"
    return TokenizerChoice(tokenizer, origin, None, True)


def _file(path: Path, vocab_size: int | None, train_texts: list[str], is_main: bool,
          world_size: int) -> TokenizerChoice:
    """The tokenizer in `path`, trained on the training text and saved there when missing."""
    if path.is_file():
        return TokenizerChoice(BPETokenizer.from_file(path), str(path), str(path), False)
    tokenizer = _trained(train_texts, vocab_size or DEFAULT_VOCAB_SIZE, is_main, world_size)
    if is_main:
        tokenizer.save(path)
    return TokenizerChoice(tokenizer, f"{path}, trained now", str(path), True)


def _trained(texts: list[str], vocab_size: int, is_main: bool, world_size: int) -> BPETokenizer:
    """A tokenizer trained on rank 0 and sent to every other rank."""
    if is_main:
        print(f"training a {vocab_size:,}-token BPE tokenizer on {len(texts):,} texts ...", flush=True)
    payload = [BPETokenizer.train(texts, vocab_size=vocab_size).tokenizer.to_str() if is_main else None]
    if world_size > 1:
        dist.broadcast_object_list(payload, src=0)
    return BPETokenizer(Tokenizer.from_str(payload[0]))
