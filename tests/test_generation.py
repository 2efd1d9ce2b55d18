"""Generation: the KV cache changes nothing but speed, sampling is seeded, the filters keep
exactly the tokens they should, and bad settings are refused."""

import math

import pytest
import torch

from model import (
    DecoderOnlyConfig,
    DecoderOnlyLM,
    EncoderDecoder,
    EncoderDecoderConfig,
    GenerationConfig,
    filter_logits,
)

VOCAB, BOS = 40, 1


def fit(model, batch, steps: int = 150):
    """A few AdamW steps on `batch()` -> model kwargs, then eval mode."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        loss = model(**batch()).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return model.eval()


def counting(n: int, length: int, start: torch.Tensor | None = None, g: torch.Generator | None = None):
    """Rows of consecutive token ids mod VOCAB, e.g. 38 39 0 1 2."""
    start = torch.randint(0, VOCAB, (n, 1), generator=g) if start is None else start
    return (start + torch.arange(length)) % VOCAB


@pytest.fixture(scope="module")
def lm() -> DecoderOnlyLM:
    """Trained to count: untrained, greedy decoding only repeats one token, which would leave the
    cache, the sliding window and the end-of-sequence stop next to untested."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=VOCAB, block_size=12, n_layer=2, n_head=2, d_model=16,
                                            d_ff=32, dropout=0.0))

    def batch():
        x = counting(32, 13, g=g)
        return {"input_ids": x[:, :-1], "targets": x[:, 1:]}

    return fit(model, batch)


