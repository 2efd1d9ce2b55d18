"""Datasets: IMDB reviews (Hugging Face Hub or local files) and any (source, target) text table.

Everything is turned into plain token-id arrays once, up front; batches are then drawn by index
with a generator seeded from (seed, step, rank). That makes the data order a pure function of the
step number, so a resumed run sees exactly the batches an uninterrupted run would have seen.
"""

import hashlib
import os
import random
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pyarrow.compute as pc
import torch

from classifier import ClassifierConfig, Reading
from model import IGNORE_INDEX
from tokenization import clean_texts, source_ids

from .errors import DataError
from .token_cache import cached_arrays, ragged, rows_of

HUB_IMDB = "stanfordnlp/imdb"
DATA_SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".jsonl": "json", ".json": "json"}
HELD_OUT = "held_out"  # the split of a text's held-out tail (`training.own_text`), drawn by size, not by seed
SOURCE_ROW = "__source_row"  # a table's own row numbers, kept where `training.own_text` dropped empty rows


def _hub_reachable(timeout: float = 3.0) -> bool:
    """`datasets` retries a dead network for ~25 s and then raises a bare ConnectionError;
    one quick TCP connect lets us fail at once with a message that says what to do instead."""
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        return False
    from huggingface_hub import constants

    host = urlparse(constants.ENDPOINT).hostname
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def load_splits(data_dir: str | None, hub_name: str = HUB_IMDB) -> dict:
    """{split name: datasets.Dataset}. With `data_dir`, every `<split>.{parquet,csv,jsonl}` file in
    it is a split (the local IMDB copy has train and unsupervised); without, the Hub dataset."""
    import datasets

    datasets.disable_progress_bars()
    if data_dir is None:
        if not _hub_reachable():
            raise DataError(f"cannot reach the Hugging Face Hub to download {hub_name}; "
                            "pass --data-dir with local files (e.g. --data-dir ../shared/data/imdb)")
        return dict(datasets.load_dataset(hub_name))
    root = Path(data_dir)
    if not root.is_dir():
        raise DataError(f"--data-dir {data_dir}: no such directory")
    files = {p.stem: p for p in sorted(root.iterdir()) if p.suffix in DATA_SUFFIXES}
    if not files:
        raise DataError(f"--data-dir {data_dir}: no .parquet/.csv/.jsonl files in it")
    return {split: load_table(path) for split, path in files.items()}


def load_table(path: str | os.PathLike):
    """One Parquet/CSV/JSONL file as a datasets.Dataset."""
    import datasets

    path = Path(path)
    if path.suffix not in DATA_SUFFIXES:
        raise DataError(f"{path}: unsupported file type (use .parquet, .csv or .jsonl)")
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    datasets.disable_progress_bars()
    if path.suffix == ".parquet":  # `datasets` fails on a row-less Parquet file with an Arrow error
        import pyarrow.parquet as pq

        if pq.ParquetFile(path).metadata.num_rows == 0:
            raise DataError(f"{path} is empty")
    try:
        return datasets.load_dataset(DATA_SUFFIXES[path.suffix], data_files=str(path), split="train")
    except datasets.exceptions.DatasetGenerationError as e:
        raise DataError(f"{path}: cannot read it as {DATA_SUFFIXES[path.suffix]}: {e.__cause__ or e}") from None


def require_columns(ds, columns: list[str], what: str) -> None:
    missing = [c for c in columns if c not in ds.column_names]
    if missing:
        raise DataError(f"{what} has no column(s) {missing}; it has {ds.column_names}")
    if len(ds) == 0:
        raise DataError(f"{what} is empty")


def row_name(ds, split: str, i: int) -> str:
    """Row `i` of `ds` in an error: "the train split, row 4 (0-based)"; where `split` names a file (`--data
    reviews.csv`), that file's row, by its line where it has lines ("reviews.csv, line 6 (row 4, 0-based)"),
    counted as in the file even where empty rows were left out (`SOURCE_ROW`)."""
    suffix = Path(split).suffix
    if suffix not in DATA_SUFFIXES:
        return f"the {split} split, row {i} (0-based)"
    row = ds.with_format("arrow")[SOURCE_ROW][i].as_py() if SOURCE_ROW in ds.column_names else i
    line = {".csv": row + 2, ".jsonl": row + 1}.get(suffix)  # a CSV's first line is its header
    return f"{split}, line {line} (row {row}, 0-based)" if line else f"{split}, row {row} (0-based)"


def text_column(ds, column: str, split: str, rows=None) -> list[str]:
    """The `column` of one split (or of a file: `row_name`) as strings (only `rows`, when given). A missing
    value anywhere in the split is an error naming its row: a None review would otherwise fail deep inside
    the tokenizer, or become the text "None"."""
    values = ds.with_format("arrow")[column]  # the whole split, without building Python objects
    if values.null_count:
        missing = pc.index(pc.is_null(values), True).as_py()
        raise DataError(f"{row_name(ds, split, missing)}: no {column!r} value"
                        + (f" (and {values.null_count - 1} more rows)" if values.null_count > 1 else ""))
    values = (values if rows is None else values.take(list(rows))).to_pylist()
    return [v if isinstance(v, str) else str(v) for v in values]


