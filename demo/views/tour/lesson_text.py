"""The steps' words, read from Markdown a teacher edits without touching Python: `lessons/<id>.md`,
one file per registered step (the format: `lessons/README.md`). The numbers come from the step's
code as named placeholders, `{{token}}`, which `render` fills.

Every problem is reported at once, in one `LessonError` naming the file: a registered step with no
text, a file no step uses, a missing title, paragraph, formula or tensor line, an unknown section,
and (when a step is shown) a placeholder its code does not fill, with the names it does fill."""

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

FOLDER = Path(__file__).with_name("lessons")
NOT_STEPS = ("README.md", "GLOSSARY.md")  # the folder's guide, and the glossary (`demo.views.tour.glossary`)
PLACEHOLDER = re.compile(r"( ?)\{\{\s*([A-Za-z_]\w*)\s*\}\}")
SECTIONS = ("Formula", "Tensor", "Worked out")  # and any number of "Part: <name>"
REQUIRED = ("Formula", "Tensor")


class LessonError(ValueError):
    """The lesson texts do not fit the steps; the message lists every problem found."""


@dataclass(frozen=True)
class Part:
    """A fill that is a part of the step's own text (`## Part: name`), for a sentence said only in some
    cases: `fills["note"] = Part("causal") if causal else ""`."""

    name: str


@dataclass(frozen=True)
class Lesson:
    id: str
    title: str
    paragraphs: tuple[str, ...]
    formulas: tuple[str, ...]  # LaTeX, one per line of the Formula section
    tensor: str
    worked: str = ""
    parts: dict[str, str] = field(default_factory=dict)

    def placeholders(self) -> set[str]:
        texts = [self.title, *self.paragraphs, *self.formulas, self.tensor, self.worked, *self.parts.values()]
        return {m.group(2) for text in texts for m in PLACEHOLDER.finditer(text)}


@dataclass(frozen=True)
class Text:
    """A lesson with its numbers filled in: what a `Step` shows."""

    title: str
    explanation: str
    formula: str
    shape: str
    worked: str


def _join(lines: list[str]) -> list[str]:
    """Lines -> paragraphs (separated by blank lines; a paragraph's lines joined by spaces)."""
    out, current = [], []
    for line in [*lines, ""]:
        if line.strip():
            current.append(line.strip())
        elif current:
            out.append(" ".join(current))
            current = []
    return out


def parse(id: str, text: str) -> tuple[Lesson | None, list[str]]:
    """A lesson file's text -> (the lesson, []) or (None, its problems)."""
    where = f"lessons/{id}.md"
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("#")]
    if not heads or not lines[heads[0]].startswith("# ") or any(line.strip() for line in lines[:heads[0]]):
        return None, [f"{where}: the first line must be the title, `# Title`"]
    sections: dict[str, list[str]] = {}
    problems = []
    for n, start in enumerate(heads):
        end = heads[n + 1] if n + 1 < len(heads) else len(lines)
        name = lines[start].lstrip("#").strip() if n else ""
        if n and (not lines[start].startswith("## ") or not (name in SECTIONS or name.startswith("Part: "))):
            problems.append(f"{where}: unknown section {lines[start]!r} (sections: "
                            f"{', '.join('## ' + s for s in SECTIONS)}, ## Part: <name>)")
        elif name in sections:
            problems.append(f"{where}: two sections {lines[start]!r}")
        sections[name] = lines[start + 1:end]
    paragraphs = _join(sections[""])
    formulas = [line.strip().removeprefix("$$").removesuffix("$$").strip()
                for line in sections.get("Formula", []) if line.strip()]
    problems += [f"{where}: no paragraph under the title"] * (not paragraphs)
    problems += [f"{where}: no `## {s}` section, or it is empty" for s in REQUIRED if not _join(sections.get(s, []))]
    if problems:
        return None, problems
    parts = {name.removeprefix("Part: ").strip(): "\n\n".join(_join(body))
             for name, body in sections.items() if name.startswith("Part: ")}
    return Lesson(id, lines[0][2:].strip(), tuple(paragraphs), tuple(formulas),
                  " ".join(_join(sections["Tensor"])), " ".join(_join(sections.get("Worked out", []))), parts), []


def load(ids: list[str], folder: Path = FOLDER) -> dict[str, Lesson]:
    """The lessons of steps `ids`, each read from `folder/<id>.md`; LessonError listing every problem."""
    lessons, problems = {}, []
    for id in ids:
        path = folder / f"{id}.md"
        if not path.is_file():
            problems.append(f"lessons/{id}.md: missing (the text of step {id!r})")
            continue
        lessons[id], found = parse(id, path.read_text(encoding="utf-8"))
        problems += found
    strays = sorted(p.name for p in folder.glob("*.md") if p.stem not in ids and p.name not in NOT_STEPS)
    problems += [f"lessons/{name}: no step is called {name[:-3]!r} (steps: {', '.join(ids)})" for name in strays]
    if problems:
        raise LessonError(f"The tour's lesson texts ({folder}) do not fit its steps:\n- " + "\n- ".join(problems))
    return lessons


@functools.cache
def shipped(ids: tuple[str, ...]) -> dict[str, Lesson]:
    """`load` of the shipped folder, read once per process."""
    return load(list(ids))


def _fill(lesson: Lesson, text: str, fills: dict) -> str:
    def one(m: re.Match) -> str:
        value = fills[m.group(2)]
        value = _fill(lesson, lesson.parts[value.name], fills) if isinstance(value, Part) else str(value)
        return f"{m.group(1)}{value}" if value else ""  # nothing filled: its space goes too
    return PLACEHOLDER.sub(one, text)


def render(lesson: Lesson, fills: dict) -> Text:
    """The lesson with `fills` (placeholder -> text, or a `Part`) put in; LessonError naming every
    placeholder the fills lack or part the lesson lacks."""
    missing = sorted(lesson.placeholders() - fills.keys())
    unknown = sorted(v.name for v in fills.values() if isinstance(v, Part) and v.name not in lesson.parts)
    if missing or unknown:
        raise LessonError(
            f"lessons/{lesson.id}.md: " + "; ".join(
                [f"the step's code fills no {', '.join('{{' + m + '}}' for m in missing)}"] * bool(missing)
                + [f"no `## Part: {name}` for the step's code to use" for name in unknown])
            + f" (it fills: {', '.join(sorted(fills)) or 'nothing'})")
    formula = lesson.formulas[0] if len(lesson.formulas) == 1 else \
        r"\begin{gathered}" + r" \\ ".join(lesson.formulas) + r"\end{gathered}"  # one under the other: phones
    return Text(_fill(lesson, lesson.title, fills), "\n\n".join(_fill(lesson, p, fills) for p in lesson.paragraphs),
                _fill(lesson, formula, fills), _fill(lesson, lesson.tensor, fills), _fill(lesson, lesson.worked, fills))
