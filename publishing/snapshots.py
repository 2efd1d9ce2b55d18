"""Ship a run's weight snapshots with the app, in one step: as many as fit a size budget.

    python -m publishing.snapshots runs/laptop-lm     # -> checkpoints/lm-laptop/snapshots/, at most 30 MB

The app's "Watch it learn" tab shows these when the language model it serves kept none of its own
(the Space serves the shipped LM, trained on a GPU without snapshots). The snapshots shipped are
spread evenly over the run's list, the first (the random start) and the last always among them, as
many as fit --max-mb; the index is rewritten to list them, with the run's whole loss curve. The
destination's earlier snapshots are replaced. The layout is `storage.snapshots`.
"""

import shutil
from pathlib import Path

from cli import Parser
from storage import (
    SHIPPED_SNAPSHOTS,
    SNAPSHOTS_DIR,
    TOKENIZER_NAME,
    find_snapshots,
    is_being_written,
    read_index,
    write_index,
)

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "checkpoints" / SHIPPED_SNAPSHOTS / SNAPSHOTS_DIR
MAX_MB = 30.0


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def spread(n: int, k: int) -> list[int]:
    """k of the positions 0 .. n-1, evenly spread, the first and the last included."""
    if k >= n:
        return list(range(n))
    if k <= 1:
        return [n - 1]
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def ship(run: Path, out: Path, max_mb: float) -> list[dict]:
    """Copy the largest evenly spread set of `run`'s snapshots that fits `max_mb` into `out`; returns
    the index entries shipped. Raises ValueError when the run has none, is still being written, or
    not even one snapshot fits."""
    folder = find_snapshots(run)
    if folder is None:
        raise ValueError(f"{run} holds no snapshots (a run keeps them with --snapshots N; the lm task does by default)")
    if is_being_written(run):
        raise ValueError(f"{run} is still being written by a training run: ship its snapshots once it has finished")
    index = read_index(folder)
    entries = sorted(index["snapshots"], key=lambda e: e["step"])
    sizes = [folder_bytes(folder / e["path"]) for e in entries]
    budget = max_mb * 1e6 - (folder / TOKENIZER_NAME).stat().st_size
    for k in range(len(entries), 0, -1):
        chosen = spread(len(entries), k)
        if sum(sizes[i] for i in chosen) <= budget:
            break
    else:
        raise ValueError(f"one snapshot of {run} takes {min(sizes) / 1e6:.1f} MB: more than --max-mb {max_mb:g}")
    shipped = [entries[i] for i in chosen]
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    shutil.copy2(folder / TOKENIZER_NAME, out / TOKENIZER_NAME)
    for entry in shipped:
        shutil.copytree(folder / entry["path"], out / entry["path"])
    write_index(out, {**index, "snapshots": shipped})
    return shipped


def main(argv: list[str] | None = None) -> list[dict]:
    parser = Parser("python -m publishing.snapshots", __doc__)
    parser.add_argument("run", type=Path, help="a finished training run's folder (it holds snapshots/)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"the snapshots folder to write (default: checkpoints/{SHIPPED_SNAPSHOTS}/"
                             f"{SNAPSHOTS_DIR})")
    parser.add_argument("--max-mb", type=float, default=MAX_MB, help=f"size budget in MB (default {MAX_MB:g})")
    args = parser.parse_args(argv)
    if not args.max_mb > 0:
        parser.error(f"--max-mb must be > 0, got {args.max_mb}")
    try:
        shipped = ship(args.run, args.out, args.max_mb)
    except (OSError, ValueError) as e:
        parser.error(str(e))
    print(f"shipped {len(shipped)} snapshots (steps {', '.join(str(e['step']) for e in shipped)}), "
          f"{folder_bytes(args.out) / 1e6:.1f} MB -> {args.out}")
    return shipped


if __name__ == "__main__":
    main()
