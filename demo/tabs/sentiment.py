"""The Sentiment tab: the classifier's label probabilities, and the review shaded by what it read."""


import gradio as gr

from demo.inference import DemoService
from demo.tabs.common import bind, failure, notice_markdown
from demo.text import SENTIMENT_EXAMPLES, SENTIMENT_INTRO


def classify(service: DemoService, text):
    """Label probabilities, the shaded review and notices."""
    try:
        result = service.classify(text)
    except Exception as e:
        return None, None, failure(e)
    return result.probabilities, result.highlights, notice_markdown(result.notices)


def build(service: DemoService, compute: dict) -> None:
    gr.Markdown(SENTIMENT_INTRO)
    review = gr.Textbox(label="Review", lines=5, max_lines=14, elem_id="review-input")
    classify_btn = gr.Button("Classify", variant="primary", elem_id="review-classify")
    with gr.Row():
        label = gr.Label(label="Sentiment", num_top_classes=5, elem_id="review-label", scale=1)
        looked = gr.HighlightedText(label="What the model looked at (darker = more attention)", show_legend=False,
                                    combine_adjacent=False, elem_id="review-attention", scale=2)
    notice = gr.Markdown(elem_id="review-notice")
    gr.Examples([[t] for t in SENTIMENT_EXAMPLES], inputs=review, label="Examples (2 positive, 2 negative)")

    outputs = [label, looked, notice]
    review.submit(bind(classify, service), review, outputs, api_name="classify_submit", api_visibility="private",
                  **compute)
    classify_btn.click(bind(classify, service), review, outputs, api_name="classify", **compute)
