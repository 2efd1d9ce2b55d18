"""The page's words, apart from its wiring: titles, tab introductions, examples and legends.

Messages that belong to one computation (an empty review, a clamped setting) stay next to it;
this module holds what a visitor reads on the page before doing anything.
"""

from pathlib import Path

from demo.serving import LM, SENTIMENT, SENTIMENT_BACKWARD
from inspection import DESCRIPTIONS, METHODS

TITLE = "Tiny Transformers demo"
HEADER = ("# Tiny Transformers, built from scratch\n"
          "Two small Transformers written from scratch in PyTorch, trained on IMDb movie reviews: a **language "
          "model** that continues a review you start (**Chat**), and a **sentiment model** that says whether a "
          "review is positive or negative (**Sentiment**). **How it works** follows your text through one of "
          "them step by step; the other tabs look inside them; sizes and scores are under **About**.\n")

# Each word a learner needs, defined once; a tab's text says it where the word first appears there.
DEFINITIONS = {
    "token": "a word or a piece of one: the unit a model reads and writes",
    "probability": "how likely, from 0 to 1; the probabilities of every possible next token add up to 1",
    "logit": "the raw score a model gives each possible next token; the softmax turns the scores into "
             "probabilities",
    "layer": "one block of the stack: each reads every token's vector and adds what its attention and its "
             "feed-forward part computed",
    "head": "one of the parallel attention units of a layer: each weighs, on its own, which tokens every token "
            "looks at",
    "mask": "what a token is not allowed to look at: in a causal mask, the tokens after it",
    "attribution": "a score for each token: how much it pushed the model towards its answer",
}


def code_span(text: str) -> str:
    """A token in Markdown as the characters it is: "<s>" would otherwise be read as HTML (and strike
    the rest of the text through), "*" as emphasis."""
    return f"`{text.replace('`', 'ˋ')}`"


def term(word: str) -> str:
    """A word in bold with its definition, for the place where a learner first meets it."""
    return f"**{word}** ({DEFINITIONS[word]})"


# The attribution methods as people name them (`inspection.METHODS` are identifiers, for the API)
METHOD_NAMES = {"attention": "attention", "rollout": "attention rollout", "grad_x_input": "gradient × input",
                "integrated_gradients": "integrated gradients", "occlusion": "occlusion",
                "random": "random (baseline)"}
METHOD_CHOICES = [(METHOD_NAMES[m], m) for m in METHODS]  # radios: the name shown, the identifier sent


def method_name(method: str) -> str:
    return METHOD_NAMES.get(method, method)


CHAT_INTRO = (f"Start a movie review: the language model continues it one {term('token')} at a time, each drawn "
              f"by its {term('probability')}. Each message starts a new review.")
CHAT_EXAMPLES = [
    "This movie was",
    "I went into this film expecting very little, but",
    "The acting was wooden and the plot",
    "If you love old westerns, you will",
    "My kids dragged me to see this and honestly",
]



def own_text(metrics: dict) -> str | None:
    """The file name of the text a language model was trained on with `training.run --data`, else None
    (a model of IMDB reviews, the app's own)."""
    data = metrics.get("data")
    if isinstance(data, dict) and data.get("kind") == "data" and data.get("source"):
        return Path(str(data["source"])).name
    return None


def lm_openings(metrics: dict) -> list[str]:
    """Openings to start the served language model from (the chat's examples, the tour's and Watch it
    learn's first text): for a model of its own text, the first words of its first held-out documents,
    which the run recorded in metrics.json (`sample_prompts`): its own kind of text, never trained on.
    Else the movie-review openings an IMDB model was trained for."""
    recorded = [p for p in metrics.get("sample_prompts") or [] if isinstance(p, str) and p.strip()]
    return recorded if own_text(metrics) and recorded else CHAT_EXAMPLES


def own_header(name: str, metrics: dict) -> str:
    """The page header when the language model served is one of its own text (`--lm RUN`, trained with
    `training.run --data`): that text and its figure first, then the sentiment model, labelled as the
    separate IMDb classifier it is."""
    bpb = metrics.get("val_bpb")
    figure = (f", which it predicts at {bpb:.2f} bits per byte on the part of it held out of training"
              if isinstance(bpb, int | float) and not isinstance(bpb, bool) else "")
    return ("# Tiny Transformers, built from scratch\n"
            f"A small **language model** written from scratch in PyTorch and trained on your own text, `{name}`"
            f"{figure}: it continues a text you start (**Chat**). **How it works** follows your text through it "
            "step by step; the other tabs look inside it; its size and scores are under **About**.\n\n"
            "*Apart from it:* the **Sentiment** tab (and the sentiment model of the Attention and How it works tabs) "
            "is a separate model, not trained on your text: a classifier of IMDb movie reviews, positive or "
            "negative.\n")


