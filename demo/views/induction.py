"""Watch an induction head form (issue 60): the depth run of `python -m training.why`, a 2-layer model and
its 1-layer control trained on text that rewards copying, read from `checkpoints/why/induction/
induction.json` (beside `demo.views.why`'s runs): the loss on the repeated half over the steps, the best
head's induction score over the steps (Olsson et al. 2022's criterion, `inspection.head_kinds`), and that
head's attention on one repeated random sequence at three moments (before, during and after the drop).

Why two layers: an induction head's query must find the key whose *previous* token matches the current
token, and that previous token is in the key's vector only once a head of an earlier layer has moved it
there (a previous-token head): layer 2's queries and keys read what layer 1 wrote into the residual
stream. The code that makes it possible is `COMPOSITION`. No Gradio here; `demo.tabs.induction_panel`
shows it."""

import functools
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from demo.views import why
from demo.views.attention import AttentionResult
from demo.views.tour.code import CodeRange, CodeRef, source_lines
from inspection.head_kinds import THRESHOLDS, on_induction

log = logging.getLogger(__name__)

RUN_FILE = Path("induction") / "induction.json"
MODELS = ("2layer", "1layer")
NAMES = {"2layer": "2 layers", "1layer": "1 layer"}
# the lines that let layer 2 read what layer 1 wrote: queries and keys are computed from the stream x,
# each layer reads the stream the layers before it wrote, and each sublayer adds its output to that stream
COMPOSITION = (CodeRef("model.attention.MultiHeadAttention.forward", r"q, k, v = self\.in_proj\(x\)"),
               CodeRef("model.layers.Decoder.forward", r"for i, layer in enumerate", r"x = layer\("),
               CodeRef("model.layers.SublayerConnection.forward", r"kept = x if self\.residual",
                       r"return self\.hook_resid\(kept"))
NO_RUN = ("No induction run is shipped: `python -m training.why --part depth` writes it to "
          "`checkpoints/why/induction/`.")


@functools.cache
def _run(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("skipping %s: %s", path, e)
        return None


def induction_run(root: Path | None = None) -> dict | None:
    """The shipped induction.json under `root` (default `why.ROOT`), None when there is none."""
    return _run((Path(root or why.ROOT) / RUN_FILE).resolve())


def induction_share(weights: np.ndarray) -> float | None:
    """The mean weight a map puts where an induction head looks (`inspection.head_kinds.on_induction`),
    for a map over `<s>` + a sequence + the same sequence; None for a map of another shape."""
    t = weights.shape[-1]
    if t < 5 or t % 2 == 0:
        return None
    return float(on_induction(torch.as_tensor(np.asarray(weights, dtype=np.float64))).mean())


def repeated(tokens: list[str]) -> bool:
    """Whether `tokens` are a start token and one sequence shown twice."""
    n = (len(tokens) - 1) // 2
    return len(tokens) % 2 == 1 and n >= 2 and tokens[1:n + 1] == tokens[n + 1:]


def steepest_fall(curve: list[list[float]]) -> tuple[int, int, float]:
    """(from step, to step, the fall) of the largest fall of a curve between two of its points."""
    pairs = list(zip(curve, curve[1:], strict=False))
    (a, la), (b, lb) = max(pairs, key=lambda p: p[0][1] - p[1][1])
    return int(a), int(b), la - lb


def first_at_or_above(curve: list[list[float]], value: float) -> int | None:
    return next((int(step) for step, score in curve if score >= value), None)


def head_words(best: dict) -> str:
    return f"layer {best['layer'] + 1}, head {best['head'] + 1}"


@dataclass
class InductionView:
    run: dict
    head: str  # the 2-layer model's best head, in words ("layer 2, head 3"): the one the maps show
    maps: list[AttentionResult]  # the best head's attention at each moment
    shares: list[float | None]  # the weight each map puts where an induction head looks
    summary: str  # what the curves and maps show, in sentences computed from them
    code: list[CodeRange]  # `COMPOSITION`, read from the files; the ones that no longer match left out


def summary(run: dict, shares: list[float | None]) -> str:
    """The curves and the maps in words, every number from the run."""
    curves, best, threshold = run["curves"], run["best_head"], THRESHOLDS["induction"]
    two, one = curves["2layer"], curves["1layer"]
    named = first_at_or_above(two["induction"], threshold)
    when = (f"first reaches {threshold:.2f}, where this app names an induction head, at step {named:,}"
            if named is not None else f"never reaches {threshold:.2f}, where this app names an induction head")
    one_named = first_at_or_above(one["induction"], threshold)
    one_when = "never reaches it" if one_named is None else f"reaches it at step {one_named:,}"
    lines = [f"With 2 layers the best head ({head_words(best['2layer'])}) scores {two['induction'][0][1]:.2f} at "
             f"step {two['induction'][0][0]:,} and {run['final']['2layer']:.2f} at the end: it {when}. With 1 layer "
             f"the best head ({head_words(best['1layer'])}) ends at {run['final']['1layer']:.2f} and {one_when}."]
    a, b, fall = steepest_fall(two["repeat_loss"])
    lines.append(f"The loss on the repeated half falls from {two['repeat_loss'][0][1]:.2f} to "
                 f"{two['repeat_loss'][-1][1]:.2f} nats per token with 2 layers (the steepest fall, {fall:.2f}, "
                 f"between steps {a:,} and {b:,}), and from {one['repeat_loss'][0][1]:.2f} to "
                 f"{one['repeat_loss'][-1][1]:.2f} with 1 layer.")
    moments = [(m, s) for m, s in zip(run["moments"], shares, strict=True) if s is not None]
    if moments:
        said = [f"{s:.2f} at step {m['step']:,} ({m['label']} the drop)" for m, s in moments]
        said = said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}"
        lines.append("In the maps, the share of that head's attention on the token that followed the current "
                     "token's earlier occurrence (the stripe under the diagonal in the second half, where an "
                     f"induction head looks) is {said}.")
    return " ".join(lines)


def induction_view(root: Path | None = None) -> InductionView | None:
    """The shipped run as the panel shows it, None when there is none."""
    run = induction_run(root)
    if run is None:
        return None
    maps, shares = [], []
    for m in run["moments"]:
        weights = np.asarray(m["weights"], dtype=np.float64)
        maps.append(AttentionResult("lm_self", f"Step {m['step']:,}: {m['label']} the drop", 0, 1, 1,
                                    list(m["tokens"]), list(m["tokens"]), weights[None, None], True, []))
        shares.append(induction_share(weights) if repeated(m["tokens"]) else None)
    code = []
    for ref in COMPOSITION:
        try:
            code.append(source_lines(ref))
        except (LookupError, AttributeError, OSError, TypeError):  # model/ moved on: that listing is left out
            log.warning("the induction panel's %s no longer matches model/", ref.target)
    return InductionView(run, head_words(run["best_head"]["2layer"]), maps, shares, summary(run, shares), code)
