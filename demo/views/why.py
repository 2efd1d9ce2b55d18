"""Why each part exists, trained: the runs of `python -m training.why`, one per part of the model, each a
small model of our architecture trained twice (with the part and without it) from the same seeds, read
from `checkpoints/why/<part>/why.json` (issue 60). The tour's LM steps show the run of their part
("Trained without it", `demo.tabs.why_panel`) and the `/tour` API carries it (`trained_without`).

Every sentence here is computed from the run's numbers: the verdict from the final held-out losses
and their spread over the seeds (`inspection.trained_without.verdict`, the rule the run itself used),
never taken from text that could disagree with them. No Gradio here."""

import functools
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from demo.views.tour.code import REPO_ROOT, CodeRange, CodeRef, source_lines
from inspection.trained_without import BETTER, WITHIN, verdict

log = logging.getLogger(__name__)

ROOT = REPO_ROOT / "checkpoints" / "why"  # where the runs are shipped; tests point it at tests/data/why
RUN_FILE = "why.json"
REQUIRED = ("part", "change", "curves", "final", "spread", "measure", "samples", "verdict", "tour_step", "command")
ARMS = ("with", "without")


@functools.cache
def _runs(root: Path) -> dict[str, dict]:
    runs = {}
    for path in sorted(root.glob(f"*/{RUN_FILE}")):
        try:
            run = json.loads(path.read_text(encoding="utf-8"))
            missing = [key for key in REQUIRED if key not in run]
            if missing:
                raise ValueError(f"no {', '.join(missing)}")
            why_view(run)  # every sentence can be written from it
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:  # its step goes without, not the tour
            log.warning("skipping %s: %s", path, e)
            continue
        if run["tour_step"] in runs:  # one run a step: the first part in name order
            log.warning("skipping %s: step %r shows %s's run", path, run["tour_step"], runs[run["tour_step"]]["part"])
            continue
        runs[run["tour_step"]] = run
    return runs


def runs(root: Path | None = None) -> dict[str, dict]:
    """Every shipped run under `root` (default `ROOT`), keyed by the LM tour step that shows it; {} when
    none is shipped. Read once per root."""
    return _runs(Path(root or ROOT).resolve())


def trained_without(step: str, root: Path | None = None) -> dict | None:
    """The run (its why.json, as shipped) of LM tour step `step`, or None where no run is mapped to it."""
    return runs(root).get(step)


def number(x: float) -> str:
    """A measured value in a sentence: an integer with separators, a float to 3 significant digits
    (more for a large one: 1,840,128; 27.5; 0.0031)."""
    if isinstance(x, int) or (abs(x) >= 1000 and float(x).is_integer()):
        return f"{int(x):,}"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def shape_words(shape: dict) -> str:
    """The with-arm's model in words: "4 layers, 4 heads, width 128" (the fields it has)."""
    words = [f"{shape[key]} {name}{'s' if shape[key] != 1 else ''}" for key, name in
             (("n_layer", "layer"), ("n_head", "head")) if key in shape]
    return ", ".join(words + ([f"width {shape['d_model']}"] if "d_model" in shape else []))


def first_at_or_below(curve: list[list[float]], value: float) -> int | None:
    """The first step of `curve` ([[step, loss], …]) whose loss is at or below `value`, None if none."""
    return next((int(step) for step, loss in curve if loss <= value), None)


def verdict_sentence(run: dict) -> str:
    """The verdict in plain words, with the numbers it rests on (Markdown)."""
    final, spread = run["final"], run["spread"]
    w, wo, sw, swo = final["with"], final["without"], spread["with"], spread["without"]
    said, gap = verdict(final, spread), wo - w
    seeds = len(run.get("seeds", [])) or "the"
    spreads = f"the range over {seeds} seed{'' if seeds == 1 else 's'}: {sw:.3f} with it, {swo:.3f} without"
    losses = f"{wo:.3f} nats per token on held-out text, against {w:.3f} with it"
    if said == WITHIN:
        scale = ", ".join([w for w in (shape_words(run.get("shape", {})),) if w] + [f"{run['steps']:,} steps"])
        return (f"**At this scale ({scale}) this part does not matter.** Without it, the model ends at {losses}: a "
                f"difference of {abs(gap):.3f}, no more than the seeds' own spread ({spreads}).")
    if said == BETTER:
        return (f"**Without it, the held-out loss ends lower:** {losses}, {-gap:.3f} lower, more than the "
                f"seeds' spread ({spreads}). Read the measure below before calling it better.")
    reached = first_at_or_below(run["curves"]["without"], w)
    pace = (f" In {run['steps']:,} steps it never gets down to the loss the model with it ends at."
            if reached is None else f" It first gets down to the with-arm's final loss at step {reached:,}.")
    return (f"**Without it, the model ends worse:** {losses}, {gap:.3f} higher, more than the seeds' "
            f"spread ({spreads}).{pace}")


def measure_sentence(measure: dict) -> str:
    """The measure, its values with and without, and what it shows."""
    w, wo = measure["with"], measure["without"]
    if isinstance(w, list):
        labels = measure.get("labels") or [str(i + 1) for i in range(len(w))]
        values = "; ".join(f"{label}: {number(a)} with it, {number(b)} without"
                           for label, a, b in zip(labels, w, wo, strict=True))
    else:
        values = f"{number(w)} with it, {number(wo)} without"
    about = measure.get("about", "").strip()
    about = f"{about[:1].upper()}{about[1:]}{'' if about.endswith('.') else '.'}" if about else ""
    return f"**{measure['name'][:1].upper()}{measure['name'][1:]}:** {values}. {about}".strip()


def run_words(run: dict) -> str:
    """How the run was made: the change, the model, the steps and seeds, the command."""
    shape = shape_words(run.get("shape", {}))
    seeds = run.get("seeds", [])
    names = [str(seed) for seed in seeds]
    which = f"seed {names[0]}" if len(names) == 1 else f"seeds {', '.join(names[:-1])} and {names[-1]}"
    tokens = f" of {run['tokens_per_step']:,} tokens" if "tokens_per_step" in run else ""
    minutes = f" ({run['minutes']:.1f} minutes)" if "minutes" in run else ""
    return (f"**What changed:** {run['change']}. A model of {shape or 'this architecture'} trained {run['steps']:,} "
            f"steps{tokens} with the part and again without it, from {which}; each curve is the mean over the "
            f"seeds. Made by `{run['command']}`{minutes}.")


@dataclass
class WhyView:
    """What the "Trained without it" section shows of one run."""

    run: dict
    verdict: str  # computed from the numbers (`inspection.trained_without.verdict`)
    headline: str  # the verdict in words
    measure: str
    reason: str  # why the part is there: the run's own paragraph (the training reason)
    made: str  # the change, the model, the command
    code: CodeRange | None  # the line the switch changes; None if it no longer matches model/


def why_view(run: dict) -> WhyView:
    try:
        code = source_lines(CodeRef(**run["code"])) if run.get("code") else None
    except (LookupError, AttributeError, OSError, TypeError):  # model/ moved on: the section says so
        code = None
    return WhyView(run, verdict(run["final"], run["spread"]), verdict_sentence(run),
                   measure_sentence(run["measure"]), run.get("why", ""), run_words(run), code)
