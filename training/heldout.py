"""The held-out reviews, split so that nothing is tuned on the rows a figure is reported on.

`training.run` holds 2,500 train reviews out (`validation_split`, seed 1337). They are split once
more, by position in that fixed-seed shuffled order:

- *selection* (the first 40%: 1,000 of 2,500): what training evaluates on to keep a checkpoint, and what
  lr, recipe and variants are chosen on;
- *report* (the rest): scored only to report a figure, never looked at while choosing.

The short-text check turns each report review into its first and its last sentence, each labelled
with the review's label: noisy (a review's first sentence may be neutral plot), but comparable
across versions and close to what visitors type into the Sentiment tab.

The figures' bootstrap intervals are the benchmarks' (`benchmarks/bootstrap.py`).
"""

from dataclasses import dataclass

import numpy as np

from tokenization import sentences

from .data import DataError, validation_rows

HELD_OUT_PARTS = ("validation", "selection", "report")
VAL_SIZE = 2500  # train reviews training.run holds out (--val-size) ...
SEED = 1337  # ... with this seed (--seed)
SELECTION_FRACTION = 0.4  # 1,000 of the 2,500 held-out reviews; the other 1,500 are the report rows

def selection_report_split(val_indices):
    """(selection, report): the first SELECTION_FRACTION of the held-out rows and the rest,
    disjoint. The held-out order is already a fixed-seed shuffle, so both parts are random samples
    of both classes."""
    n_selection = round(len(val_indices) * SELECTION_FRACTION)
    if not 0 < n_selection < len(val_indices):
        raise DataError(f"cannot split {len(val_indices)} held-out rows into selection and report rows: "
                        "hold out at least 2")
    return val_indices[:n_selection], val_indices[n_selection:]


def add_held_out_arguments(parser, data_dir: str | None = "../shared/data/imdb") -> None:
    """--data-dir, --val-size and --seed: which held-out rows, as `training.run` carves them out."""
    if data_dir is not None:
        parser.add_argument("--data-dir", default=data_dir)
    parser.add_argument("--val-size", type=int, default=VAL_SIZE, help="as training.run --val-size")
    parser.add_argument("--seed", type=int, default=SEED, help="as training.run --seed")


def held_out_rows(data_dir: str, val_size: int, seed: int, part: str):
    """The train-split rows of one held-out part (validation = all, selection or report), in the
    held-out order, as a datasets.Dataset."""
    return held_out_part(validation_rows(data_dir, val_size, seed), part)


def held_out_part(rows, part: str):
    """One part of the held-out rows (`validation_rows`, `held_out_of`), in the held-out order."""
    if part not in HELD_OUT_PARTS:
        raise DataError(f"unknown held-out part {part!r}: choose one of {HELD_OUT_PARTS}")
    if part == "validation":
        return rows
    selection, report = selection_report_split(np.arange(len(rows)))
    return rows.select(selection if part == "selection" else report)


@dataclass
class ShortText:
    text: str
    label: int  # or whatever label the review came with (a label word while training)
    review: int  # position of the review it comes from
    position: str  # "first" or "last"


def short_texts(texts: list[str], labels: list) -> list[ShortText]:
    """Each review's first and last sentence, labelled with the review's label (a review with one
    sentence gives one row, with none gives none)."""
    rows = []
    for i, (text, label) in enumerate(zip(texts, labels, strict=True)):
        found = sentences(text)
        if found:
            rows.append(ShortText(found[0], label, i, "first"))
        if len(found) > 1:
            rows.append(ShortText(found[-1], label, i, "last"))
    return rows
