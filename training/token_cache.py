"""Tokenized splits kept on disk, so that a second run starts in seconds instead of a minute.

Tokenizing the 75,000 reviews of an LM run takes 25-60 s on two CPU cores, before step 1, every
run. The arrays it makes are stored here and read back in well under a second.

An entry is keyed by content, never by file names or dates: a hash of the tokenizer (its JSON), of
every text in order, and of the settings that shape the arrays (what is built, the model config
that cuts a review). Another data file, tokenizer, --seed, --val-size or --max-examples gives other
texts or another tokenizer, hence another key, so an entry can never be stale; hashing the texts
costs a fraction of a second. Entries live in $TINY_TRANSFORMERS_CACHE, else
$XDG_CACHE_HOME/tiny-transformers/tokens (~/.cache/...); the folder can be deleted at any time.
"""

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from storage import atomic_write

CACHE_ENV = "TINY_TRANSFORMERS_CACHE"


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tiny-transformers" / "tokens"


def cache_key(what: str, tokenizer, texts: list[str], settings: dict) -> str:
    """A hash of everything the arrays are a function of."""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(json.dumps({"what": what, **settings}, sort_keys=True, default=str).encode())
    digest.update(tokenizer.tokenizer.to_str().encode())
    for text in texts:
        encoded = text.encode("utf-8", "surrogatepass")
        digest.update(len(encoded).to_bytes(8, "little"))  # lengths too: ["ab", "c"] is not ["a", "bc"]
        digest.update(encoded)
    return f"{what}-{digest.hexdigest()}"


def cached_arrays(what: str, tokenizer, texts: list[str], settings: dict,
                  build: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """`build()`'s arrays for these texts, from the cache when an earlier run stored them, else built
    and stored (atomically: two runs may build the same entry at once). A cache that cannot be
    written (a read-only home) only costs the time."""
    path = cache_dir() / f"{cache_key(what, tokenizer, texts, settings)}.npz"
    if path.is_file():
        try:
            with np.load(path) as stored:
                return {name: stored[name] for name in stored.files}
        except (OSError, ValueError):
            pass  # a damaged entry is rebuilt
    arrays = build()

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:  # a file, not a name: np.savez would add ".npz" to a temporary name
            np.savez(f, **arrays)

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, write)
    except OSError:
        pass
    return arrays


def ragged(rows: list[list[int]]) -> dict[str, np.ndarray]:
    """Rows of token ids as two arrays (the ids end to end, and where each row ends)."""
    return {"ids": np.fromiter((t for row in rows for t in row), dtype=np.int32),
            "ends": np.cumsum([len(row) for row in rows], dtype=np.int64)}


def rows_of(ids: np.ndarray, ends: np.ndarray) -> list[list[int]]:
    """`ragged`'s arrays back as rows."""
    flat, bounds = ids.tolist(), [0, *ends.tolist()]
    return [flat[bounds[i] : bounds[i + 1]] for i in range(len(ends))]
