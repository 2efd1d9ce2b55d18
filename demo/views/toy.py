"""The tour's toy models: the shipped architectures at a size where every number fits on a screen.

A learner checks a worked example by hand only when the vectors have a handful of entries, as in the
notebooks the project grew from (a 4-token sentence, d_model 4 to 8). The toy language model and the
toy classifier are built here, in memory, from the project's own classes (`DecoderOnlyLM`,
`EncoderDecoder`) at d_model 8 with 2 heads of 4 numbers, a fixed seed, and weights rounded to one
decimal so that a product can be redone on paper. They are untrained: their predictions are noise,
and the tour says so; the arithmetic is exactly the trained models'. Each has its real model's
structure (pre-norm, tied embeddings, and for the classifier the causal encoder of the shipped one):
only the sizes differ, and nothing is fitted (the classifier's temperature is 1).

Their tokenizer knows `WORDS` whole, so the logits fit on screen too: a `tokenizers` word-level
model behind the project's `BPETokenizer` interface (the special tokens, `pieces`, `encode`), so the
tour reads toy text exactly as it reads real text. Any other word is `<unk>`.
"""

import functools

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from classifier import ClassifierConfig
from demo.serving import LM, SENTIMENT, Checkpoint
from model import DecoderOnlyConfig, DecoderOnlyLM, EncoderDecoder, EncoderDecoderConfig
from tokenization import SPECIAL_TOKENS, BPETokenizer

UNKNOWN = "<unk>"
WORDS = ["this", "movie", "film", "was", "is", "great", "good", "bad", "boring", "not", "the", "plot", ".",
         "negative", "positive"]
SHAPE = {"d_model": 8, "n_head": 2, "d_ff": 16, "dropout": 0.0, "norm_first": True}  # both toys, pre-norm as shipped
# the shipped classifier's structure (its config's fields other than sizes, `tests/test_tour.py` compares them):
# an encoder that keeps the language model's causal mask (it was started from the LM), reading forwards
SENTIMENT_STRUCTURE = {"causal_encoder": True, "reverse": False}
TOY_CLASSIFIER = ClassifierConfig(labels=["negative", "positive"])  # the shipped labels; nothing fitted: T = 1
MAX_TOKENS = 8  # the toy LM's context, start token included
SEED = 0


@functools.cache
def toy_tokenizer() -> BPETokenizer:
    """The toy vocabulary: the special tokens, `<unk>`, then `WORDS`; lower-cased, split on spaces
    and punctuation."""
    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS.values(), UNKNOWN, *WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=UNKNOWN))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return BPETokenizer(tokenizer)


def _one_decimal(model: torch.nn.Module) -> torch.nn.Module:
    """Every weight drawn again from {-0.9, ..., 0.9} (seeded), biases 0, LayerNorms 1 and 0: products
    a learner can redo by hand. (GPT-2's N(0, 0.02) would make every number in the toy 0.00.)"""
    generator = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                continue  # LayerNorm: gain 1, bias 0, as initialised
            if name.endswith("bias"):
                p.zero_()
            else:
                p.copy_(torch.randint(-9, 10, p.shape, generator=generator) / 10)
    return model.eval()


@functools.cache
def toy_checkpoint(name: str) -> Checkpoint:
    """The toy language model (`LM`) or classifier (`SENTIMENT`) as a served `Checkpoint` record."""
    tokenizer = toy_tokenizer()
    vocab = tokenizer.vocab_size
    if name == LM:
        model = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=vocab, block_size=MAX_TOKENS, n_layer=2, **SHAPE))
    else:
        model = EncoderDecoder(EncoderDecoderConfig(
            vocab_size=vocab, max_src_len=MAX_TOKENS, max_tgt_len=4, n_encoder_layer=2, n_decoder_layer=1,
            **SENTIMENT_STRUCTURE, **SHAPE))
    return Checkpoint(name=name if name in (LM, SENTIMENT) else SENTIMENT, location="toy (in memory)",
                      status="ready", message="random weights", model=_one_decimal(model), tokenizer=tokenizer,
                      classifier=None if name == LM else TOY_CLASSIFIER)
