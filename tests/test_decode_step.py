"""The fast one-token decode step (`model.fast.decode_step`) against the layers it stands in for, one
test per option a block can have: every config field, the norm `build_norm` makes, the feed-forward's
activation, the projections' biases. Each test generates with the fast step (and checks it ran) and
compares every step's logits with the layers' own full forward over the same tokens, in float32:
a fast step that ignored the option (a GELU written in, say) fails here."""

from contextlib import contextmanager
from dataclasses import fields
from unittest import mock

import pytest
import torch
import torch.nn as nn

import model.layers
from model import DecoderOnlyConfig, DecoderOnlyLM, GenerationConfig
from model.config import PARTS
from model.fast import can_decode, decode_step

VOCAB, STEPS = 50, 8
PROMPT = torch.tensor([[1, 7, 3]])

# Every field of DecoderOnlyConfig is a size or an id, which every model below has, or an option
# tested here with each of its values. A new field fails the first test until it is placed.
SIZES_AND_IDS = {"vocab_size", "n_head", "d_model", "d_ff", "block_size", "n_layer", "pad_token_id",
                 "bos_token_id", "eos_token_id"}
# `reverse` only says which way the LM's training text ran: the same computation either way
CONFIG_OPTIONS = {"norm_first": [True, False], "dropout": [0.0, 0.5], "attention_dropout": [None, 0.0, 0.5],
                  "reverse": [False, True], **{part: [True, False] for part in PARTS}}


class DoubledLayerNorm(nn.LayerNorm):
    """A subclass whose forward differs: the fast step binds `nn.LayerNorm` itself, never a subclass."""

    def forward(self, x):
        return 2 * super().forward(x)


class ShiftedGELU(nn.GELU):
    def forward(self, x):
        return super().forward(x) - 0.1


# What the modules of a block can be beyond the config: the norm (build_norm's choice), the activation, biases.
NORMS = {
    "layer_norm": lambda d: nn.LayerNorm(d),
    "layer_norm_without_affine": lambda d: nn.LayerNorm(d, elementwise_affine=False),
    "layer_norm_without_bias": lambda d: nn.LayerNorm(d, bias=False),
    "rms_norm": lambda d: nn.RMSNorm(d),
    "layer_norm_subclass": lambda d: DoubledLayerNorm(d),
}
ACTIVATIONS = {"gelu": nn.GELU(), "gelu_tanh": nn.GELU(approximate="tanh"), "relu": nn.ReLU(), "silu": nn.SiLU(),
               "gelu_subclass": ShiftedGELU()}


def test_every_config_field_is_a_size_or_a_tested_option():
    names = {f.name for f in fields(DecoderOnlyConfig)}
    assert names == SIZES_AND_IDS | CONFIG_OPTIONS.keys(), (
        f"new config fields {sorted(names - SIZES_AND_IDS - CONFIG_OPTIONS.keys())}: add each to CONFIG_OPTIONS "
        "with its values, and make `model.fast.decode_step` follow it or `can_decode` refuse it")


def lm(norm: str = "layer_norm", activation: str = "gelu", bias: bool = True, **options) -> DecoderOnlyLM:
    """A random LM with non-trivial values everywhere (norm affines and biases included), so that
    a part the fast step skipped would show in the logits."""
    torch.manual_seed(0)
    with mock.patch.object(model.layers, "build_norm", lambda c: NORMS[norm](c.d_model)):
        lm = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=VOCAB, block_size=16, n_layer=2, n_head=2, d_model=16,
                                             d_ff=32, **options))
    for block in lm.decoder.layers:
        if block.feed_forward is None:  # a model without the feed-forward (`training.why`)
            continue
        block.feed_forward.activation = ACTIVATIONS[activation]
        if not bias:
            for linear in (block.self_attn.in_proj, block.self_attn.out_proj, block.feed_forward.w_1,
                           block.feed_forward.w_2):
                linear.bias = None
    with torch.no_grad():
        for name, p in lm.named_parameters():
            p.add_(torch.randn_like(p), alpha=0.3) if "norm" in name or "bias" in name else p.normal_(0.0, 0.2)
    return lm.eval()


