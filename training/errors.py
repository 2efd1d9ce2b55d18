"""The kinds of ending `training.run` reports as one line instead of a traceback.

A `UsageError` is a bad command line (an unknown preset, CUDA asked for where there is none, flags
that exclude each other): the CLI exits with status 2, as argparse does. A `DataError` is bad input
data (a missing column, an invalid label in row 17 of the test split): status 1. `Interrupted` is a
run stopped by Ctrl-C or SIGTERM: status 130, and the line says how to go on.
"""


class UsageError(ValueError):
    """A bad option or combination of options; `training.run` prints it and exits with status 2."""


class DataError(ValueError):
    """Bad data input; `training.run` prints its message as one line and exits with status 1."""


class Interrupted(Exception):
    """A run stopped by a signal; its message says what was saved and the command that goes on."""
