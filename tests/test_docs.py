"""The documentation holds together: its relative links resolve, the linter sees every tracked Python
file (docs included: experiment scripts live in git's history, not in `docs/`), and the decisions
record stays a record, not a diary."""
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
LOG_LIMIT = 30_000  # bytes; the full diary is `git show a0c31ee:docs/log.md`

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^()\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.M)


def link_targets(text: str) -> list[str]:
    """Link and image targets of a Markdown text, fenced code and code spans left out."""
    text = CODE_SPAN.sub("", FENCE.sub("", text))
    return [m.group(1).strip("<>") for pattern in (LINK, REFERENCE) for m in pattern.finditer(text)]


def local_path(target: str) -> str | None:
    """The file part of a relative link; None for URLs (any scheme), mail and anchors-only links."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith(("#", "//")):
        return None
    return unquote(target.split("#", 1)[0].split("?", 1)[0]) or None


def test_link_targets_are_read_as_markdown_reads_them():
    text = ("[a](docs/x.md#part) ![b](<img one.png> \"t\") [c](https://e.org/y) [d](#top) `[e](no.md)`\n"
            "[`f` g](../z.md)\n\n```\n[i](fenced.md)\n```\n[j]: ref.md\n")
    targets = link_targets(text)
    assert targets == ["docs/x.md#part", "img one.png", "https://e.org/y", "#top", "../z.md", "ref.md"]
    assert [local_path(t) for t in targets] == ["docs/x.md", "img one.png", None, None, "../z.md", "ref.md"]


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = [target for target in link_targets(page.read_text(encoding="utf-8"))
              if (path := local_path(target)) is not None
              and not ((ROOT if path.startswith("/") else page.parent) / path.lstrip("/")).exists()]
    assert not broken, f"{page.relative_to(ROOT)} links to missing files: {broken}"


def tracked_python_files() -> set[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z", "--", "*.py"], cwd=ROOT, capture_output=True, check=True)
    return {name for name in out.stdout.decode().split("\0") if name and (ROOT / name).exists()}


def ruff_command() -> list[str]:
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    if shutil.which("ruff"):
        return ["ruff"]
    pytest.skip("ruff is not installed (requirements-dev.txt)")


def test_the_linter_excludes_no_tracked_python_file():
    """`ruff check .` (CONTRIBUTING.md) lints what `ruff check --show-files .` lists: pyproject.toml's
    `extend-exclude` may keep build output out, never a tracked file."""
    tracked = tracked_python_files()
    out = subprocess.run([*ruff_command(), "check", "--show-files", "."], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    linted = {Path(line).resolve().relative_to(ROOT).as_posix() for line in out.stdout.splitlines()
              if line.strip() and Path(line).resolve().is_relative_to(ROOT)}
    assert tracked, "git lists no Python files"
    assert not tracked - linted, f"tracked but not linted: {sorted(tracked - linted)}"


def test_the_decisions_record_stays_short():
    size = (ROOT / "docs" / "log.md").stat().st_size
    assert size <= LOG_LIMIT, (f"docs/log.md is {size:,} bytes (at most {LOG_LIMIT:,}): record decisions, "
                               "point at docs/experiments/ for the details")
