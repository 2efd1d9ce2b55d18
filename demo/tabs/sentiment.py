"""The Sentiment tab: the classifier's label probabilities, the review shaded by a chosen
explanation method, how much the methods agree, and a live deletion test of the explanation; under
a short review, a note of how often the behavioural check found the classifier wrong on such text."""

import json
import math
from pathlib import Path

import gradio as gr

from demo.inference import DemoService
from demo.tabs import ablation_panel, compare_panel, export_panel
from demo.tabs.common import DEFAULT_METHOD, bind, failure, lenient, notice_markdown
from demo.text import EXPLAIN_INTRO, SENTIMENT_EXAMPLES, SENTIMENT_INTRO
from inspection import METHODS

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
FAITHFULNESS_RESULTS = RESULTS / "faithfulness.json"
BEHAVIOUR_RESULTS = RESULTS / "behaviour.json"
SHORT_TEXT_WORDS = 20  # fewer words than this: the short text the behavioural check is made of
WORST = 3  # capabilities the before-trust note names
TRUST_LEAD = ("**Before you trust this label:** the classifier learned from whole reviews, and a few words are "
              "where it is weakest.")
SHADING = "Token shading by {} (red: for the label, blue: against; attention: darker = more)"
PENDING_SHADING = "Token shading by {}: computing…"
NO_SHADING = "Token shading: none (see the notice below)"


def benchmark_sentence(results: dict) -> str:
    """One sentence of the faithfulness benchmark (`python -m benchmarks.faithfulness`): which
    method's top tokens carry the prediction most, against attention and the random floor."""
    methods = results.get("methods") or {}
    comp = {m: v["comprehensiveness"] for m, v in methods.items() if isinstance(v, dict) and "comprehensiveness" in v}
    if not comp:
        return ""
    best = max(comp, key=comp.get)
    others = [f"`{m}` {comp[m]:.2f}" for m in ("attention", "random") if m in comp and m != best]
    versus = f" (against {' and '.join(others)})" if others else ""
    return (f"On {results.get('reviews', '?')} validation reviews, deleting the tokens that `{best}` ranks highest "
            f"lowers the label's probability the most: by {comp[best]:.2f} on average{versus}, "
            "ERASER comprehensiveness (`python -m benchmarks.faithfulness`).")


def read_benchmark_sentence(path: Path = FAITHFULNESS_RESULTS) -> str:
    """The sentence, or "" when the benchmark has not been run (e.g. a Space without benchmarks/)."""
    try:
        return benchmark_sentence(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, AttributeError):
        return ""


def how_often(rate: float) -> str:
    """A failure rate as a visitor reads it: "4 times in 10 (41%)"."""
    tenths = round(rate * 10)
    words = ("always" if rate == 1 else "almost always" if tenths == 10 else "rarely" if tenths == 0
             else f"{tenths} times in 10")
    return f"{words} ({rate:.0%})"


def trust_note(results: dict) -> str:
    """The note under a short review's label: the behavioural check's (`python -m benchmarks.behaviour`)
    worst capabilities of the shipped classifier, with how often it fails them; without the check's
    figures, only that short text is its weak spot. A visitor who types "not bad" should know the
    label is usually wrong there before reading anything into it."""
    capabilities = results.get("capabilities") or {}
    worst = sorted(capabilities.values(), key=lambda c: c["ours"]["failure_rate"], reverse=True)[:WORST]
    if not worst:
        return TRUST_LEAD
    failures = "; ".join(f"on {c['about']}, {c['fails']} {how_often(c['ours']['failure_rate'])}" for c in worst)
    return (f"{TRUST_LEAD} Measured by its behavioural check (`python -m benchmarks.behaviour`): {failures}. "
            "Don't trust its label on such text.")