@pytest.fixture(scope="module")
def seq2seq() -> EncoderDecoder:
    """Trained to count on from the first source token, which it must read through cross-attention."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = EncoderDecoder(EncoderDecoderConfig(vocab_size=VOCAB, max_src_len=16, max_tgt_len=24, n_encoder_layer=2,
                                                n_decoder_layer=2, n_head=2, d_model=16, d_ff=32, dropout=0.0))

    def batch():
        src = torch.randint(0, VOCAB, (32, 8), generator=g)
        tgt = counting(32, 12, start=src[:, :1] + 1)
        return {"src_ids": src, "tgt_ids": torch.cat([torch.full((32, 1), BOS), tgt[:, :-1]], 1), "targets": tgt}

    return fit(model, batch, steps=200)


def random_lm() -> DecoderOnlyLM:
    """Untrained: near-uniform next-token probabilities, so different samples really differ."""
    torch.manual_seed(0)
    return DecoderOnlyLM(DecoderOnlyConfig(vocab_size=VOCAB, block_size=12, n_layer=2, n_head=2, d_model=16,
                                           d_ff=32, dropout=0.0)).eval()


PROMPT = torch.tensor([[BOS, 22, 23, 24, 25]])
SRC = torch.tensor([[5, 9, 14, 30, 22, 8, 0, 0]])
SRC_MASK = torch.tensor([[1, 1, 1, 1, 1, 1, 0, 0]])


def assert_same_steps(cached, full):
    assert [s.token_id for s in cached] == [s.token_id for s in full]
    for a, b in zip(cached, full, strict=True):
        assert a.prob == pytest.approx(b.prob, abs=1e-5)
        assert [i for i, _ in a.alternatives] == [i for i, _ in b.alternatives]
        assert [p for _, p in a.alternatives] == pytest.approx([p for _, p in b.alternatives], abs=1e-5)


@torch.no_grad()
def test_lm_cache_equals_full_recomputation_past_block_size(lm):
    n = 20  # steps 8-19 see more than 12 tokens: the window slides
    cached = list(lm.stream(PROMPT, GenerationConfig(max_new_tokens=n, temperature=0)))
    full = list(lm.stream(PROMPT, GenerationConfig(max_new_tokens=n, temperature=0, use_cache=False)))
    assert [s.token_id for s in cached] == counting(1, n, start=torch.tensor([[26]]))[0].tolist()
    assert_same_steps(cached, full)
    # both equal an independent full forward pass over the (windowed) sequence
    tokens = PROMPT[0].tolist() + [s.token_id for s in cached]
    for i, step in enumerate(cached):
        probs = lm(torch.tensor([tokens[: 5 + i][-12:]])).logits[0, -1].softmax(-1)
        assert step.token_id == int(probs.argmax())
        assert step.prob == pytest.approx(float(probs.max()), abs=1e-5)
    # and sampling draws the same tokens from the same probabilities
    sample = lambda use_cache: list(lm.stream(PROMPT, GenerationConfig(max_new_tokens=n, temperature=3.0, seed=0,
                                                                       use_cache=use_cache)))
    assert_same_steps(sample(True), sample(False))


@torch.no_grad()
def test_seq2seq_cache_equals_full_recomputation(seq2seq):
    start = torch.tensor([[BOS]])
    kwargs = {"src_ids": SRC, "src_mask": SRC_MASK}
    cached = list(seq2seq.stream(start, GenerationConfig(max_new_tokens=15, temperature=0), **kwargs))
    full = list(seq2seq.stream(start, GenerationConfig(max_new_tokens=15, temperature=0, use_cache=False), **kwargs))
    assert [s.token_id for s in cached] == list(range(6, 21))  # counting on from the source's first token, 5
    assert_same_steps(cached, full)
    tgt = torch.tensor([[BOS] + [s.token_id for s in cached[:-1]]])
    probs = seq2seq(SRC, tgt, src_mask=SRC_MASK).logits[0].softmax(-1)  # teacher-forced: one pass, all steps
    assert [s.token_id for s in cached] == probs.argmax(-1).tolist()
    assert [s.prob for s in cached] == pytest.approx(probs.max(-1).values.tolist(), abs=1e-5)
    sample = lambda use_cache: list(seq2seq.stream(start, GenerationConfig(max_new_tokens=15, temperature=3.0, seed=0,
                                                                           use_cache=use_cache), **kwargs))
    assert_same_steps(sample(True), sample(False))


@torch.no_grad()
def test_alternatives_are_the_top_probabilities(lm):
    step = next(lm.stream(PROMPT, GenerationConfig(max_new_tokens=1, temperature=0, num_alternatives=3)))
    probs = lm(PROMPT).logits[0, -1].softmax(-1)
    top = probs.topk(3)
    assert [i for i, _ in step.alternatives] == top.indices.tolist()
    assert [p for _, p in step.alternatives] == pytest.approx(top.values.tolist(), abs=1e-6)
    assert step.alternatives[0] == (step.token_id, step.prob) and step.token_id == 26


def test_seeded_sampling_is_reproducible():
    model = random_lm()
    sample = lambda seed, **kw: model.generate(PROMPT, GenerationConfig(max_new_tokens=15, seed=seed, **kw))
    assert sample(123) == sample(123)
    assert sample(123) != sample(124)
    assert sample(7, use_cache=False) == sample(7)
    assert sample(5, top_k=5, top_p=0.9) == sample(5, top_k=5, top_p=0.9)


def test_top_k_1_equals_greedy():
    model = random_lm()
    greedy = model.generate(PROMPT, GenerationConfig(max_new_tokens=15, temperature=0))
    assert model.generate(PROMPT, GenerationConfig(max_new_tokens=15, seed=3)) != greedy  # sampling does differ
    assert model.generate(PROMPT, GenerationConfig(max_new_tokens=15, top_k=1, seed=3)) == greedy
    assert model.generate(PROMPT, GenerationConfig(max_new_tokens=15, temperature=2.0, top_k=1, seed=4)) == greedy


@torch.no_grad()
def test_sampled_token_prob_is_the_unfiltered_model_probability():
    model = random_lm()
    step = next(model.stream(PROMPT, GenerationConfig(max_new_tokens=1, temperature=0.5, top_k=3, seed=0)))
    probs = model(PROMPT).logits[0, -1].softmax(-1)
    assert step.token_id in probs.topk(3).indices.tolist()
    assert step.prob == pytest.approx(float(probs[step.token_id]), abs=1e-6)


def test_eos_stops_generation(lm):
    config = GenerationConfig(max_new_tokens=15, temperature=0, eos_token_id=29)
    assert lm.generate(PROMPT, config) == [26, 27, 28, 29]
    assert lm.generate(PROMPT, GenerationConfig(max_new_tokens=15, temperature=0, eos_token_id=BOS)) == list(
        range(26, 40)) + [0]  # not reached within 15 tokens: max_new_tokens decides


# --- logit filters -----------------------------------------------------------------------------

# probabilities 0.05, 0.5, 0.1, 0.2, 0.15 at token ids 0..4 (so the sorted order is 1, 3, 4, 2, 0)
PROBS = torch.tensor([0.05, 0.5, 0.1, 0.2, 0.15])
LOGITS = PROBS.log()


def kept(logits: torch.Tensor) -> set[int]:
    return set(torch.isfinite(logits).nonzero().flatten().tolist())


@pytest.mark.parametrize("top_k, top_p, expected", [
    (None, None, {0, 1, 2, 3, 4}),
    (1, None, {1}),
    (2, None, {1, 3}),
    (4, None, {1, 2, 3, 4}),
    (5, None, {0, 1, 2, 3, 4}),
    (9, None, {0, 1, 2, 3, 4}),
    (None, 0.45, {1}),             # the top token alone already holds 0.5
    (None, 0.6, {1, 3}),           # 0.5 < 0.6 -> add 0.2
    (None, 0.75, {1, 3, 4}),       # 0.7 < 0.75 -> add 0.15
    (None, 0.9, {1, 3, 4, 2}),     # 0.85 < 0.9 -> add 0.1
    (None, 1.0, {0, 1, 2, 3, 4}),
    (3, 0.6, {1, 3}),              # renormalised over the top 3: 0.5/0.85 = 0.588 < 0.6
    (2, 0.9, {1, 3}),
])
def test_filter_logits_keeps_expected_tokens(top_k, top_p, expected):
    filtered = filter_logits(LOGITS, top_k, top_p)
    assert kept(filtered) == expected
    assert torch.equal(filtered[list(expected)], LOGITS[list(expected)])  # kept logits are untouched
    assert (filtered[[i for i in range(5) if i not in expected]] == -math.inf).all()
    assert kept(LOGITS) == {0, 1, 2, 3, 4}  # the input is not modified in place


@pytest.mark.parametrize("kwargs", [
    {"top_p": 0.0}, {"top_p": -0.1}, {"top_p": 1.5}, {"top_k": 0}, {"top_k": -3}, {"max_new_tokens": -1},
])
def test_bad_generation_config_raises(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        GenerationConfig(**kwargs)


@pytest.mark.parametrize("shape", [(2, 3), (1, 0), (3,)])
def test_stream_rejects_anything_but_one_sequence(shape):
    with pytest.raises(ValueError, match=r"shape \(1, T\)"):
        random_lm().generate(torch.ones(shape, dtype=torch.long), GenerationConfig(max_new_tokens=1))


def test_max_new_tokens_zero_generates_nothing():
    assert random_lm().generate(PROMPT, GenerationConfig(max_new_tokens=0)) == []
