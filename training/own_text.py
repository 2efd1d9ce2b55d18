"""Your own text as training data (`training.run --data PATH`): a .txt file, a folder of .txt files, or a table.

- a `.txt` file is split into documents on blank lines (its paragraphs: a play's speeches, a book's
  paragraphs), so that held-out documents are whole paragraphs, never half sentences;
- a folder's `.txt` files are one document each (a folder of letters, stories, articles);
- a `.parquet`, `.csv` or `.jsonl` table is read as `training.data.load_table` reads it: a language
  model needs only its `text` column.

Documents that are empty (or only white space) are dropped; what is left must be enough to hold some
out (`MIN_DOCUMENTS`). Every way this can fail is one line naming the file: an empty file, only empty
rows, a binary file, a file that is not in `--encoding` (the byte and its offset), a table without
`text`. Old text often comes in Latin-1: the message offers `--encoding latin-1`.

How much is held out suits the corpus (`held_out_count`): a tenth of the documents, as nanoGPT holds
out a tenth of its text, but never more than IMDB's 2,500 reviews (a larger corpus needs no more to
measure bits per byte to two decimals), and at least one. The tokenizer a text gets (`vocab_size_for`)
grows with its size: a vocabulary too large for the text leaves most tokens seen a handful of times.
"""

import codecs
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc

from tokenization import read_texts

from .data import DATA_SUFFIXES, load_table, require_columns
from .errors import DataError, UsageError

HELD_OUT_FRACTION = 0.1
MAX_HELD_OUT = 2500
MIN_DOCUMENTS = 5  # one held out, four to train on: fewer cannot hold anything out and still train
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")


@dataclass(frozen=True)
class OwnText:
    """What `read` made of `--data PATH`: `splits` as `training.data.load_splits` returns them (one
    `train` split), and what the start line and metrics.json say of it."""

    splits: dict
    unit: str  # "paragraphs", "files" or "rows": what one document is
    documents: int
    dropped: int  # empty documents left out
    n_bytes: int  # UTF-8 bytes of the documents kept


def check_encoding(encoding: str) -> None:
    """A usage error for an `--encoding` Python does not know, before any file is read."""
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise UsageError(f"--encoding {encoding}: unknown encoding (e.g. utf-8, latin-1, cp1252)") from None


def read(path: str, encoding: str = "utf-8", min_documents: int = MIN_DOCUMENTS) -> OwnText:
    """`--data PATH` as one `train` split of documents with a `text` column, at least `min_documents`
    of them (`training.evaluate` holds nothing out: 1)."""
    import datasets

    root = Path(path)
    if root.is_dir():
        files = sorted(p for p in root.iterdir() if p.suffix == ".txt" and p.is_file())
        if not files:
            tables = " (its tables are splits: pass it as --data-dir)" if any(
                p.suffix in DATA_SUFFIXES for p in root.iterdir()) else ""
            raise DataError(f"--data {path}: no .txt files in this folder{tables}")
        texts, unit = [read_text_file(f, encoding) for f in files], "files"
        return _own(datasets.Dataset.from_dict({"text": texts}), unit, path, min_documents)
    if not root.is_file():
        raise DataError(f"--data {path}: no such file or folder")
    if root.suffix == ".txt":
        texts = _BLANK_LINE.split(read_text_file(root, encoding).replace("\r\n", "\n"))
        return _own(datasets.Dataset.from_dict({"text": texts}), "paragraphs", path, min_documents)
    if root.suffix not in DATA_SUFFIXES:
        raise DataError(f"--data {path}: give a .txt file, a folder of .txt files, or a .parquet/.csv/.jsonl table")
    if root.stat().st_size == 0:
        raise DataError(f"{path} is empty")
    table = load_table(root)
    require_columns(table, ["text"], path)
    return _own(table, "rows", path, min_documents)


def read_text_file(file: Path, encoding: str) -> str:
    """One text file, decoded; a binary file or a byte the encoding cannot read is one line naming both."""
    raw = file.read_bytes()
    if not raw:
        raise DataError(f"{file} is empty")
    utf8 = codecs.lookup(encoding).name == "utf-8"
    nul = raw.find(b"\0") if utf8 else -1
    if nul >= 0:
        raise DataError(f"{file} is not text: a NUL byte at offset {nul} (a binary file? UTF-16 text "
                        "needs --encoding utf-16)")
    try:
        return raw.decode("utf-8-sig" if utf8 else encoding)
    except UnicodeDecodeError as e:
        hint = "pass --encoding latin-1 (or the file's own encoding)" if utf8 else "pass its own --encoding"
        raise DataError(f"{file} is not {encoding}: byte 0x{raw[e.start]:02x} at offset {e.start}; {hint}") from None


def _own(table, unit: str, path: str, min_documents: int) -> OwnText:
    """The table without its empty documents (empty once cleaned as the models read them, `read_texts`:
    a paragraph of only markup is none), or one line saying why there is nothing to train on."""
    texts = pc.cast(table.with_format("arrow")["text"], "string").to_pylist()
    keep = [bool(t) for t in read_texts(t or "" for t in texts)]
    kept = [i for i, k in enumerate(keep) if k]
    if not kept:
        raise DataError(f"{path}: every one of its {len(keep):,} {unit} is empty")
    if len(kept) < min_documents:
        how = {"paragraphs": " (paragraphs are separated by a blank line)", "files": " (one document per file)",
               "rows": ""}[unit]
        raise DataError(f"{path} holds {len(kept)} non-empty {unit}: too few to hold any out; at least "
                        f"{min_documents} are needed{how}")
    table = table.select(kept) if len(kept) < len(table) else table
    n_bytes = pc.sum(pc.binary_length(pc.cast(table.with_format("arrow")["text"], "string"))).as_py()
    return OwnText({"train": table}, unit, len(kept), len(keep) - len(kept), n_bytes)


def held_out_count(documents: int) -> int:
    """How many of `documents` to hold out: a tenth, at least one, at most MAX_HELD_OUT."""
    return min(MAX_HELD_OUT, max(1, round(documents * HELD_OUT_FRACTION)))


def vocab_size_for(n_bytes: int) -> int:
    """A BPE vocabulary for a training text of `n_bytes`: about 2 x sqrt(bytes), in steps of 256, from
    512 to 8,192 (1 MB: 2,048; IMDB's 130 MB: 8,192, the shipped tokenizer's size)."""
    return int(min(8192, max(512, 256 * round(2 * math.sqrt(n_bytes) / 256))))
