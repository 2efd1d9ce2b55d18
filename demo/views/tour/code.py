"""Where a step's source lives: a `CodeRef` (a function, class or method and a pattern of its lines)
resolved with `inspect` and read from the file at run time, so a displayed line is always the line
that ran. Each step names its `CodeRef` where it is registered (`demo.views.tour.registry`)."""

import functools
import importlib
import inspect
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class CodeRef:
    """A function, class or method (dotted path) and, optionally, the lines of it to show: from the
    first line matching `start` to the first line from there matching `end` (regular expressions;
    `end` None: the start line alone; both None: the whole definition)."""

    target: str
    start: str | None = None
    end: str | None = None


@dataclass(frozen=True)
class CodeRange:
    path: str  # relative to the repository
    first_line: int  # 1-based, inclusive
    last_line: int
    lines: tuple[str, ...]  # read from the file


def _resolve(target: str):
    """A dotted path -> the object: the longest importable module prefix, then attributes."""
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise LookupError(f"cannot import {target}")


@functools.cache
def source_lines(ref: CodeRef) -> CodeRange:
    """The lines `ref` names, read from the file; LookupError if it no longer matches the code."""
    obj = inspect.unwrap(_resolve(ref.target))
    lines, first = inspect.getsourcelines(obj)
    path = Path(inspect.getsourcefile(obj)).resolve()

    def find(pattern: str, start: int) -> int:
        for i in range(start, len(lines)):
            if re.search(pattern, lines[i]):
                return i
        raise LookupError(f"no line of {ref.target} matches {pattern!r}")

    begin = find(ref.start, 0) if ref.start else 0
    end = (find(ref.end, begin) if ref.end else begin) if ref.start else len(lines) - 1
    text = path.read_text(encoding="utf-8").splitlines()
    return CodeRange(path.relative_to(REPO_ROOT).as_posix(), first + begin, first + end,
                     tuple(text[first + begin - 1: first + end]))


def listing(code: CodeRange) -> tuple[str, str]:
    """`code` as shown beside a step: (where, "path:first–last"; the lines, numbered, less their common
    indent, in a Markdown code block)."""
    shown = textwrap.dedent("\n".join(code.lines)).split("\n")
    lines = "\n".join(f"{n:>4}  {line}" for n, line in enumerate(shown, start=code.first_line))
    where = f"{code.path}:{code.first_line}" + (f"–{code.last_line}" if code.last_line > code.first_line else "")
    return where, f"```python\n{lines}\n```"
