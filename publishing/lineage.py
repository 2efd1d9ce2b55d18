"""Record what a finished run started from, for runs that finished before runs recorded it themselves
(`storage.lineage`): its `--init-from`, read from where those weights are now.

    python -m publishing.lineage RUN [--ancestor FOLDER]

The shipped forward classifier needed it: it was fine-tuned from `checkpoints/lm` before that folder's
LM was trained on further, so its record was read from the earlier LM, before the folder was replaced
(docs/experiments/lm-continued-2026-11-29); `--ancestor` takes those bytes out of git's history otherwise.
"""

import argparse
import sys
from pathlib import Path

from storage import record_lineage


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m publishing.lineage", description=(
        "Record what a finished run started from (its --init-from) in its metrics.json, for runs that "
        "finished before runs recorded it themselves."))
    p.add_argument("run", type=Path, help="the run's folder (its metrics.json names the --init-from)")
    p.add_argument("--ancestor", type=Path, help="where those weights are now, if the folder named has changed "
                                                 "(e.g. `git show COMMIT:checkpoints/lm/...` copied out)")
    args = p.parse_args(argv)
    try:
        record = record_lineage(args.run, args.ancestor)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"error: {e}")
    print(f"{args.run}: started from {record['checkpoint']} (weights sha256 {record['weights_sha256'][:12]}...)")


if __name__ == "__main__":
    main()
