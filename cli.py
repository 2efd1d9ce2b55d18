"""The one command-line parser of this project's CLIs: a bad argument is one line, not a usage block.

argparse answers `--task lmm` or `--lr abc` with its whole usage block (25 lines for
`training.run`) and the error last, where it scrolls out of sight. `Parser` prints one line that
names the flag and points at `--help`, and exits with status 2, as argparse does:

    error: argument --lr: invalid float value: 'abc'; see: python -m training.run --help

`python -m training.run`, `training.evaluate`, `training.sample`, `training.evidence`,
`publishing.snapshots` and `python -m demo` build their parsers from it (the benchmarks keep theirs,
in `benchmarks/common.py`), and report the usage errors they find after parsing (a preset the task
lacks, a folder that holds no model) through `Parser.error` too, so that every usage error reads alike.

A top-level module, not part of a package: the app must not import `training`, and `training`
must not import the app. Abbreviated flags are off (`--ou` is not `--out`): a run records its
exact command line, and `--resume` commands are built from it.
"""

import argparse
import re
import sys
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose errors are one line on stderr, with exit status 2."""

    def __init__(self, prog: str, description: str | None = None, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(prog=prog, description=description, allow_abbrev=False, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Print `error: <message>; see: <prog> --help` as one line and exit with status 2 (argparse
        calls this for every bad argument; the CLIs call it for the usage errors they find later)."""
        message = re.sub(r"\s*\n\s*", " ", str(message)).strip().rstrip(".")
        print(f"error: {message}; see: {self.prog} --help", file=sys.stderr)
        sys.exit(2)
