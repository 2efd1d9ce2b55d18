"""Generation: the KV cache changes nothing but speed, sampling is seeded, the filters keep
exactly the tokens they should, and bad settings are refused."""

import math
from pathlib import Path

import pytest
import torch

from model import (
    DecoderOnlyConfig,
    DecoderOnlyLM,
    EncoderDecoder,
    EncoderDecoderConfig,
    GenerationConfig,
    filter_logits,
    load_pretrained,
    sampling_distribution,
)
from model.fast import can_decode, decode_step

VOCAB, BOS = 40, 1
LM_CHECKPOINT = Path(__file__).resolve().parents[1] / "checkpoints" / "lm"


def fit(model, batch, steps: int = 150):
    """A few AdamW steps on `batch()` -> model kwargs, then eval mode. The learning rate decays to 0,
    so the model ends settled, not wherever the last spike of a large constant rate left it."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / steps)
    for _ in range(steps):
        loss = model(**batch()).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
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


# block_size 12, a 5-token prompt: the window is full at 12 tokens; the 13th drops the oldest half
# once (the window restarts 6 tokens back) and it grows again up to 12: starts at 7, 14, 21, 28.
WINDOW_STARTS = [0] * 8 + [7] * 7 + [14] * 7 + [21] * 7 + [28] * 1  # step i reads tokens[start : 5 + i]


@torch.no_grad()
def test_lm_cache_equals_full_recomputation_past_block_size(lm):
    n = len(WINDOW_STARTS)
    cached = list(lm.stream(PROMPT, GenerationConfig(max_new_tokens=n, temperature=0)))
    full = list(lm.stream(PROMPT, GenerationConfig(max_new_tokens=n, temperature=0, use_cache=False)))
    assert [s.token_id for s in cached] == counting(1, n, start=torch.tensor([[26]]))[0].tolist()
    assert_same_steps(cached, full)
    # both equal an independent full forward pass over the window, at each window start and between
    tokens = PROMPT[0].tolist() + [s.token_id for s in cached]
    for i, (step, start) in enumerate(zip(cached, WINDOW_STARTS, strict=True)):
        logits = lm(torch.tensor([tokens[start : 5 + i]])).logits[0, -1]
        torch.testing.assert_close(step.logits, logits, atol=1e-5, rtol=0)
        assert step.token_id == int(logits.argmax())
        assert step.prob == pytest.approx(float(logits.softmax(-1).max()), abs=1e-5)
    # and sampling draws the same tokens from the same probabilities
    sample = lambda use_cache: list(lm.stream(PROMPT, GenerationConfig(max_new_tokens=n, temperature=3.0, seed=0,
                                                                       use_cache=use_cache)))
    assert_same_steps(sample(True), sample(False))


@torch.no_grad()
def test_sliding_window_re_encodes_once_per_slide(lm, monkeypatch):
    """With the cache, a step feeds one new token, except the prompt and each slide, which feed the
    window once: the work per token stays bounded past the context."""
    fed = []
    # the prompt and slides run the decoder stack (not `forward`: only the last position is projected)
    hook = lm.decoder.register_forward_hook(lambda module, args, out: fed.append(args[0].size(1)))
    # the one-token steps skip the stack (`model/fast`)
    monkeypatch.setattr("model.fast.decode_step", lambda model, token, cache: fed.append(token.size(1))
                        or decode_step(model, token, cache))
    try:
        lm.generate(PROMPT, GenerationConfig(max_new_tokens=len(WINDOW_STARTS), temperature=0))
    finally:
        hook.remove()
    slides = {8, 15, 22, 29}  # the steps whose window start moved
    assert fed == [5] + [6 if i in slides else 1 for i in range(1, len(WINDOW_STARTS))]


@torch.no_grad()
def test_prompt_longer_than_the_window_keeps_its_end(lm):
    prompt = counting(1, 20, start=torch.tensor([[3]]))  # 3 .. 22: only 11 .. 22 fit in 12 positions
    steps = list(lm.stream(prompt, GenerationConfig(max_new_tokens=3, temperature=0)))
    torch.testing.assert_close(steps[0].logits, lm(prompt[:, -12:]).logits[0, -1], atol=1e-5, rtol=0)
    assert [s.token_id for s in steps] == [23, 24, 25]


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


@pytest.mark.parametrize("temperature", [0.0, -1.0, 1e-38, 1e-30, 9e-6])
def test_tiny_temperatures_are_greedy(temperature):
    """Dividing logits by t < 1e-5 could overflow float32 (t = 1e-38 turns them into inf and the
    softmax into NaN); such a t puts all its mass on the argmax anyway, so it decodes greedily."""
    model = random_lm()
    greedy = model.generate(PROMPT, GenerationConfig(max_new_tokens=15, temperature=0))
    assert model.generate(PROMPT, GenerationConfig(max_new_tokens=15, temperature=temperature, seed=1)) == greedy
    assert GenerationConfig(temperature=temperature).greedy and not GenerationConfig(temperature=1e-5).greedy
    logits = torch.tensor([0.5, 3.0, -1.0])  # what greedy decoding draws from: the argmax alone, no NaN
    assert sampling_distribution(logits, GenerationConfig(temperature=temperature)).tolist() == [0.0, 1.0, 0.0]


@torch.no_grad()
def test_token_step_probabilities_are_computed_only_when_read():
    model = random_lm()
    step = next(model.stream(PROMPT, GenerationConfig(max_new_tokens=1, temperature=0, num_alternatives=4)))
    assert "probs" not in vars(step) and "alternatives" not in vars(step)  # nothing computed yet
    probs = model(PROMPT).logits[0, -1].softmax(-1)
    assert step.prob == pytest.approx(float(probs.max()), abs=1e-6)
    assert [i for i, _ in step.alternatives] == probs.topk(4).indices.tolist()
    assert next(model.stream(PROMPT, GenerationConfig(max_new_tokens=1, num_alternatives=0))).alternatives == []


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
    {"top_p": 0.0}, {"top_p": -0.1}, {"top_p": 1.5}, {"top_p": math.nan}, {"top_k": 0}, {"top_k": -3},
    {"max_new_tokens": -1}, {"temperature": math.inf}, {"temperature": -math.inf}, {"temperature": math.nan},
    {"num_alternatives": -1},
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



@pytest.mark.parametrize("norm_first", [True, False])
def test_the_decode_step_fast_path_equals_the_layers(monkeypatch, norm_first):
    """`fast.decode_step` (no wrappers) gives the tokens and logits of the layers' own forward, and
    is taken for every cached one-token step, pre-norm and post-norm alike."""
    torch.manual_seed(0)
    model = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=VOCAB, block_size=8, n_layer=3, n_head=4, d_model=32,
                                            d_ff=64, dropout=0.1, norm_first=norm_first)).eval()
    config = GenerationConfig(max_new_tokens=20, temperature=2.0, seed=3)  # slides the 8-token window
    forwards = []
    hook = model.decoder.register_forward_hook(lambda module, args, output: forwards.append(args[0].size(1)))
    fast = list(model.stream(PROMPT, config))
    hook.remove()
    monkeypatch.setattr("model.fast.can_decode", lambda model: False)
    slow = list(model.stream(PROMPT, config))
    assert [s.token_id for s in fast] == [s.token_id for s in slow]
    for a, b in zip(fast, slow, strict=True):
        torch.testing.assert_close(a.logits, b.logits, atol=1e-5, rtol=0)
    # the layer stack only for the prompt and each re-encoded window (several tokens), never one token
    assert 1 not in forwards and len(forwards) == sum(n > 1 for n in forwards) < 20


@pytest.mark.skipif(not (LM_CHECKPOINT / "model.safetensors").is_file(), reason="no shipped LM checkpoint")
def test_the_decode_step_equals_the_layers_on_the_shipped_lm(monkeypatch):
    """At the shipped shape and weights, 200 greedy tokens (the benchmark's run) from the fast step
    and from the layers: the same ids, the logits to 1e-5 (relative too: the fast step multiplies a
    row by the row-major copies `row_weight` makes, the layers by nn.Linear's layout, so the same
    products are summed in another order; logits of ~10 then differ by ~1e-5)."""
    model = load_pretrained(LM_CHECKPOINT, "cpu").eval()
    config = GenerationConfig(max_new_tokens=200, temperature=0)
    fast = list(model.stream(torch.tensor([[model.config.bos_token_id]]), config))
    monkeypatch.setattr("model.fast.can_decode", lambda model: False)
    slow = list(model.stream(torch.tensor([[model.config.bos_token_id]]), config))
    assert [s.token_id for s in fast] == [s.token_id for s in slow] and len(fast) == 200
    assert len({s.token_id for s in fast}) > 10  # text (greedy text loops, but not on one token)
    for a, b in zip(fast, slow, strict=True):
        torch.testing.assert_close(a.logits, b.logits, atol=1e-5, rtol=1e-5)


def test_the_fast_path_leaves_ablated_heads_to_the_layers(lm):
    steps = lambda: [s.logits for s in lm.stream(PROMPT, GenerationConfig(max_new_tokens=4, temperature=0))]
    plain = steps()
    with lm.hooks(patch={"decoder.layers.1.self_attn.hook_heads": lambda out: out * 0}):  # layer 1: every head out
        with torch.no_grad():
            assert not can_decode(lm)
        ablated = steps()
    with torch.no_grad():
        assert can_decode(lm)
    assert all((a - b).abs().max() > 1e-3 for a, b in zip(plain[1:], ablated[1:], strict=True))


def test_the_fast_path_leaves_autocast_to_the_layers(lm):
    """Its out= product would not autocast: under autocast the layers run every step."""
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert not can_decode(lm)
    with torch.no_grad():
        assert can_decode(lm)


@torch.inference_mode()
def test_next_token_logits_project_only_the_last_position(lm, seq2seq, monkeypatch):
    """A prompt's next-token logits are the forward pass's last row, and the vocabulary projection
    is given that one row only (with and without a cache)."""
    projected = []
    for model in (lm, seq2seq):
        logits = model.embed.logits
        monkeypatch.setattr(model.embed, "logits", lambda x, logits=logits: projected.append(x.shape) or logits(x))
    src = torch.tensor([[5, 9, 2, 7]])
    full_lm = lm(PROMPT).logits[:, -1]
    full_s2s = seq2seq(src, PROMPT).logits[:, -1]
    projected.clear()
    for cache in (None, lm.new_cache()):
        torch.testing.assert_close(lm.next_token_logits(PROMPT, cache), full_lm, atol=1e-5, rtol=0)
    for cache in (None, seq2seq.new_cache()):
        torch.testing.assert_close(seq2seq.next_token_logits(PROMPT, cache, src), full_s2s, atol=1e-5, rtol=0)
    assert projected == [(1, 16)] * 4 and full_lm.shape == (1, VOCAB)
