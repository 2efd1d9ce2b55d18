"""The kinds of ending `training.run` reports as one line instead of a traceback.

A `UsageError` is a bad command line (an unknown preset, CUDA asked for where there is none, flags
that exclude each other): the CLI exits with status 2, as argparse does. A `DataError` is bad input
data (a missing column, an invalid label in row 17 of the test split): status 1. `Interrupted` is a
run stopped by Ctrl-C or SIGTERM: status 130, and the line says how to go on.
"""

import sys
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class UsageError(ValueError):
    """A bad option or combination of options; `training.run` prints it and exits with status 2."""


class DataError(ValueError):
    """Bad data input; `training.run` prints its message as one line and exits with status 1."""


class Interrupted(Exception):
    """A run stopped by a signal; its message says what was saved and the command that goes on."""


def one_line_errors(parser, build: Callable[..., T], args) -> T:
    """`build(args)` for a small CLI (`training.evidence`, `training.pseudo`): a `UsageError` is
    `parser.error` (one line, status 2), bad data or a missing file one `error:` line and status 1."""
    try:
        return build(args)
    except UsageError as e:
        parser.error(str(e))
    except (DataError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
