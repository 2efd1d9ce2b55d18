"""The Sentiment tab: the classifier's label probabilities, the review shaded by a chosen
explanation method, how much the methods agree, and a live deletion test of the explanation; each
view with a sentence, computed from its numbers, that says what it means; under a short review, a
note of how often the behavioural check found the classifier wrong on such text."""

import json
import math
from pathlib import Path

import gradio as gr

from demo import plots
from demo.serving import DemoService, failure
from demo.tabs import ablation_panel, compare_panel, export_panel
from demo.tabs.common import DEFAULT_METHOD, bind, lenient, notice_markdown
from demo.text import EXPLAIN_INTRO, METHOD_CHOICES, SENTIMENT_EXAMPLES, SENTIMENT_INTRO, method_name
from demo.views import sentiment
from inspection import METHODS

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
FAITHFULNESS_RESULTS = RESULTS / "faithfulness.json"
BEHAVIOUR_RESULTS = RESULTS / "behaviour.json"
SHORT_TEXT_WORDS = 20  # fewer words than this: the short text the behavioural check is made of
WORST = 3  # capabilities the before-trust note names
TRUST_LEAD = ("**Before you trust this label:** the classifier learned from whole reviews, and a few words are "
              "where it is weakest.")
PENDING_SHADING = "Token shading by {}: computing…"
NO_SHADING = "Token shading: none (see the notice below)"
AGREE = 0.5  # a rank correlation from which two methods read as agreeing
MIN_DROP = 0.01  # the deletion test: a smaller fall of P(label) does not even show at two decimals
CLEARLY = 2  # ...and a method's fall must be this many times the random tokens' to tell it from chance


def benchmark_sentence(results: dict) -> str:
    """One sentence of the faithfulness benchmark (`python -m benchmarks.faithfulness`, named under
    About): which method's top tokens carry the prediction most, against attention and the random floor."""
    methods = results.get("methods") or {}
    comp = {m: v["comprehensiveness"] for m, v in methods.items() if isinstance(v, dict) and "comprehensiveness" in v}
    if not comp:
        return ""
    best = max(comp, key=comp.get)
    others = [f"{comp[m]:.2f} for {'random tokens' if m == 'random' else method_name(m)}"
              for m in ("attention", "random") if m in comp and m != best]
    versus = f", against {' and '.join(others)}" if others else ""
    return (f"Measured on {results.get('reviews', '?')} held-out reviews: deleting the tokens **{method_name(best)}** "
            f"ranks highest lowers the label's probability the most, by {comp[best]:.2f} on average{versus}.")


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
        result = sentiment.classify(service, text)
    except Exception as e:
        return None, None, failure(e)
    return result.probabilities, result.highlights, review_notices(text, result.notices)


def deletion_verdict(label: str, full: float, deletion: list[tuple[float, int, float, float]], tokens: int) -> str:
    """Passed, failed or cannot tell, from the test's own numbers. A faithful method's top tokens carry
    the prediction, so deleting them must lower P(label), and clearly more than deleting as many random
    tokens does (the floor, measured on the same review); the largest fraction decides. When every
    fraction deletes the same tokens (a short review), or the fall is too small to tell from chance,
    there is nothing to judge by."""
    fraction, count, left, chance = deletion[-1]
    if len({c for _, c, _, _ in deletion}) == 1:
        fractions = ", ".join(f"{f:.0%}" for f, *_ in deletion[:-1]) + f" and {fraction:.0%}"
        return (f"**Cannot tell:** on a review this short ({tokens} tokens), {fractions} all delete the same "
                f"{count} token{'s' * (count != 1)}, so the test has one point, not a trend. Try a longer review.")
    moved = f"its top {fraction:.0%} ({count} of {tokens} tokens) took P({label}) {full:.3f} → {left:.3f}"
    floor = f"deleting {count} random tokens instead: → {chance:.3f}"
    drop, chance_drop = full - left, max(full - chance, 0.0)
    if drop <= -0.0005:
        return (f"**Failed: the probability rose.** Deleting {moved} ({floor}): the tokens this method ranks "
                "highest are not what the prediction rests on.")
    if drop <= chance_drop:
        return (f"**Failed:** deleting {moved}, no lower than {floor}: the shading does not show what the "
                "prediction rests on.")
    if drop < max(MIN_DROP, CLEARLY * chance_drop):
        return (f"**Cannot tell:** deleting {moved}, hardly lower than {floor}: too close to chance to judge the "
                "method by. A shorter review, where each word weighs more, tests it better.")
    return (f"**Passed:** deleting {moved}, lower than {floor}: the tokens this method ranks highest do carry "
            "the prediction.")


