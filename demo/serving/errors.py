"""What a visitor is told when a request fails: always one line, never a traceback or a path.

The caller of every handler is an anonymous web visitor or script. A problem they can understand
(and usually fix: empty input, a missing checkpoint, a busy server) is a `DemoError`, whose
message is shown as is; anything else is a fault of ours, logged here and shown as one generic
sentence. Messages quote no absolute file system path (`scrub_paths`).
"""

import logging
import re

log = logging.getLogger("demo")

INTERNAL_ERROR = "Sorry, something went wrong on our side (it has been logged). Please try other input."


class DemoError(Exception):
    """A problem the visitor can understand (and usually fix); the message is shown as is."""


def failure(e: Exception) -> str:
    """The one-line notice for an exception: the visitor's own message, or a generic one (and a log)."""
    if isinstance(e, DemoError):
        return f"ℹ️ {e}"
    log.exception("request failed")
    return f"⚠️ {INTERNAL_ERROR}"


_ABSOLUTE_PATH = re.compile(r"(?<![\w.~:/-])(?:/[\w.@+~-]+)+/(?=[\w.@+~-])")  # not URLs, not relative


def scrub_paths(text: str) -> str:
    """Hide the directories of absolute paths (`/home/me/data/imdb` -> `…/imdb`): metrics.json
    records the training command and data source, which may name the trainer's file system."""
    return _ABSOLUTE_PATH.sub("…/", text)