def header(lm_metrics: dict) -> str:
    """The page's header: the shipped models' (IMDb reviews), or a language model of its own text's."""
    name = own_text(lm_metrics)
    return own_header(name, lm_metrics) if name else HEADER


def held_out_words(metrics: dict) -> str:
    """What a language model's held-out figures were measured on: reviews, or its own text's held-out part."""
    name = own_text(metrics)
    return f"held-out text of `{name}`" if name else "held-out reviews"


def end_notice(lm_metrics: dict) -> str:
    """The chat's notice when the model writes its end token: it ended a review, or a text of its own kind."""
    return f"The model ended the {'text' if own_text(lm_metrics) else 'review'} (it produced the end-of-text token)."


def attention_example(lm_metrics: dict) -> str:
    """The Attention tab's first text: the opening of a movie review, or the served language model's own
    first held-out opening (`lm_openings`)."""
    return lm_openings(lm_metrics)[0] if own_text(lm_metrics) else ATTENTION_EXAMPLE


def chat_intro(metrics: dict) -> str:
    """The chat tab's first line: a movie review, or the kind of text the model was trained on."""
    name = own_text(metrics)
    if name is None:
        return CHAT_INTRO
    return (f"Start a text like `{name}`, the text this language model was trained on: it continues it one "
            f"{term('token')} at a time, each drawn by its {term('probability')}. Each message starts a new text.")


SENTIMENT_INTRO = ("Paste a review: the sentiment model's encoder reads it, and its decoder writes a label, "
                   "“positive” or “negative”, with a probability for each; a second model that reads the review "
                   "backwards gives its own, and the label shown combines the two (the mean of their "
                   "log-probabilities, sharpened or softened by a temperature fitted for the pair, so it can be "
                   "more sure than either). The review is then shaded by an "
                   f"{term('attribution')} method chosen below, and a deletion test checks that method on your "
                   "review.")
SENTIMENT_EXAMPLES = [
    "A wonderful film. The acting is superb, the story is moving and the ending left me in tears. "
    "One of the best movies I have seen in years, highly recommended!",
    "I loved every minute of it: funny, clever and beautifully shot. I will watch it again.",
    "What a waste of time. The plot makes no sense, the dialogue is awful and the acting is even worse. "
    "Avoid this one.",
    "Boring and far too long. I fell asleep halfway through and did not miss anything.",
]

ATTENTION_INTRO = ("Attention is how a token gathers information from other tokens. Each "
                   f"{term('layer')} holds several heads; a {term('head')} gives every token (a row) a weight "
                   "for each token it may look at (the columns), and the weights of a row add up to 1. "
                   "*Mean over heads* averages the heads of a layer into one map. Any text, either model; "
                   "every map uses the same colours, from weight 0 to 1.")
ATTENTION_EXAMPLE = "The movie was not bad at all, I really enjoyed it."
CAUSAL_NOTE = f"The blank upper triangle is the causal {term('mask')}."

TOUR_INTRO = ("**How it works.** Follow your text through one **forward pass** of the model (one run of its "
              "computation from your text to its output, the way it answers; nothing is learned on the way), one "
              "step per screen: what each step does, its formula, the numbers the model computed (hover or tap a "
              "cell, or open the table under the pictures), the same numbers recomputed by hand, and the lines of "
              "the model's source that computed them. Click a box of the overview or a step in the list, or use "
              "Back and Next.")
# a real passage (the opening of a review of IMDB's train split, 21 words, 26 tokens: the pictures show all of it).
# On the shipped models at layer 1, head 1 every experiment that switches a part off makes the loss worse (the
# backward reader, a comparison, is more sure), but for the padding mask's: in this causal encoder it moved the
# label on 2% of 200 training reviews, and its verdict says what the mask guarantees instead. (Issue 61.)
TOUR_EXAMPLE = "Saw this on TV. I'm glad I didn't go to the cinema to see this or spend the money on rental."
TOY_NOTE = ("Toy model: the same architecture at d_model 8 with 2 heads, random weights of one decimal each and a "
            "vocabulary of 20 tokens, so that every number fits on screen. Its predictions are noise; its arithmetic "
            "is the real one.")

