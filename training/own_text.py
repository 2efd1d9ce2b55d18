"""Your own text as training data (`training.run --data`): a .txt file, a folder of text files, or a table.

- a `.txt` file is split into documents on blank lines (its paragraphs: a play's speeches, a book's
  paragraphs); a text of any line structure reads, one long line included;
- a folder's `.txt` files, in its sub-folders too, are read the same way, each file into its paragraphs;
  what it also holds (other kinds of file, hidden files, empty files) is skipped, and `OwnText.note`
  says so in one line;
- a `.parquet`, `.csv` or `.jsonl` table is read as `training.data.load_table` reads it: a language
  model needs only its `text` column.

What is held out of a text is drawn by size (`cut_point`): the tail of every file, about a tenth of its
characters (as nanoGPT holds out the last tenth of its text), cut at the paragraph break nearest that
tenth, else at a line break, a sentence's end or a space; the held-out part is the split `HELD_OUT`. So
a folder of two books holds out the end of each, never a whole book, and a one-line file its last tenth.
A text larger than MAX_HELD_OUT_CHARS holds out that many characters (IMDB's 2,500 held-out reviews
are about as much: enough to measure bits per byte to two decimals). The training run says the true
share of the tokens that is (`held_out_line`).

A table's rows are documents, and a tenth of them (`held_out_count`: at least one, at most
MAX_HELD_OUT) is held out at random with the run's split seed, as for IMDB.

Documents that are empty (or only white space) are dropped. Every way this can fail is one line naming
the file: an empty file, only empty rows, a binary file, a file that is not in `--encoding` (the byte
and its offset), a table without `text`. Old text often comes in Latin-1: the message offers
`--encoding latin-1`. The tokenizer a text gets (`vocab_size_for`) grows with its size: a vocabulary
too large for the text leaves most tokens seen a handful of times.
"""

import codecs
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.compute as pc

from tokenization import clean_texts

from .data import DATA_SUFFIXES, HELD_OUT, SOURCE_ROW, head_rows, load_table, require_columns
from .errors import DataError, UsageError
from .heldout import SELECTION_FRACTION

HELD_OUT_FRACTION = 0.1
MAX_HELD_OUT = 2500  # a table's rows
MAX_HELD_OUT_CHARS = 3_000_000  # a text's characters: about IMDB's 2,500 held-out reviews
MIN_DOCUMENTS = 5  # a table's rows: one held out, four to train on
FEW_TRAINING_ROWS = 2000  # a classifier of your own table below this: its rows, not its recipe, are the limit
TEXT_SUFFIX = ".txt"
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")
# where a text's held-out tail may start, best first: a paragraph, a line, a sentence, a word
_BREAKS = (_BLANK_LINE, re.compile(r"\n"), re.compile(r"(?<=[.!?;:])\s"), re.compile(r"\s"))


@dataclass(frozen=True)
class OwnText:
    """What `read` made of `--data PATH`: `splits` as `training.data.load_splits` returns them (`train`,
    and for a text its held-out part `HELD_OUT`), and what the start line and metrics.json say of it."""

    splits: dict
    unit: str  # "paragraphs" or "rows": what one document is
    documents: int  # held-out ones included
    dropped: int  # empty documents left out
    n_bytes: int  # UTF-8 bytes of the documents kept
    files: int = 1
    held_out: int = 0  # held-out documents (a text's; a table's are drawn later, `held_out_count`)
    held_out_chars: int = 0
    chars: int = 0
    skipped: list = field(default_factory=list)  # what a folder holds that is not read: "notes.md", ...

    @property
    def note(self) -> str | None:
        """One line on what of a folder was not read, else None."""
        if not self.skipped:
            return None
        shown = ", ".join(self.skipped[:5]) + (f" and {len(self.skipped) - 5} more" if len(self.skipped) > 5 else "")
        return f"note: read {self.files:,} {TEXT_SUFFIX} file(s); skipped {len(self.skipped):,}: {shown}"


def check_encoding(encoding: str) -> None:
    """A usage error for an `--encoding` Python does not know, before any file is read."""
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise UsageError(f"--encoding {encoding}: unknown encoding (e.g. utf-8, latin-1, cp1252)") from None


def read(path: str, encoding: str = "utf-8", hold_out: bool = True) -> OwnText:
    """`--data PATH` as its documents with a `text` column: a text's training part in `train` and (with
    `hold_out`) its held-out tail in `HELD_OUT`; a table's rows all in `train` (at least MIN_DOCUMENTS
    of them with `hold_out`). Without `hold_out` (`training.evaluate --data`) a text is read whole."""

    root = Path(path)
    if root.is_dir():
        files, skipped = _text_files(root)
        if not files:
            tables = " (its tables are splits: pass it as --data-dir)" if any(
                p.suffix in DATA_SUFFIXES for p in root.iterdir()) else ""
            empty = f" (it holds {len(skipped):,} other file(s): {', '.join(skipped[:3])})" if skipped else ""
            raise DataError(f"--data {path}: no non-empty {TEXT_SUFFIX} files in this folder or its sub-folders"
                            f"{tables or empty}")
        return _own_text(path, [read_text_file(f, encoding) for f in files], hold_out, skipped)
    if not root.is_file():
        raise DataError(f"--data {path}: no such file or folder")
    if root.suffix == TEXT_SUFFIX:
        return _own_text(path, [read_text_file(root, encoding)], hold_out, [])
    if root.suffix not in DATA_SUFFIXES:
        raise DataError(f"--data {path}: give a .txt file, a folder of .txt files, or a .parquet/.csv/.jsonl table")
    if root.stat().st_size == 0:
        raise DataError(f"{path} is empty")
    table = load_table(root)
    require_columns(table, ["text"], path)
    return _own_rows(table, path, MIN_DOCUMENTS if hold_out else 1)


