"""The one way this project writes a file: to a temporary name, then renamed into place.

A process killed mid-save leaves the previous file intact, never half of a new one. Every file gets
the permissions a plain `open()` would give (0666 less the umask): some writers, safetensors' and
`tempfile.mkstemp` among them, create theirs 0600, which hides a shared checkpoint from other users.
"""

import os
from collections.abc import Callable
from pathlib import Path

_UMASK = os.umask(0)  # reading the umask means setting it: once, at import, not per write
os.umask(_UMASK)


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object]) -> None:
    """Call `write(tmp_path)`, then rename the result over `path` (atomic on POSIX)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