def label_column(ds, column: str, split: str, names: list[str]) -> list[int]:
    """The `column` of one split (or file: `row_name`) as class indices 0 .. len(names) - 1: a class index,
    or the class's own word ("positive"), or in a CSV the index as text. Anything else (-1, 2, 1.0, True,
    None, "1" outside a CSV, "yes") is an error naming the split or file and the first bad row: a label
    outside the classes must never be read as one of them."""
    untyped = Path(split).suffix == ".csv"  # a CSV has no types: one bad label makes "0" and "1" text
    values = [names.index(v) if isinstance(v, str) and v in names else
              int(v) if untyped and isinstance(v, str) and v.strip().isdecimal() else v
              for v in ds.with_format("arrow")[column].to_pylist()]
    bad = [i for i, v in enumerate(values) if type(v) is not int or not 0 <= v < len(names)]
    if bad:
        v = values[bad[0]]
        found = "missing" if v is None else f"{v!r}" + ("" if type(v) is int else f" (a {type(v).__name__})")
        expected = ", ".join(f"{i} ({name})" for i, name in enumerate(names))
        words = ", as a number or the word" if isinstance(v, str) else ""  # "yes": the label words are read too
        raise DataError(f"{row_name(ds, split, bad[0])}: {column} {found}; expected {expected}{words}"
                        + (f" (and {len(bad) - 1} more bad rows)" if len(bad) > 1 else ""))
    return values


