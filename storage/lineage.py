"""What a fine-tuned or continued model started from, recorded once and for good.

A run started with `--init-from CHECKPOINT` names a folder whose contents can change after it: the
shipped LM is retrained or trained on, a run folder is deleted. Its command alone would then point at
other weights. So the run records, when it starts, what it started from: the weights' SHA-256 (which
finds them again for good, in git's history for a shipped folder) and the ancestor's own record of how
it was trained, the ancestor's own start included. The model card reads the chain back
(`publishing.report`), and the tokens of the whole chain are the model's real training budget.

`python -m publishing.lineage RUN` records it for a run that finished before runs recorded it.
"""

import hashlib
import json
import shlex
from pathlib import Path

from storage.atomic import atomic_write_text
from storage.hub import resolve_checkpoint
from storage.layout import METRICS_NAME, WEIGHTS_NAME

ANCESTOR_KEYS = ("command", "steps", "tokens_seen", "train_time_s", "device", "date")  # from its metrics.json


def weights_sha256(folder: Path) -> str:
    digest = hashlib.sha256()
    with open(folder / WEIGHTS_NAME, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def lineage(checkpoint: str | Path, name: str | None = None) -> dict:
    """The record of `checkpoint` as it is now: `name` (what the run's command called it; default the
    path given), its weights' SHA-256, and how it was trained (its metrics.json, when it has one)."""
    folder = resolve_checkpoint(checkpoint)
    record = {"checkpoint": name or str(checkpoint), "weights_sha256": weights_sha256(folder)}
    metrics = folder / METRICS_NAME
    if metrics.is_file():
        m = json.loads(metrics.read_text(encoding="utf-8"))
        record.update({key: m[key] for key in ANCESTOR_KEYS if key in m})
        if "init_from" in m:
            record["init_from"] = m["init_from"]
    return record


def chain(m: dict) -> list[dict]:
    """A run's ancestors, nearest first (each `lineage` record)."""
    found, record = [], m.get("init_from")
    while record:
        found.append(record)
        record = record.get("init_from")
    return found


def tokens_in_all(m: dict) -> int:
    """The tokens the model trained on: its own run's and every ancestor's that recorded them."""
    return m["tokens_seen"] + sum(record.get("tokens_seen", 0) for record in chain(m))


def init_from_in(command: str) -> str | None:
    """The `--init-from` of the last invocation in a run's recorded command that has one."""
    found = None
    for stretch in command.split(" && "):
        words = shlex.split(stretch)
        if "--init-from" in words[:-1]:
            found = words[words.index("--init-from") + 1]
    return found


def record_lineage(run: Path, ancestor: Path | None = None) -> dict:
    """Add `init_from` to a finished run's metrics.json: the run's `--init-from`, read from `ancestor`
    where the folder the command names no longer holds those weights (a copy out of git's history).
    Never replaces a record: what a run started from is written once."""
    path = Path(run) / METRICS_NAME
    m = json.loads(path.read_text(encoding="utf-8"))
    name = init_from_in(m["command"])
    if name is None:
        raise ValueError(f"{run}: its command has no --init-from; it started from scratch")
    if "init_from" in m:
        raise ValueError(f"{run}: it already records what it started from ({m['init_from']['checkpoint']})")
    m["init_from"] = lineage(ancestor or name, name=name)
    atomic_write_text(path, json.dumps(m, indent=2) + "\n")
    return m["init_from"]
