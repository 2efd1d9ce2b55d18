"""The page's words, apart from its wiring: titles, tab introductions, examples and legends.

Messages that belong to one computation (an empty review, a clamped setting) stay next to it;
this module holds what a visitor reads on the page before doing anything.
"""

from demo.checkpoint import LM, SENTIMENT
from inspection import DESCRIPTIONS

TITLE = "Tiny Transformers demo"
HEADER = ("# Tiny Transformers, built from scratch\n"
          "A small GPT-style language model and an encoder-decoder sentiment model, "
          "both written from scratch in PyTorch and trained on IMDb movie reviews.\n")
INTERNAL_ERROR = "Sorry, something went wrong on our side (it has been logged). Please try other input."

CHAT_INTRO = ("Write the opening of a movie review: the language model continues it, token by token. "
              "Each message starts a new review.")
CHAT_EXAMPLES = [
    "This movie was",
    "I went into this film expecting very little, but",
    "The acting was wooden and the plot",
    "If you love old westerns, you will",
    "My kids dragged me to see this and honestly",
]

SENTIMENT_INTRO = ("Paste a review: the sentiment model writes a label, and the review is shaded by the "
                   "explanation method chosen below (red: the token speaks for the label, blue: against), "
                   "and a deletion test checks that method on your review.")
SENTIMENT_EXAMPLES = [
    "A wonderful film. The acting is superb, the story is moving and the ending left me in tears. "
    "One of the best movies I have seen in years, highly recommended!",
    "I loved every minute of it: funny, clever and beautifully shot. I will watch it again.",
    "What a waste of time. The plot makes no sense, the dialogue is awful and the acting is even worse. "
    "Avoid this one.",
    "Boring and far too long. I fell asleep halfway through and did not miss anything.",
]

ATTENTION_INTRO = ("Any text, either model: rows are the tokens attending, columns the tokens attended to. "
                   "For the sentiment decoder the rows are the start token and the predicted label.")
ATTENTION_EXAMPLE = "The movie was not bad at all, I really enjoyed it."
CAUSAL_NOTE = "The blank upper triangle is the causal mask: a token cannot look at later tokens."

TOUR_INTRO = ("**How it works.** Follow your text through one forward pass of the model, one step per screen: "
              "what each step does, its formula, the numbers the model computed (hover a cell), the same numbers "
              "recomputed by hand, and the lines of the model's source that computed them. Click a box of the "
              "overview or a step in the list, or use Back and Next.")
TOUR_EXAMPLE = "This movie was"
TOY_NOTE = ("Toy model: the same architecture at d_model 8 with 2 heads, random weights of one decimal each and a "
            "vocabulary of 20 tokens, so that every number fits on screen. Its predictions are noise; its arithmetic "
            "is the real one.")

TOKENIZER_INTRO = ("How the byte-level BPE tokenizer cuts text into pieces (colours alternate; the small number "
                   "is the token id; ↵ is a newline, ⟨f0 9f⟩ a piece of a multi-byte character).")
TOKENIZER_EXAMPLE = "Tokenization isn't magic: it's BPE! 🎬 naïve café, 映画"

MODEL_TITLES = {LM: "Language model (decoder-only, GPT-style)",
                SENTIMENT: "Sentiment model (encoder-decoder, text-to-text)"}
SHORT_TITLES = {LM: ("LM", "Language model"), SENTIMENT: ("Sentiment", "Sentiment model")}  # (header, warning)
DATA_LINES = {LM: "IMDb movie reviews (Maas et al., 2011): next-token prediction on the review text.",
              SENTIMENT: "IMDb movie reviews (Maas et al., 2011) with their labels: the encoder reads a review, "
                         "the decoder writes the label word."}
RETRAINING = ("## Device and retraining\n\n"
              "Running on **{device}**.\n\n"
              "To retrain the models, see the **Retraining** section of the repository's README, or run "
              "`python -m training.run --help`. A new checkpoint directory is picked up at the next start "
              "(`python -m demo --checkpoints DIR`).")

PROBABILITY_BANDS = [  # (lower bound, category, colour): a legend a visitor can read at a glance
    (0.5, "likely (≥ 50%)", "#86efac"),
    (0.1, "plausible (10–50%)", "#fde68a"),
    (0.01, "unlikely (1–10%)", "#fdba74"),
    (0.0, "surprising (< 1%)", "#fca5a5"),
]
# the probabilities are the model's own (`TokenStep.prob`), before the temperature and the top-k/top-p filters
TABLE_HEADERS = ["step", "token", "model probability (T = 1, unfiltered)", "top alternatives (same)"]

EXPLAIN_INTRO = ("### Why this label? Explanations, and whether to trust them\n"
                 "Each method scores every review token for the label the model writes: "
                 + "; ".join(f"`{name}` ({line})" for name, line in DESCRIPTIONS.items())  # the registry's lines
                 + ". Attention alone is not an explanation: the deletion test below checks the chosen method on "
                 "your own review. The gradient methods and occlusion re-run the model many times: allow a few "
                 "seconds on a long review.")

LENS_INTRO = ("### Look inside: the logit lens\n"
              "How each generated token formed through depth: the final LayerNorm and the unembedding applied "
              "to every layer's residual stream show what the model would have predicted had it stopped there. "
              "The last row is the model's own prediction.")