def validation_split(n: int, n_val: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Fixed-seed (train indices, validation indices) carved out of n rows.

    The validation indices stay in shuffled order, so any prefix of them (what periodic
    evaluation uses) is a random sample: IMDB's files are sorted by label, and a sorted prefix
    would hold one class only.
    """
    if not 0 < n_val < n:
        raise DataError(f"cannot carve {n_val} validation rows out of {n}")
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[n_val:]), order[:n_val]


def validation_rows(data_dir: str, val_size: int, seed: int):
    """The train-split rows that `training.run --task lm|sentiment` holds out for validation (same
    --val-size and --seed give the same rows in the same order), so a checkpoint can be re-scored
    on exactly its validation set, on any device."""
    return held_out_of(load_splits(data_dir), val_size, seed)


def held_out_of(splits: dict, val_size: int, seed: int, max_examples: int | None = None):
    """`validation_rows` of splits already read (`--data`'s too), with `--max-examples` as the run had it;
    a text's held-out tail (`HELD_OUT`, drawn by size) as it is."""
    if HELD_OUT in splits:
        return splits[HELD_OUT]
    if "train" not in splits:
        raise DataError(f"the data has no 'train' split (it has {sorted(splits)})")
    rows = head_rows(len(splits["train"]), max_examples)
    _, val = validation_split(len(rows), val_size, seed)
    return splits["train"].select([rows[i] for i in val])


def held_out_digest(rows) -> str:
    """A hash of held-out texts as the models read them, so that a file changed since a run is told apart."""
    digest = hashlib.sha256()
    for text in clean_texts(rows["text"]):
        digest.update(text.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()


def head_rows(n_rows: int, n: int | None) -> list[int] | range:
    """The indices of the rows to use (`--max-examples`): all, or n of them at random (fixed seed;
    IMDB's files are sorted by label, so the first n would hold one class), in file order."""
    if n is None or n >= n_rows:
        return range(n_rows)
    return sorted(random.Random(0).sample(range(n_rows), n))


def step_generator(seed: int, step: int, rank: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1_000_003 + step * 101 + rank)


@dataclass
class TokenStream:
    """Documents concatenated as `<s> doc </s> <s> doc </s> ...` for language modelling.

    `n_bytes` counts the UTF-8 bytes of the documents plus one per document boundary (the `</s>`
    stands for the line break between reviews): the denominator of bits per byte.
    """

    ids: np.ndarray  # (N,) int32
    n_bytes: int

    @classmethod
    def from_texts(cls, texts: list[str], tokenizer) -> "TokenStream":
        """The texts tokenized (or read from the `token_cache`, keyed by tokenizer and texts)."""
        def build() -> dict[str, np.ndarray]:
            enc = tokenizer.encode_batch(texts, add_bos=True, add_eos=True, padding=False, return_tensors=False)
            return {"ids": np.fromiter((t for seq in enc.input_ids for t in seq), dtype=np.int32),
                    "n_bytes": np.array(sum(len(t.encode("utf-8")) for t in texts) + len(texts))}

        arrays = cached_arrays("stream", tokenizer, texts, {}, build)
        return cls(arrays["ids"], int(arrays["n_bytes"]))

    def reversed(self) -> "TokenStream":
        """The same stream read from its last token to its first (a backward LM's): every document
        reversed, `</s> cod <s>`, and the documents in reverse order; the same bytes."""
        return TokenStream(self.ids[::-1].copy(), self.n_bytes)

    def random_batch(self, batch_size: int, block_size: int, gen: torch.Generator):
        """(x, y), each (B, T): random windows and the same windows shifted by one token."""
        starts = torch.randint(0, len(self.ids) - block_size - 1, (batch_size,), generator=gen)
        window = torch.from_numpy(np.stack([self.ids[s : s + block_size + 1] for s in starts.tolist()]))
        window = window.long()
        return {"input_ids": window[:, :-1], "targets": window[:, 1:]}

    def n_windows(self, block_size: int) -> int:
        """How many non-overlapping context-sized windows cover the stream (what `windows` yields)."""
        return (len(self.ids) - 1) // block_size

    def windows(self, block_size: int, limit: int | None = None, batch_size: int = 16, spread: bool = False):
        """Non-overlapping windows covering the stream once, for evaluation: (x, y) batches of
        shape (b, T), y being x shifted by one token. `limit` caps the number of windows: the first
        `limit`, or with `spread` `limit` of them spaced evenly over the whole stream, a sample of all of
        it (a held-out tail's first windows need not read like the rest: on tinyshakespeare's last
        tenth, a 4 x 128 LM's first 40 of 150 scored 0.19 bits per byte below all of them, 40 spread
        over them 0.013 above: docs/experiments/own-text-shape-2026-12-05)."""
        n_all = self.n_windows(block_size)
        n = n_all if limit is None else min(n_all, limit)
        chosen = [i * n_all // n for i in range(n)] if spread else range(n)
        for first in range(0, n, batch_size):
            rows = chosen[first : first + batch_size]
            chunk = torch.from_numpy(np.stack([self.ids[i * block_size : (i + 1) * block_size + 1] for i in rows]))
            yield chunk[:, :-1].long(), chunk[:, 1:].long()


@dataclass
class PairSet:
    """(source, target) token sequences for an encoder-decoder, batched with right padding."""

    sources: list[list[int]]
    targets: list[list[int]]
    labels: list[int] | None = None  # classification: the class index of each target

    @classmethod
    def from_texts(cls, sources: list[str], targets: list[str], tokenizer, config,
                   labels: list[int] | None = None, classifier: ClassifierConfig | None = None) -> "PairSet":
        """Encode as the model `config` reads them (and, for a classifier, its `classifier` settings: the
        cut of a long review): sources by `tokenization.source_ids` (the reading the app and the
        benchmarks share), targets to `max_tgt_len`; read from the `token_cache` when an earlier run
        encoded the same texts for the same configs."""
        def build() -> dict[str, np.ndarray]:
            src = ragged(source_ids(sources, tokenizer, Reading(config, classifier)))
            tgt = ragged(cls.target_ids(targets, tokenizer, config))
            return {"src_ids": src["ids"], "src_ends": src["ends"], "tgt_ids": tgt["ids"], "tgt_ends": tgt["ends"]}

        settings = {"n": len(sources), **asdict(config), "src_keep_tail": Reading(config, classifier).src_keep_tail}
        arrays = cached_arrays("pairs", tokenizer, [*sources, *targets], settings, build)
        return cls(rows_of(arrays["src_ids"], arrays["src_ends"]), rows_of(arrays["tgt_ids"], arrays["tgt_ends"]),
                   labels)

    @staticmethod
    def target_ids(targets: list[str], tokenizer, config) -> list[list[int]]:
        """Targets as the decoder writes them (also the label words of examples made during training):
        the decoder input gets <s> in front and the target </s> at the end, one slot each."""
        return tokenizer.encode_batch(targets, max_length=config.max_tgt_len - 1, padding=False,
                                      return_tensors=False).input_ids

    def __len__(self) -> int:
        return len(self.sources)

    def batch(self, indices, pad_id: int, bos_id: int, eos_id: int) -> dict:
        src = [self.sources[i] for i in indices]
        tgt = [self.targets[i] for i in indices]
        S, T = max(map(len, src)), max(map(len, tgt)) + 1
        src_ids = torch.full((len(src), S), pad_id, dtype=torch.long)
        src_mask = torch.zeros((len(src), S), dtype=torch.long)
        tgt_ids = torch.full((len(src), T), pad_id, dtype=torch.long)
        targets = torch.full((len(src), T), IGNORE_INDEX, dtype=torch.long)
        for row, (s, t) in enumerate(zip(src, tgt, strict=True)):
            src_ids[row, : len(s)] = torch.tensor(s)
            src_mask[row, : len(s)] = 1
            tgt_ids[row, : len(t) + 1] = torch.tensor([bos_id, *t])
            targets[row, : len(t) + 1] = torch.tensor([*t, eos_id])
        return {"src_ids": src_ids, "src_mask": src_mask, "tgt_ids": tgt_ids, "targets": targets}

    def batches(self, batch_size: int, limit: int | None = None, **ids):
        """Batches in order, for evaluation; sorted by length so padding is minimal."""
        order = sorted(range(len(self) if limit is None else min(limit, len(self))),
                       key=lambda i: len(self.sources[i]))
        for i in range(0, len(order), batch_size):
            yield order[i : i + batch_size], self.batch(order[i : i + batch_size], **ids)