def read_trust_note(path: Path = BEHAVIOUR_RESULTS) -> str:
    """The note, with no figures when the check has not been run (e.g. a Space without benchmarks/)."""
    try:
        return trust_note(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        return TRUST_LEAD


TRUST_NOTE = read_trust_note()  # read once, at start-up


def review_notices(text, notices: list[str]) -> str:
    """A classified review's notices, and the before-trust note where the review is short text."""
    return notice_markdown(notices + [TRUST_NOTE] * (len(str(text).split()) < SHORT_TEXT_WORDS))


def classify(service: DemoService, text):
    """Label probabilities, the review shaded by the label step's attention, and notices."""
    try:
        result = service.classify(text)
    except Exception as e:
        return None, None, failure(e)
    return result.probabilities, result.highlights, review_notices(text, result.notices)


def deletion_markdown(label: str, full: float, deletion: list[tuple[float, float]]) -> str:
    steps = " · ".join(f"top {frac:.0%} deleted: **{p:.2f}**" for frac, p in deletion)
    return (f"**Deletion test** (on your review): P({label}) is {full:.2f} for the whole review; {steps}. "
            "A faithful explanation's top tokens carry the prediction, so the probability should fall.")


def explain(service: DemoService, text, method):
    """Label probabilities, the review shaded by `method` (red: for the label, blue: against),
    the deletion test and notices."""
    try:
        result = service.explain(text, method)
    except Exception as e:  # the shading's label says so too: it no longer says which method is computing
        return None, gr.update(value=None, label=NO_SHADING), "", failure(e)
    deletion = f"`{result.method}` · " + deletion_markdown(result.label, result.probabilities[result.label],
                                                          result.deletion)
    shaded = gr.update(value=result.highlights, label=SHADING.format(result.method))
    return result.probabilities, shaded, deletion, review_notices(text, result.notices)


def pending(method):
    """While an explanation runs (seconds, for the gradient methods): an empty shading and deletion
    test that say which method is coming, rather than the previous review's or method's views."""
    name = method if method in METHODS else "the selected method"
    return gr.update(value=None, label=PENDING_SHADING.format(name)), f"⏳ Explaining the label by {name}…"


def pending_review(method):
    """A new review: its method views are pending, and the agreement matrix of the previous review
    is cleared (it is computed again on request)."""
    return *pending(method), None


def agreement_figure(methods: list[str], matrix: list[list[float]]):
    import plotly.graph_objects as go

    text = [["–" if math.isnan(v) else f"{v:.2f}" for v in row] for row in matrix]
    figure = go.Figure(go.Heatmap(z=matrix, x=methods, y=methods, zmin=-1, zmax=1, colorscale="RdBu",
                                  reversescale=True, text=text, texttemplate="%{text}",
                                  hovertemplate="%{y} vs %{x}: %{z:.2f}<extra></extra>"))
    figure.update_layout(title="Rank correlation of the methods' token scores (Spearman)", height=420,
                         margin={"l": 10, "r": 10, "t": 50, "b": 10})
    figure.update_yaxes(autorange="reversed")
    return figure


def compare(service: DemoService, text):
    """Every method on the review: their pairwise rank correlations."""
    try:
        return agreement_figure(*service.agreement(text)), ""
    except Exception as e:
        return None, failure(e)


def build(service: DemoService, compute: dict):
    """The tab; returns its handler with its inputs and outputs, for the page's load event."""
    gr.Markdown(SENTIMENT_INTRO)
    review = gr.Textbox(SENTIMENT_EXAMPLES[0], label="Review", lines=5, max_lines=14, elem_id="review-input")
    classify_btn = gr.Button("Classify", variant="primary", elem_id="review-classify")
    with gr.Row():
        label = gr.Label(label="Sentiment", num_top_classes=5, elem_id="review-label", scale=1)
        shaded = gr.HighlightedText(label=PENDING_SHADING.format(DEFAULT_METHOD), show_legend=False,  # the page's
                                    combine_adjacent=False, elem_id="review-attention", scale=2)  # load explains
    notice = gr.Markdown(elem_id="review-notice")
    gr.Examples([[t] for t in SENTIMENT_EXAMPLES], inputs=review, label="Examples (2 positive, 2 negative)")
    gr.Markdown(EXPLAIN_INTRO)
    with gr.Row():
        method = lenient(gr.Radio(list(METHODS), value=DEFAULT_METHOD, label="Explanation method",
                                  elem_id="review-method", scale=2))  # an unknown name gets our message
        gr.Markdown(read_benchmark_sentence(), elem_id="review-benchmark")
    with gr.Row():
        explain_btn = gr.Button("Explain", variant="primary", elem_id="review-explain")
        compare_btn = gr.Button("Compare all methods", elem_id="review-compare")
    deletion = gr.Markdown(elem_id="review-deletion")
    export_panel.html_button("Why this label? An explanation of the sentiment model", "sentiment",
                             [("label", label), ("highlights", shaded), ("markdown", deletion), ("markdown", notice)])
    agreement = gr.Plot(label="Agreement between methods", elem_id="review-agreement")
    export_panel.image_buttons(agreement)
    compare_panel.build(service, compute)
    ablation_panel.build(service, compute, review)

    # /classify's own shading, the label step's attention, is for API clients: the page shades by the
    # selected method, so that a new review's first shading is already that method's (issue 19)
    attention = gr.HighlightedText(label="Token shading by attention", visible=False)

    # A classification is one short model call: it skips Gradio's queue (its join and event-stream
    # round trips cost more than the call) and waits for compute in the shared budget instead.
    # A new review: first every view of the old one is marked pending or cleared, then /classify
    # answers at once, then the selected method's shading and deletion test arrive.
    new_review = {"fn": pending_review, "inputs": method, "outputs": [shaded, deletion, agreement], "queue": False,
                  "api_visibility": "private"}
    classified = {"fn": bind(classify, service), "inputs": review, "outputs": [label, attention, notice],
                  "queue": False}
    explain_outputs = [label, shaded, deletion, notice]
    explained = {"fn": bind(explain, service), "inputs": [review, method], "outputs": explain_outputs, **compute}
    pending_method = {"fn": pending, "inputs": method, "outputs": [shaded, deletion], "queue": False,
                      "api_visibility": "private"}
    review.submit(**new_review).then(**classified, api_name="classify_submit", api_visibility="private") \
        .then(**explained, api_name="explain_submitted", api_visibility="private")
    classify_btn.click(**new_review).then(**classified, api_name="classify") \
        .then(**explained, api_name="explain_classified", api_visibility="private")
    explain_btn.click(**pending_method).then(**explained, api_name="explain")
    method.change(**pending_method).then(**explained, api_name="explain_method", api_visibility="private")
    compare_btn.click(bind(compare, service), review, [agreement, notice], api_name="compare_methods",
                      api_visibility="private", **compute)
    return bind(explain, service), [review, method], explain_outputs  # the tab opens classified and explained
