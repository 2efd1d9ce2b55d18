"""The tour's entry points: `tour` (a served model, or its toy, on the visitor's text) and `tour_of`
(any checkpoint) assemble a track's steps from the registry and their lesson texts; `tour_json` is
what the `/tour` API returns."""

from demo.serving import LM, SENTIMENT, Checkpoint, DemoError, DemoService, read_number, visitor_text
from demo.text import TOY_NOTE
from demo.views.heads import head_line
from demo.views.tokens import EMPTY_TEXT
from demo.views.tour import lesson_text
from demo.views.tour.capture import Pass
from demo.views.tour.experiments import Experiments, experiment_ids, experiment_json
from demo.views.tour.learn import LEARN
from demo.views.tour.registry import REGISTRY, TRACKS, State, Step, Tour
from demo.views.toy import toy_checkpoint
from demo.views.why import trained_without  # issue 60: a step's training.why run
from tokenization import clean_texts


def make_step(id: str, state: State) -> Step:
    """Registered step `id` on `state`: its code's pictures and checks, its lesson text filled in."""
    spec = REGISTRY[id]
    built = spec.build(state)
    lesson = lesson_text.shipped(tuple(REGISTRY))[id]
    text = lesson_text.render(lesson, built.fills)
    return Step(id, text.title, text.explanation, text.formula, text.shape, built.panels, built.checks, text.worked,
                spec.link)


def steps(p: Pass, head: int) -> list[Step]:
    """The steps of `p`'s track, in order, for head `head` (0-based)."""
    track = TRACKS[p.model]
    state = track.state(p, head)
    return [make_step(id, state) for id in track.steps]


def _index(value: object, n: int, what: str, notices: list[str]) -> int:
    i = int(round(read_number(value, 0)))
    if not 0 <= i < n:
        notices.append(f"There is no {what} {i + 1} (1 to {n}): showing the nearest.")
    return min(max(i, 0), n - 1)


def track_shape(ckpt: Checkpoint) -> tuple[int, int]:
    """(layers, heads) the visitor picks from: the LM's blocks, the classifier's encoder layers."""
    model, _ = ckpt.require()
    return getattr(model.config, TRACKS[ckpt.name].layers), model.config.n_head


def tour_checkpoint(service: DemoService, model_name: object, toy: bool = False) -> Checkpoint:
    """The model the tour follows: a served one, or its toy (`demo.views.toy`); the learning chapter
    (`LEARN`) follows the language model."""
    ckpt = service.checkpoint(LM if model_name == LEARN else model_name)
    return toy_checkpoint(ckpt.name) if toy else ckpt


def tour(service: DemoService, text: object, model_name: object = LM, layer: object = 0, head: object = 0,
         toy: object = False) -> Tour:
    """The tour of the served model `model_name`, or of its toy, on `text` (see `tour_of`)."""
    toy = toy is True or str(toy).lower() == "true"  # an API caller's "false" is not a toy
    ckpt = tour_checkpoint(service, model_name, toy)
    backward = service.sentiment_backward if ckpt.name == SENTIMENT and not toy and len(service.readers) > 1 else None
    with service.compute():
        t = tour_of(ckpt, text, layer, head, toy, backward, LEARN if model_name == LEARN else None)
    t.experiments.slot = service.compute  # each experiment, when it runs, takes its own turn on the machine
    if t.model == LM and not toy:  # what the chosen head is, from the served LM's head table
        t.head_about = f"{head_line(service, t.layer, t.head)}."
    return t


def tour_of(ckpt: Checkpoint, text: object, layer: object = 0, head: object = 0, toy: bool = False,
            backward: Checkpoint | None = None, track: str | None = None) -> Tour:
    """One forward pass of `ckpt`'s model over `text`, as steps (`layer`, `head`: 0-based, clamped), each
    step with its experiment where it has one, run when first asked for (`Tour.experiment`; `backward`:
    the reader the reading-order one compares); `track`: another track of the same model than its own
    (`LEARN`)."""
    n_layers, n_heads = track_shape(ckpt)
    text, notices = visitor_text(text)
    (text,) = clean_texts([text])  # as the models read it (both tracks and the result show it)
    if not text:
        raise DemoError(EMPTY_TEXT)
    track = TRACKS[track or ckpt.name]
    layer_i, head_i = _index(layer, n_layers, "layer", notices), _index(head, n_heads, "head", notices)
    p, more = track.run(ckpt, text, layer_i)
    shown = steps(p, head_i)
    ids = [s.key for s in shown]
    overview = [(label.format(n=n_layers), ids.index(id)) for label, id in track.overview]
    if toy:
        more.append(TOY_NOTE)
    read = experiment_ids(p)  # what the steps read: the whole text, up to the context
    return Tour(track.name, toy, text, layer_i, head_i, n_layers, n_heads, shown, overview, notices + more,
                **track.outcome(p), experiments=Experiments(ckpt, read, layer_i, head_i, backward, track=track.name))


def tour_json(t: Tour) -> dict:
    """What the `/tour` API returns: the steps with their code ranges, checks and experiments (every one
    run here, if the tab has not run it yet), an LM step's `trained_without` (its part's why.json,
    `demo.views.why`), and the outcome.

    A code range names its file under "file", not "path": `gradio_client` takes any dict with a
    "path" string in an output for a file to download, and fails on it."""
    steps = []
    for s in t.steps:
        code = s.code()
        steps.append({"title": s.title, "explanation": s.explanation, "formula": s.formula, "shape": s.shape,
                      "code": code and {"file": code.path, "first_line": code.first_line, "last_line": code.last_line},
                      "checks": [{"what": c.what, "error": c.error, "ok": c.ok} for c in s.checks],
                      **({"experiment": experiment_json(o)} if (o := t.experiment(s.key)) else {}),
                      **({"trained_without": run} if t.model == LM and (run := trained_without(s.key)) else {})})
    out = {"model": t.model, "toy": t.toy, "layer": t.layer, "head": t.head, "steps": steps, "notices": t.notices,
           **({"head_about": t.head_about} if t.head_about else {})}
    if t.model == LM:
        out["top_tokens"] = [[token, p] for token, p in t.top_tokens]
    elif t.model == LEARN:
        out |= {"target": t.target, "probability_before": t.probability_before,
                "probability_after": t.probability_after}
    else:
        out["label_probabilities"] = t.label_probabilities
    return out