def deletion_markdown(method: str, label: str, full: float, deletion: list[tuple[float, int, float, float]],
                      tokens: int) -> str:
    """The deletion test's numbers, then its verdict."""
    steps = " · ".join(f"top {frac:.0%} ({count}) deleted: **{p:.3f}**" for frac, count, p, _ in deletion)
    return (f"**Deletion test** of {method_name(method)} on your review: P({label}) is {full:.3f} for the whole "
            f"review; {steps}.\n\n{deletion_verdict(label, full, deletion, tokens)}")


def shading_heading(method: object, label: str | None = None, pending: bool = False) -> str:
    name = method_name(method) if method in METHODS else "the selected method"
    return PENDING_SHADING.format(name) if pending else f"Token shading by {name}, for “{label}”"


def explain(service: DemoService, text, method):
    """Label probabilities, the review shaded by `method`, the deletion test and notices; and, for
    the export, the shading's data (a `gr.State`: the API does not return it)."""
    try:
        result = sentiment.explain(service, text, method)
    except Exception as e:  # the shading says so too: it no longer says which method is computing
        return None, plots.shading_html([], NO_SHADING, ""), "", failure(e), None
    shading = (result.highlights, shading_heading(result.method, result.label), f"“{result.label}”")
    deletion = deletion_markdown(result.method, result.label, result.probabilities[result.label], result.deletion,
                                 result.tokens)
    return result.verdict, plots.shading_html(*shading), deletion, review_notices(text, result.notices), shading


def pending(method):
    """While an explanation runs (seconds, for the gradient methods): an empty shading and deletion
    test that say which method is coming, rather than the previous review's or method's views."""
    heading = shading_heading(method, pending=True)
    return plots.shading_html([], heading, ""), f"⏳ {heading.replace('Token shading by', 'Explaining the label by')}"


def pending_review(method):
    """A new review: its method views are pending, and the agreement matrix of the previous review
    is cleared (it is computed again on request)."""
    return *pending(method), None, ""


def agreement_takeaway(methods: list[str], matrix: list[list[float]]) -> str:
    """One line from the matrix: the two methods that agree most and the two that disagree most,
    the random baseline left out (it should agree with none); when even the closest pair is below
    `AGREE`, the shadings point at different tokens and none should be read alone."""
    pairs = [(matrix[i][j], a, b) for i, a in enumerate(methods) for j, b in enumerate(methods)
             if i < j and "random" not in (a, b) and not math.isnan(matrix[i][j])]
    if not pairs:
        return "The methods gave every token the same score: nothing to compare."
    best, worst = max(pairs), min(pairs)
    names = [(method_name(a), method_name(b)) for _, a, b in (best, worst)]
    if best[0] < AGREE:
        return (f"**No two methods agree well** on this review: the closest, {names[0][0]} and {names[0][1]}, reach "
                f"only {best[0]:.2f}. Their shadings point at different tokens, so read none of them alone: the "
                "deletion test says which to trust.")
    least = "disagree most" if worst[0] < 0 else "agree least"
    return (f"**{names[0][0]} and {names[0][1]} agree most** ({best[0]:.2f}): they rank the tokens alike. "
            f"**{names[1][0]} and {names[1][1]} {least}** ({worst[0]:.2f}).")


def agreement_figure(methods: list[str], matrix: list[list[float]]):
    """The rank correlation of every pair of methods, blue where they agree, orange where they disagree."""
    import plotly.graph_objects as go

    names = [method_name(m) for m in methods]
    text = [["–" if math.isnan(v) else f"{v:.2f}" for v in row] for row in matrix]
    figure = go.Figure(go.Heatmap(z=matrix, x=names, y=names, zmin=-1, zmax=1, colorscale=plots.diverging_scale(),
                                  text=text, texttemplate="%{text}", colorbar={"thickness": 10},
                                  hovertemplate="%{y} vs %{x}: %{z:.2f}<extra></extra>"))
    plots.titled(figure, "How much the methods agree: rank correlation<br>of their token scores (1 = same order)")
    figure.update_layout(height=460, margin={"l": 10, "r": 10, "b": 10})
    figure.update_xaxes(tickangle=-40)
    figure.update_yaxes(autorange="reversed")
    return figure