@contextmanager
def counting_fast_steps(monkeypatch):
    calls = []
    monkeypatch.setattr("model.fast.decode_step", lambda m, token, cache: calls.append(token.shape)
                        or decode_step(m, token, cache))
    yield calls


def assert_fast_equals_layers(model: DecoderOnlyLM, monkeypatch) -> None:
    """STEPS sampled tokens: the first from the prompt's pass through the layers, every other from
    the fast step; each step's logits equal the layers' forward over the whole sequence so far."""
    with counting_fast_steps(monkeypatch) as calls:
        steps = list(model.stream(PROMPT, GenerationConfig(max_new_tokens=STEPS, temperature=2.0, seed=0)))
    assert calls == [(1, 1)] * (STEPS - 1)
    tokens = PROMPT[0].tolist() + [s.token_id for s in steps]
    with torch.no_grad():
        for i, step in enumerate(steps):
            expected = model(torch.tensor([tokens[: PROMPT.size(1) + i]])).logits[0, -1]
            torch.testing.assert_close(step.logits, expected, atol=1e-5, rtol=1e-5)
    assert len(set(tokens)) > 3  # the steps saw different tokens


@pytest.mark.parametrize("norm_first", CONFIG_OPTIONS["norm_first"])
def test_decode_step_follows_norm_first(monkeypatch, norm_first):
    assert_fast_equals_layers(lm(norm_first=norm_first), monkeypatch)


@pytest.mark.parametrize("attention_dropout", CONFIG_OPTIONS["attention_dropout"])
@pytest.mark.parametrize("dropout", CONFIG_OPTIONS["dropout"])
def test_decode_step_follows_dropout(monkeypatch, dropout, attention_dropout):
    """In eval mode dropout is the identity and the fast step runs; in training mode it is refused."""
    model = lm(dropout=dropout, attention_dropout=attention_dropout)
    assert_fast_equals_layers(model, monkeypatch)
    with torch.no_grad():
        assert can_decode(model) and not can_decode(model.train())


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("norm", NORMS)
def test_decode_step_follows_the_norm(monkeypatch, norm, norm_first):
    model = lm(norm=norm, norm_first=norm_first)
    assert sum(isinstance(m, type(NORMS[norm](2))) for m in model.modules()) == (5 if norm_first else 4)
    assert_fast_equals_layers(model, monkeypatch)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_decode_step_follows_the_activation(monkeypatch, activation):
    assert_fast_equals_layers(lm(activation=activation), monkeypatch)


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_decode_step_follows_bias(monkeypatch, bias, norm_first):
    model = lm(bias=bias, norm_first=norm_first)
    assert all((block.self_attn.in_proj.bias is not None) == bias for block in model.decoder.layers)
    assert_fast_equals_layers(model, monkeypatch)


def test_the_fast_step_is_refused_with_autograd():
    model = lm()
    assert not can_decode(model)  # grad mode is on in a test
    with torch.no_grad():
        assert can_decode(model)


@pytest.mark.parametrize("part", [p for p in PARTS if p != "causal"])
def test_a_model_without_a_part_generates_through_its_layers(monkeypatch, part):
    """`training.why`'s models (a part switched off) are refused by the fast step, so the layers decode
    them: each cached step's logits equal the full forward's, as for every shipped model."""
    model = lm(**{part: False})
    with torch.no_grad():
        assert not can_decode(model) and can_decode(lm())
    with counting_fast_steps(monkeypatch) as calls:
        steps = list(model.stream(PROMPT, GenerationConfig(max_new_tokens=STEPS, temperature=2.0, seed=0)))
    assert calls == []
    tokens = PROMPT[0].tolist() + [s.token_id for s in steps]
    with torch.no_grad():
        for i, step in enumerate(steps):
            expected = model(torch.tensor([tokens[: PROMPT.size(1) + i]])).logits[0, -1]
            torch.testing.assert_close(step.logits, expected, atol=1e-5, rtol=1e-5)


def test_a_model_without_the_causal_mask_is_refused_by_the_fast_step():
    """Without the mask every position reads the whole window, so a cached step (which has only the
    past) is not the full forward: nothing fast may claim to be."""
    with torch.no_grad():
        assert not can_decode(lm(causal=False))