def _text_files(root: Path) -> tuple[list[Path], list[str]]:
    """(the folder's non-empty .txt files, its sub-folders' too, in path order; what else it holds, as
    paths relative to it: other kinds of file, empty files). Hidden files and folders (".git") are neither."""
    files, skipped = [], []
    for p in sorted(root.rglob("*")):
        relative = p.relative_to(root)
        if any(part.startswith(".") for part in relative.parts) or not p.is_file():
            continue
        if p.suffix != TEXT_SUFFIX:
            skipped.append(str(relative))
        elif p.stat().st_size == 0:
            skipped.append(f"{relative} (empty)")
        else:
            files.append(p)
    return files, skipped


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


def cut_point(text: str, fraction: float) -> int:
    """Where `text`'s held-out tail starts: the break nearest to leaving `fraction` of its characters
    after it, a paragraph break if one lies within half that tail of it (the tail then holds 5-15% for a
    tenth), else a line break, a sentence's end or a space there; else the space nearest to it anywhere;
    else that very character. len(text) when the tail would be under one character."""
    n = len(text.rstrip())
    tail = n * fraction
    if tail < 1:
        return len(text)
    target = n - round(tail)
    window = max(1, round(tail / 2))
    lo, hi = max(1, target - window), min(n, target + window)
    for pattern in _BREAKS:
        found = [m.end() for m in pattern.finditer(text, lo - 1, hi + 1) if lo <= m.end() <= hi]
        if found:
            return min(found, key=lambda at: (abs(at - target), at))
    spaces = [m.end() for m in _BREAKS[-1].finditer(text, 0, n)]
    return min(spaces, key=lambda at: (abs(at - target), at)) if spaces else target


def _paragraphs(text: str) -> list[str]:
    return _BLANK_LINE.split(text)


def _own_text(path: str, texts: list[str], hold_out: bool, skipped: list[str]) -> OwnText:
    """A text's files as paragraphs, each file's tail held out (`cut_point`), without the paragraphs that
    are empty once cleaned as the models read them (`clean_texts`: a paragraph of only markup is none)."""
    import datasets

    texts = [t.replace("\r\n", "\n") for t in texts]
    chars = sum(len(t) for t in texts)
    fraction = min(HELD_OUT_FRACTION, MAX_HELD_OUT_CHARS / max(1, chars)) if hold_out else 0.0
    train, held = [], []
    for text in texts:
        cut = cut_point(text, fraction) if hold_out else len(text)
        if cut < len(text):  # the break the cut lands on ends the training part: no empty paragraph after it
            train, held = train + _paragraphs(text[:cut].rstrip()), held + _paragraphs(text[cut:])
        else:
            train += _paragraphs(text)
    all_found = len(train) + len(held)
    train, held = _non_empty(train), _non_empty(held)
    if not train and not held:
        raise DataError(f"{path}: every one of its {all_found:,} paragraphs is empty")
    if hold_out and not (train and held):
        raise DataError(f"{path}: too little text to hold a tenth of it out and train on the rest "
                        f"({chars:,} characters)")
    n_bytes = sum(len(t.encode("utf-8")) for t in train + held)
    splits = {"train": datasets.Dataset.from_dict({"text": train})}
    if held:
        splits[HELD_OUT] = datasets.Dataset.from_dict({"text": held})
    return OwnText(splits, "paragraphs", len(train) + len(held), all_found - len(train) - len(held), n_bytes,
                   len(texts), len(held), sum(len(t) for t in held), sum(len(t) for t in train + held), skipped)


def _non_empty(texts: list[str]) -> list[str]:
    return [t for t, cleaned in zip(texts, clean_texts(texts), strict=True) if cleaned]


def _own_rows(table, path: str, min_documents: int) -> OwnText:
    """A table without its empty documents, or one line saying why there is nothing to train on."""
    texts = pc.cast(table.with_format("arrow")["text"], "string").to_pylist()
    keep = [bool(t) for t in clean_texts(t or "" for t in texts)]
    kept = [i for i, k in enumerate(keep) if k]
    if not kept:
        raise DataError(f"{path}: every one of its {len(keep):,} rows is empty")
    if len(kept) < min_documents:
        raise DataError(f"{path} holds {len(kept)} non-empty rows: too few to hold any out; at least "
                        f"{min_documents} are needed")
    if len(kept) < len(table):  # an error on a later row (a classifier's label) names its row in the file
        table = table.select(kept).add_column(SOURCE_ROW, kept)
    n_bytes = pc.sum(pc.binary_length(pc.cast(table.with_format("arrow")["text"], "string"))).as_py()
    return OwnText({"train": table}, "rows", len(kept), len(keep) - len(kept), n_bytes)


