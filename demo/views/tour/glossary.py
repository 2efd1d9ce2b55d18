"""The tour's glossary (`lessons/GLOSSARY.md`, one line per word, editable without Python) and the
links from a step's text to it: the first use of each word in a step links to its line."""

import functools
import re
from dataclasses import dataclass
from pathlib import Path

FILE = Path(__file__).with_name("lessons") / "GLOSSARY.md"
LINE = re.compile(r"^- \*\*(?P<word>[^*]+)\*\*(?: \(also: (?P<forms>[^)]*)\))?: (?P<meaning>.+)$")
# text a link must not go into: code, formulas, links, headings
PROTECTED = re.compile(r"(`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|\[[^\]]*\]\([^)]*\)|^#.*$)", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Entry:
    word: str
    forms: tuple[str, ...]  # the word and its other forms, as the text writes them
    meaning: str

    @property
    def anchor(self) -> str:
        return "glossary-" + re.sub(r"[^a-z0-9]+", "-", self.word.lower()).strip("-")


@functools.lru_cache(maxsize=1)
def entries(path: Path = FILE) -> tuple[Entry, ...]:
    """The glossary's lines, in its order; ValueError naming the line that does not parse."""
    found = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.startswith("- "):
            continue
        m = LINE.match(line)
        if not m:
            raise ValueError(f"lessons/GLOSSARY.md line {n}: not `- **word** (also: forms): meaning.`")
        forms = [m["word"], *[f.strip() for f in (m["forms"] or "").split(",") if f.strip()]]
        found.append(Entry(m["word"], tuple(forms), m["meaning"]))
    return tuple(found)


def link_first_uses(text: str, glossary: tuple[Entry, ...] | None = None) -> str:
    """`text` (Markdown) with the first use of each glossary word (any of its forms) linked to its line
    (`#glossary-…`), never inside code, a formula or a link; words with longer forms first ("padding
    mask" before "mask")."""
    glossary = entries() if glossary is None else glossary
    for entry in sorted(glossary, key=lambda e: -max(len(f) for f in e.forms)):
        patterns = [re.compile(rf"(?<![\w#-]){re.escape(form)}(?![\w-])",
                               0 if any(c.isupper() for c in form[1:]) else re.IGNORECASE) for form in entry.forms]
        parts = PROTECTED.split(text)
        best = None  # (part, start, end) of the earliest use, the longest form at a tie
        for i in range(0, len(parts), 2):  # the even parts are free text
            found = [m for m in (p.search(parts[i]) for p in patterns) if m]
            if found:
                m = min(found, key=lambda m: (m.start(), -len(m.group(0))))
                best = (i, m)
                break
        if best:
            i, m = best
            parts[i] = f"{parts[i][:m.start()]}[{m.group(0)}](#{entry.anchor}){parts[i][m.end():]}"
            text = "".join(parts)
    return text


def glossary_html(glossary: tuple[Entry, ...] | None = None) -> str:
    """The glossary on the page: one line per word, each its link's target."""
    import html
    rows = "".join(f'<li id="{e.anchor}"><b>{html.escape(e.word)}</b>: {html.escape(e.meaning)}</li>'
                   for e in (entries() if glossary is None else glossary))
    return f'<div id="tour-glossary-list"><h3>Glossary</h3><ul>{rows}</ul></div>'
