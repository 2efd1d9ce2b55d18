"""Same word, two meanings: one word in two contexts, its vector after each layer, and how alike the
two are (the notebooks' river bank and money bank). At the embedding the two vectors are the same
row of the table, so their cosine is 1 (the positions aside); each layer mixes in what the word's
context says, and the cosine falls where the model tells the meanings apart.

    rows = two_meanings(lm, tokenizer, "bank", "We sat on the river bank", "I paid it into the bank")
    [(r.depth, r.cosine) for r in rows]     # ("embeddings", 0.98), ("layer 1", 0.83), ...

The vectors are the residual stream at the word's last token (`pos.hook_input`, then after each
layer), the same points the logit lens reads.
"""

from dataclasses import dataclass

import torch

from model import DecoderOnlyLM
from tokenization import BPETokenizer, fit_context, prompt_ids

from .logit_lens import residual_stream_points


@dataclass(frozen=True)
class Depth:
    depth: str  # "embeddings", "layer 1", ...
    cosine: float  # of the word's two vectors at this depth
    size: tuple[float, float]  # their lengths (L2 norms)


def _word_position(ids: list[int], word_ids: list[int], text: str, word: str) -> int:
    """The position of the word's last token in `ids` (its first occurrence as a whole token run)."""
    for start in range(len(ids) - len(word_ids) + 1):
        if ids[start:start + len(word_ids)] == word_ids:
            return start + len(word_ids) - 1
    raise ValueError(f"“{word}” is not a word of “{text}” as the tokenizer splits it (with a space before it)")


def two_meanings(model: DecoderOnlyLM, tokenizer: BPETokenizer, word: str, first: str, second: str) -> list[Depth]:
    """The cosine of `word`'s vectors in the texts `first` and `second` at every depth of the model."""
    word_ids = tokenizer.encode(" " + word.strip())
    streams = residual_stream_points(model)
    vectors = []
    for text in (first, second):
        ids = fit_context(prompt_ids(text, tokenizer), model.config.block_size, keep="head")
        at = _word_position(ids, word_ids, text, word)
        with torch.inference_mode(), model.hooks(read=streams) as seen:
            model(torch.tensor([ids]))
        vectors.append(torch.stack([seen[name][0, at].double() for name in streams]))  # (L+1, C)
    a, b = vectors
    cosines = torch.nn.functional.cosine_similarity(a, b, dim=-1)
    names = ["embeddings"] + [f"layer {i + 1}" for i in range(len(streams) - 1)]
    return [Depth(name, float(c), (float(x.norm()), float(y.norm())))
            for name, c, x, y in zip(names, cosines, a, b, strict=True)]
