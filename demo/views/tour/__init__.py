"""The "How it works" tour's computation: one forward pass of a shipped model, one step per screen,
each step with the live values the model computed, the same values recomputed by hand, the source
lines that computed them and a lesson text (no Gradio here; `demo.tabs.tour` shows it).

The parts, and why:
- `registry`: what a step is (`@step(id, code=...)` on the function that builds its pictures and
  checks) and what a track is (its pass, its steps in order).
- `capture`: values are *captured*, never reimplemented: the model's own pass read at its named
  points (`model/hooks.py`), for this request's thread only.
- `recompute`: every step's value *recomputed by hand*, in float64, from the previous step's
  captured values (LayerNorm, Q/K/V, softmax(QKᵀ/√d_k + mask), GELU, the tied projection, top-k/top-p)
  and compared with the captured value (`check`). A mismatch is shown in the step, and the tests
  fail on it: what the tour teaches is what the model computes.
- `code`: each step's *source*, a `CodeRef` (a function, class or method and a pattern of its lines)
  read from the file at run time, so a displayed line is always the line that ran. After a refactor
  of `model/`, re-point the step's `code=` where it is registered; `tests/test_tour.py` says which broke.
- `lessons/<id>.md`: each step's words (title, paragraphs, formula, worked example) as Markdown a
  teacher edits without touching Python, with `{{placeholders}}` the step's code fills (`lesson_text`).
- `attention` (the steps both tracks share), `lm` and `sentiment` (one module per track), `show`
  (pictures and numbers in words), and `api` (`tour`, `tour_of`, `tour_json`).
"""

from demo.views.tour import attention, learn, lm, sentiment  # noqa: F401  (registers the steps and tracks)
from demo.views.tour.api import make_step, steps, tour, tour_checkpoint, tour_json, tour_of, track_shape
from demo.views.tour.capture import MAX_TOUR_TOKENS, Pass
from demo.views.tour.code import CodeRange, CodeRef
from demo.views.tour.experiments import SAMPLING
from demo.views.tour.learn import LEARN
from demo.views.tour.lesson_text import LessonError
from demo.views.tour.lm import TOP_TOKENS, lm_pass
from demo.views.tour.recompute import Check, allowed, check, sinusoids, softmax
from demo.views.tour.registry import REGISTRY, TRACKS, Built, Panel, Step, StepSpec, Tour, code_range, step
from demo.views.tour.sentiment import PADDING, sentiment_pass

__all__ = ["LEARN", "MAX_TOUR_TOKENS", "PADDING", "REGISTRY", "SAMPLING", "TOP_TOKENS", "TRACKS", "Built", "Check",
           "CodeRange",
           "CodeRef", "LessonError", "Panel", "Pass", "Step", "StepSpec", "Tour", "allowed", "check",
           "code_range", "lm_pass", "make_step", "sentiment_pass", "sinusoids", "softmax", "step", "steps", "tour",
           "tour_checkpoint", "tour_json", "tour_of", "track_shape"]
