"""The text of a task, read from its splits: a column checked and cleaned (`read_column`), a split that
must exist (`require_split`), and the documents a language-modelling task reads (`Texts`: the LM's next
token and `training.span.SpanTask`'s spans read the same ones, so a classifier may start from either)."""

from dataclasses import dataclass

from tokenization import clean_texts

from .contract import Corpus, TaskOptions
from .data import HELD_OUT, head_rows, require_columns, text_column, validation_split
from .errors import DataError


@dataclass(frozen=True)
class Texts:
    """The documents a language-modelling task reads: the train split and any unsupervised one, minus the
    held-out documents (`val`), and the test split if any."""

    train: list[str]
    val: list[str]
    test: list[str] | None

    @classmethod
    def read(cls, splits: dict, options: TaskOptions) -> "Texts":
        texts = read_column(require_split(splits, "train"), "text", "train", options.max_examples)
        if HELD_OUT in splits:  # a text's tail, held out by size (`training.own_text`)
            train, val = texts, read_column(splits[HELD_OUT], "text", HELD_OUT, None)
        else:
            train_idx, val_idx = validation_split(len(texts), options.val_size, options.seed)
            train, val = [texts[i] for i in train_idx], [texts[i] for i in val_idx]
        if "unsupervised" in splits:
            train += read_column(splits["unsupervised"], "text", "unsupervised", options.max_examples)
        test = read_column(splits["test"], "text", "test", options.max_examples) if "test" in splits else None
        return cls(train, val, test)

    def splits(self) -> dict[str, list[str]]:
        return {"train": self.train, "val": self.val, **({"test": self.test} if self.test else {})}

    def corpus(self) -> Corpus:
        return Corpus(self.train, {"train_texts": len(self.train), "val_texts": len(self.val)})


def read_column(ds, column: str, split: str, max_examples: int | None) -> list[str]:
    require_columns(ds, [column], f"the {split} split")
    return clean_texts(text_column(ds, column, split, head_rows(len(ds), max_examples)))


def require_split(splits: dict, name: str):
    if name not in splits:
        raise DataError(f"the data has no {name!r} split (it has {sorted(splits)})")
    return splits[name]