def compare(service: DemoService, text):
    """Every method on the review: their pairwise rank correlations, and the takeaway. The notices
    stay as the classification left them (a truncation, the before-trust note) unless this fails."""
    try:
        methods, matrix = sentiment.agreement(service, text)
    except Exception as e:
        return None, "", failure(e)
    return agreement_figure(methods, matrix), agreement_takeaway(methods, matrix), gr.skip()


def build(service: DemoService, compute: dict):
    """The tab; returns its handler with its inputs and outputs, for the page's load event."""
    gr.Markdown(SENTIMENT_INTRO)
    review = gr.Textbox(SENTIMENT_EXAMPLES[0], label="Review", lines=5, max_lines=14, elem_id="review-input")
    classify_btn = gr.Button("Classify", variant="primary", elem_id="review-classify")
    with gr.Row():
        label = gr.Label(label="Sentiment", num_top_classes=5, elem_id="review-label", scale=1)
        with gr.Column(scale=2):  # the page's load explains: it opens pending
            shaded = gr.HTML(plots.shading_html([], shading_heading(DEFAULT_METHOD, pending=True), ""),
                             elem_id="review-attention")
    notice = gr.Markdown(elem_id="review-notice")
    gr.Examples([[t] for t in SENTIMENT_EXAMPLES], inputs=review, label="Examples (2 positive, 2 negative)")
    gr.Markdown(EXPLAIN_INTRO)
    with gr.Row():
        method = lenient(gr.Radio(METHOD_CHOICES, value=DEFAULT_METHOD, label="Explanation method",
                                  elem_id="review-method", scale=2))  # an unknown name gets our message
        gr.Markdown(read_benchmark_sentence(), elem_id="review-benchmark")
    with gr.Row():
        explain_btn = gr.Button("Explain", variant="primary", elem_id="review-explain")
        compare_btn = gr.Button("Compare all methods", elem_id="review-compare")
    deletion = gr.Markdown(elem_id="review-deletion")
    shading = gr.State(None)  # the shading's data, for the export to draw again (never HTML sent back by a browser)
    export_panel.html_button("Why this label? An explanation of the sentiment model", "sentiment",
                             [("label", label), ("shading", shading), ("markdown", deletion), ("markdown", notice)])
    agreement = gr.Plot(show_label=False, elem_id="review-agreement")  # its title says what it is
    takeaway = gr.Markdown(elem_id="review-agreement-takeaway")
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
    new_review = {"fn": pending_review, "inputs": method, "outputs": [shaded, deletion, agreement, takeaway],
                  "queue": False, "api_visibility": "private"}
    classified = {"fn": bind(classify, service), "inputs": review, "outputs": [label, attention, notice],
                  "queue": False}
    explain_outputs = [label, shaded, deletion, notice, shading]
    explained = {"fn": bind(explain, service), "inputs": [review, method], "outputs": explain_outputs, **compute}
    pending_method = {"fn": pending, "inputs": method, "outputs": [shaded, deletion], "queue": False,
                      "api_visibility": "private"}
    review.submit(**new_review).then(**classified, api_name="classify_submit", api_visibility="private") \
        .then(**explained, api_name="explain_submitted", api_visibility="private")
    classify_btn.click(**new_review).then(**classified, api_name="classify") \
        .then(**explained, api_name="explain_classified", api_visibility="private")
    explain_btn.click(**pending_method).then(**explained, api_name="explain")
    method.change(**pending_method).then(**explained, api_name="explain_method", api_visibility="private")
    compare_btn.click(bind(compare, service), review, [agreement, takeaway, notice], api_name="compare_methods",
                      api_visibility="private", **compute)
    return bind(explain, service), [review, method], explain_outputs  # the tab opens classified and explained
