"""The configuration every layer is built from, and its validation.

`TransformerConfig` holds what every layer reads (width, heads, feed-forward size, dropout, norm
placement) and what both models share (the vocabulary and the special ids). Each model's config
subclasses it with its context lengths and layer counts, so `EncoderLayer(config)`,
`Decoder(config)`, ... are built from either one, as nanoGPT's `Block(config)` is.

A config is checked field by field when it is constructed, before any weight is allocated: a
`config.json` with `vocab_size=300000`, a negative `n_layer` or a string `d_model` fails with a
`ValueError` that names the field (and, through `from_pretrained`, the file), instead of taking
gigabytes or failing deep inside `torch`. The bounds are generous for this library's models (the
shipped ones are 8,192 tokens wide, 320 wide, 6 layers) and live next to each field.
"""

import math
import types
import typing
from dataclasses import dataclass, field, fields
from typing import ClassVar

MAX_VOCAB = 65_536
MAX_WIDTH = 8_192  # d_model
MAX_FF = 32_768  # d_ff
MAX_HEADS = 128
MAX_LAYERS = 128
MAX_POSITIONS = 16_384  # block_size, max_src_len, max_tgt_len
PARTS = ("positions", "embed_scale", "scale_scores", "causal", "residual", "layer_norm", "feed_forward")


def bounded(default, low, high=None):
    """A dataclass field with an inclusive range (`high=None`: no upper bound), checked on construction."""
    return field(default=default, metadata={"range": (low, high)})


def _check_type(name: str, value, expected) -> None:
    """`expected` is a field's annotation: int, float, bool, or `list[str] | None`."""
    if isinstance(expected, types.UnionType):
        if value is None and type(None) in typing.get_args(expected):
            return
        (expected,) = [t for t in typing.get_args(expected) if t is not type(None)]
    if typing.get_origin(expected) is list:
        (item,) = typing.get_args(expected)
        if not isinstance(value, list) or not all(isinstance(v, item) for v in value):
            raise ValueError(f"{name} must be a list of {item.__name__}, got {value!r}")
        return
    if expected is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    elif expected is int:
        ok = isinstance(value, int) and not isinstance(value, bool)  # True is an int to Python, not to a config
    else:
        ok = isinstance(value, expected)
    if not ok:
        raise ValueError(f"{name} must be {'a finite float' if expected is float else expected.__name__}, "
                         f"got {value!r}")


@dataclass
class TransformerConfig:
    """What every layer reads; a model's config adds its lengths and layer counts."""

    is_encoder_decoder: ClassVar[bool] = False  # whether decoder layers cross-attend to an encoder

    vocab_size: int = bounded(8192, 1, MAX_VOCAB)
    n_head: int = bounded(4, 1, MAX_HEADS)
    d_model: int = bounded(256, 2, MAX_WIDTH)
    d_ff: int = bounded(1024, 1, MAX_FF)
    dropout: float = bounded(0.1, 0.0, 0.99)
    # dropout on the attention weights themselves; None: `dropout`, as the Annotated Transformer does.
    # On a CPU it also picks the kernel: above 0, PyTorch's fused attention cannot run, so every
    # layer materialises its (B, H, T, T) weights and draws a random number for each (at 16 x 1,024
    # tokens, 0.1 costs 3x a step of the shipped classifier); at 0, the fused kernel runs.
    attention_dropout: float | None = bounded(None, 0.0, 0.99)
    norm_first: bool = True  # pre-norm (GPT-2); False gives the paper's post-norm
    # The parts a model can be trained without, to see why each exists (`python -m training.why`).
    # Every shipped model has them all; False skips the part's one line in model/, nothing else changes.
    positions: bool = True  # add the sinusoidal positions (`embeddings.PositionalEncoding`)
    embed_scale: bool = True  # multiply the token embeddings by √d_model (`embeddings.Embeddings`)
    scale_scores: bool = True  # divide Q Kᵀ by √d_k (`attention.MultiHeadAttention`)
    causal: bool = True  # a decoder position sees only itself and the positions before it (`layers.DecoderLayer`)
    residual: bool = True  # x + Sublayer(...): the stream carries x past each sublayer (`layers.SublayerConnection`)
    layer_norm: bool = True  # normalise around each sublayer and after the stack (`layers.build_norm`)
    feed_forward: bool = True  # a feed-forward sublayer in every block (`layers.DecoderLayer`, `EncoderLayer`)
    pad_token_id: int = bounded(0, 0)
    bos_token_id: int = bounded(1, 0)
    eos_token_id: int = bounded(2, 0)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            _check_type(f.name, value, f.type)
            low, high = f.metadata.get("range", (None, None))
            if value is not None and (low is not None and value < low or high is not None and value > high):
                bounds = f">= {low}" if high is None else f"between {low} and {high}"
                raise ValueError(f"{f.name} must be {bounds}, got {value!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of n_head ({self.n_head})")
        if self.d_model % 2:
            raise ValueError(f"d_model must be even (sine/cosine pairs of the positional encoding), got {self.d_model}")
        for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
            if getattr(self, name) >= self.vocab_size:
                raise ValueError(f"{name} ({getattr(self, name)}) must be below vocab_size ({self.vocab_size})")

    @property
    def parts_off(self) -> tuple[str, ...]:
        """The parts this model was built without (`training.why`); () for every shipped model."""
        return tuple(name for name in PARTS if not getattr(self, name))

    @property
    def attention_weight_dropout(self) -> float:
        """The dropout probability of the attention weights: `attention_dropout`, else `dropout`."""
        return self.dropout if self.attention_dropout is None else self.attention_dropout