TOKENIZER_INTRO = ("How the byte-level BPE tokenizer cuts text into pieces (colours alternate; the small number "
                   "is the token id; ↵ is a newline, ⟨f0 9f⟩ a piece of a multi-byte character).")
TOKENIZER_EXAMPLE = "Tokenization isn't magic: it's BPE! 🎬 naïve café, 映画"

MODEL_TITLES = {LM: "Language model (decoder-only, GPT-style)",
                SENTIMENT: "Sentiment model (encoder-decoder, text-to-text)",
                SENTIMENT_BACKWARD: "Sentiment model, backward reader"}
SHORT_TITLES = {LM: "Language model", SENTIMENT: "Sentiment model",  # in the header's warnings
                SENTIMENT_BACKWARD: "Backward sentiment reader"}
USES = {LM: "Continues a movie review you start, one token at a time (the **Chat** tab).",
        SENTIMENT: "Reads a review and writes whether it is positive or negative (the **Sentiment** tab).",
        SENTIMENT_BACKWARD: "The same kind of model, started from a language model trained on reviews written "
                            "backwards: it reads each review from its last word to its first. The Sentiment tab's "
                            "verdict combines its probabilities with the sentiment model's: the mean of the two "
                            "readers' log-probabilities, divided by a temperature fitted for the pair on held-out "
                            "reviews, which can put the verdict outside the two (more sure than either when they "
                            "agree). Two readers that see a review in opposite orders make different mistakes "
                            "(ULMFiT's forward + backward ensemble)."}
DATA_LINES = {LM: "IMDb movie reviews (Maas et al., 2011): next-token prediction on the review text.",
              SENTIMENT: "IMDb movie reviews (Maas et al., 2011) with their labels: the encoder reads a review, "
                         "the decoder writes the label word.",
              SENTIMENT_BACKWARD: "The same reviews and labels, each review read last token first."}
DEVELOPERS = ("Running on **{device}**; the batched passes (classification, explanations, attention) in "
              "**{precision}** (`python -m demo --precision`, `$DEMO_PRECISION`).\n\n"
              "- **Retrain:** see the README's *Train your own* section, or `python -m training.run --help` "
              "(`--preset laptop`: ten minutes on a laptop's CPU).\n"
              "- **Serve what you trained:** `python -m demo --lm runs/… --sentiment runs/…` (a run folder, a "
              "checkpoint folder or a Hub id), or a folder holding both with `python -m demo --checkpoints DIR`.\n"
              "- **The figures the app shows** come from `python -m benchmarks.faithfulness` (the methods' "
              "deletion scores, Sentiment tab) and `python -m benchmarks.calibration` (the reliability diagram "
              "above); each writes `benchmarks/results/NAME.json`.\n"
              "- **The API:** every tab is an endpoint (*Use via API* at the foot of the page).")

PROBABILITY_BANDS = [  # (lower bound, category, colour): a legend a visitor can read at a glance
    (0.5, "likely (≥ 50%)", "#86efac"),
    (0.1, "plausible (10–50%)", "#fde68a"),
    (0.01, "unlikely (1–10%)", "#fdba74"),
    (0.0, "surprising (< 1%)", "#fca5a5"),
]
# the probabilities are the model's own (`TokenStep.prob`), before the temperature and the top-k/top-p filters
TABLE_HEADERS = ["step", "token", "probability", "top alternatives"]
TABLE_LABEL = ("Each step: the token written, the model's probability of it, and the likeliest tokens "
               "(before the temperature and top-k / top-p)")

EXPLAIN_INTRO = ("### Why this label? Explanations, and whether to trust them\n"
                 "Each method scores every review token for the label the model writes: "
                 + "; ".join(f"**{METHOD_NAMES[name]}** ({line})" for name, line in DESCRIPTIONS.items())
                 + ". Attention alone is not an explanation: the deletion test below checks the chosen method on "
                 "your own review. The gradient methods and occlusion run the model many times: allow a few "
                 "seconds on a long review.")

LENS_INTRO = ("### Look inside: the logit lens\n"
              f"What would the model have written had it stopped after a {term('layer')}? The lens sends every "
              "layer's vectors through the model's last step (the final LayerNorm, then the output matrix that "
              f"gives each possible token a {term('logit')}). One row per token written, one column per layer: "
              "the **last column is the model's own prediction**. Each cell names that layer's best guess; its "
              "colour is the probability the layer gives the token finally written, so the colour grows where "
              "the prediction forms. The first columns mostly echo the token just read: with no context mixed "
              "in yet, a token's own vector read back through the output matrix (the input embedding, reused) "
              "points at that token again.")