def record(own: OwnText, path: str, encoding: str, val_size: int | None, max_examples: int | None) -> dict:
    """What metrics.json records of `--data`'s documents and its held-out part (`val_size` documents: a
    text's tail, drawn by size; a table's `--val-size` rows, else `held_out_count`), enough for
    `training.evaluate --checkpoint RUN` to find them again."""
    source = {"kind": "data", "source": path, "encoding": encoding, "unit": own.unit, "documents": own.documents,
              "empty_dropped": own.dropped, "bytes": own.n_bytes}
    if own.unit == "rows":
        documents = len(head_rows(own.documents, max_examples))
        val = val_size or held_out_count(documents)
        return {**source, "val_size": val, "held_out": f"{val:,} of {documents:,} rows ({val / documents:.0%})"}
    if val_size is not None:
        raise UsageError(f"--val-size {val_size}: a text's held-out part is drawn by size (the last tenth of each "
                         "file); --val-size counts a table's rows")
    share = own.held_out_chars / max(1, own.chars)
    where = "the text" if own.files == 1 else f"each of its {own.files:,} files"
    return {**source, "held_out_by": "size", "files": own.files, "skipped": len(own.skipped),
            "val_size": own.held_out, "held_out_chars": own.held_out_chars,
            "held_out": f"the last {share:.0%} of {where}: {own.held_out:,} of {own.documents:,} paragraphs"}


def held_out_line(source: dict, described: dict) -> str:
    """What the start line and the end line say was held out: as `record` wrote it, and once the text is
    tokenized (`described`: the task's train_tokens and val_tokens) the true share of the tokens."""
    line = source.get("held_out", f"{source['val_size']:,} rows")
    train, val = described.get("train_tokens"), described.get("val_tokens")
    if source.get("kind") == "data" and train and val:
        line += f"; {val:,} of {train + val:,} tokens ({val / (train + val):.1%})"
    pairs, held = described.get("val_pairs"), source.get("val_size")
    if source.get("kind") == "data" and pairs is not None and held:  # a classifier of your own table
        if pairs < held:  # `training.heldout`: the selection rows choose, the report rows only report
            line += (f": {pairs:,} selection rows it validates on (they choose the checkpoint kept and its "
                     f"temperature) and {held - pairs:,} report rows no choice is made on (training.evaluate "
                     "--checkpoint RUN --split report scores them)")
        rows = described.get("train_pairs")
        if rows is not None:
            line += f"; {rows:,} rows to train on" + (
                " (few: a classifier learns from thousands of labelled rows; label more for a figure above chance)"
                if rows < FEW_TRAINING_ROWS else "")
    return line


def table_advice(table: str, train_rows: int | None, val_rows: int, init: str | None, init_text: str | None) -> str:
    """Why a classifier of your own `table` (`--task sentiment --data`) may have learned nothing, and what
    to do: the end of `training.run.chance_warning`'s line. Never "start from the IMDB LM": your rows need
    not be reviews."""
    name = Path(table).name
    few = f"it trained on {train_rows:,} rows of `{name}`" if train_rows is not None else f"`{name}` is small"
    judged = f" and was judged on {val_rows:,}" if val_rows < 100 else ""
    why = (f": {few}{judged}: too few for a classifier to learn from (it needs thousands of labelled rows, "
           f"and {val_rows:,} held-out rows tell little apart); label more rows")
    if init_text:
        why += (f"; its encoder started from a language model of `{init_text}`: one of texts like your rows helps "
                f"more (python -m training.run --task lm --data {table} trains one on the table's text column)")
    elif init is None:
        why += (f"; starting from a language model of texts like your rows helps (python -m training.run --task lm "
                f"--data {table}, then --init-from that run)")
    return why


def held_out_count(documents: int) -> int:
    """How many of a table's `documents` to hold out: a tenth, at least one, at most MAX_HELD_OUT."""
    return min(MAX_HELD_OUT, max(1, round(documents * HELD_OUT_FRACTION)))


def vocab_size_for(n_bytes: int) -> int:
    """A BPE vocabulary for a training text of `n_bytes`: about 2 x sqrt(bytes), in steps of 256, from
    512 to 8,192 (1 MB: 2,048; IMDB's 130 MB: 8,192, the shipped tokenizer's size)."""
    return int(min(8192, max(512, 256 * round(2 * math.sqrt(n_bytes) / 256))))


def printed_held_out(path: str, task: str) -> str:
    """What `--print-config` says is held out of `--data PATH`, before it is read."""
    if Path(path).suffix not in DATA_SUFFIXES:
        return "the last tenth of each file, by size"
    rows = f"a tenth of its rows, at most {MAX_HELD_OUT:,}"
    if task != "sentiment":
        return rows
    return (f"{rows}: the first {SELECTION_FRACTION:.0%} of them the selection rows it validates on, the rest "
            "report rows no choice is made on (training.heldout)")
