"""The causal-encoder option: an encoder that reads the source with the LM's causal mask, and the
auxiliary language-model loss it makes possible."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from model import IGNORE_INDEX, DecoderOnlyConfig, DecoderOnlyLM, EncoderDecoder, EncoderDecoderConfig
from training.errors import UsageError
from training.recipe import Recipe, source_lm_loss, training_loss
from training.transfer import init_encoder_from

SHAPE = dict(n_head=2, d_model=32, d_ff=64, dropout=0.0, norm_first=True)


def classifier(causal: bool, **kw) -> EncoderDecoder:
    torch.manual_seed(0)
    config = EncoderDecoderConfig(vocab_size=100, n_encoder_layer=2, n_decoder_layer=1, max_src_len=20,
                                  max_tgt_len=4, causal_encoder=causal, **SHAPE, **kw)
    return EncoderDecoder(config).eval()


@pytest.mark.parametrize("causal", [True, False])
def test_memory_at_t_depends_on_later_tokens_only_without_the_causal_mask(causal):
    model = classifier(causal)
    src = torch.randint(3, 100, (1, 12))
    changed = src.clone()
    changed[0, 7:] = torch.randint(3, 100, (5,))
    memory, _ = model.encode(src)
    memory_changed, _ = model.encode(changed)
    same = torch.isclose(memory, memory_changed, atol=1e-6).all(-1)[0]  # (12,): positions whose state is equal
    if causal:
        assert same[:7].all() and not same[7:].any()
    else:
        assert not same[:7].any()


def test_causal_encoder_attention_maps_are_lower_triangular_and_respect_padding():
    model = classifier(True)
    src = torch.randint(3, 100, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0  # the second source is right-padded
    _, maps = model.encode(src, mask, output_attentions=True)
    for m in maps:  # (B, H, S, S)
        upper = torch.ones(9, 9, dtype=torch.bool).triu(1)
        assert (m.weights[..., upper] == 0).all()
        assert (m.weights[1, :, :6, 6:] == 0).all()  # real positions never read padding
        torch.testing.assert_close(m.weights[0].sum(-1), torch.ones(2, 9))


def test_the_causal_encoder_started_from_the_lm_is_the_lm():
    """With the LM's causal mask, the encoder initialised from an LM computes the LM's own final
    hidden states: their projection through the tied embeddings is the LM's next-token logits."""
    torch.manual_seed(1)
    lm = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=100, n_layer=2, block_size=32, **SHAPE)).eval()
    model = classifier(True)
    init_encoder_from(model, lm)
    src = torch.randint(3, 100, (2, 15))
    memory, _ = model.encode(src)
    torch.testing.assert_close(model.embed.logits(memory), lm(src).logits, atol=1e-5, rtol=1e-5)
    bidirectional = classifier(False)
    init_encoder_from(bidirectional, lm)
    assert not torch.allclose(bidirectional.embed.logits(bidirectional.encode(src)[0]), lm(src).logits, atol=1e-3)


def test_source_lm_loss_is_the_next_token_loss_of_the_memory_without_padding():
    model = classifier(True)
    src = torch.randint(3, 100, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[0, 7:] = 0
    memory, _ = model.encode(src, mask)
    logits = model.embed.logits(memory)[:, :-1]  # (2, 9, vocab)
    targets = src[:, 1:].clone()
    targets[0, 6:] = IGNORE_INDEX  # targets at padded positions 7, 8, 9
    expected = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)
    torch.testing.assert_close(source_lm_loss(model, memory, src, mask), expected, atol=1e-5, rtol=1e-5)


def test_training_loss_adds_the_weighted_lm_loss():
    model = classifier(True)
    batch = {"src_ids": torch.randint(3, 100, (2, 8)), "src_mask": torch.ones(2, 8, dtype=torch.long),
             "tgt_ids": torch.tensor([[1, 5], [1, 6]]), "targets": torch.tensor([[5, 2], [6, 2]])}
    plain = training_loss(model, model, batch, Recipe())
    weighted = training_loss(model, model, batch, Recipe(lm_weight=0.5))
    memory, _ = model.encode(batch["src_ids"], batch["src_mask"])
    expected = plain + 0.5 * source_lm_loss(model, memory, batch["src_ids"], batch["src_mask"])
    torch.testing.assert_close(weighted, expected, atol=1e-5, rtol=1e-5)


def test_lm_weight_is_validated():
    with pytest.raises(UsageError, match="--lm-weight"):
        Recipe(lm_weight=-1)
    with pytest.raises(UsageError, match="--lm-weight"):
        Recipe(lm_weight=0.5, adversarial_eps=1.0)


def test_the_app_shows_a_causal_encoder_masked_and_explains_it(tmp_path):
    """Served, a causal-encoder classifier's encoder map is marked causal (its future is the masked
    triangle, and its weights there are 0), and every explanation method runs on it."""
    import json
    import shutil

    from demo.serving import DemoService
    from demo.tiny import shared_tiny_checkpoints
    from demo.views.attention import attention_view
    from demo.views.sentiment import explain
    from inspection import METHODS

    ckpt = tmp_path / "ckpt"
    shutil.copytree(shared_tiny_checkpoints(), ckpt)
    config_path = ckpt / "sentiment" / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "causal_encoder": True}))
    service = DemoService(ckpt, device="cpu")
    assert service.sentiment.model.config.causal_encoder
    result = attention_view(service, "The film was not bad at all, I liked it.", "encoder_self", 1)
    assert result.causal and "masked" in result.title
    upper = np.triu(np.ones(result.all_weights.shape[-2:], dtype=bool), 1)
    assert (result.all_weights[..., upper] == 0).all()
    for method in METHODS:
        explanation = explain(service, "The film was not bad at all, I liked it.", method)
        assert explanation is not None
