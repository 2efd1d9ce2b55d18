"""bfloat16 autocast: which precision "auto" picks, the loss under autocast, and a tiny training run
in bfloat16 against float32."""

import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from model import DecoderOnlyConfig, DecoderOnlyLM, autocast, head_and_loss, resolve_precision
from tokenization import BPETokenizer, clean_text
from training import run

IMDB = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "imdb"


@pytest.mark.parametrize("native, expected", [(True, "bf16"), (False, "fp32")])
def test_auto_picks_bfloat16_only_where_the_cpu_multiplies_it_natively(monkeypatch, native, expected):
    monkeypatch.setattr("model.precision.bf16_native", lambda device: native)
    assert resolve_precision("auto", "cpu") == expected
    assert resolve_precision("fp32", "cpu") == "fp32" and resolve_precision("BF16", "cpu") == "bf16"


def test_bf16_native_follows_the_cpu_flags(monkeypatch):
    from model import bf16_native
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert not bf16_native("cpu")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    assert bf16_native("cpu")


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision must be one of auto, fp32, bf16"):
        resolve_precision("fp16", "cpu")


def test_loss_only_under_autocast_takes_the_chunked_path_and_matches_the_logits_path():
    """Under bfloat16 autocast the training loss comes from the hidden states (no logits), in float32,
    and equals the loss of the full logits computed under the same autocast."""
    torch.manual_seed(0)
    lm = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=300, n_layer=1, n_head=2, d_model=32, d_ff=64, block_size=16,
                                         dropout=0.0))
    ids = torch.randint(3, 300, (2, 16))
    with autocast("cpu", "bf16"):
        out = lm(ids[:, :-1], targets=ids[:, 1:], loss_only=True)
        full = lm(ids[:, :-1], targets=ids[:, 1:])
        x = lm.embed.lut(ids[:, :-1])  # any bfloat16-producing hidden states go the same way
        logits, loss = head_and_loss(lm.embed, x, ids[:, 1:], loss_only=True)
    assert out.logits is None and logits is None and out.loss.dtype == loss.dtype == torch.float32
    assert full.logits.dtype == torch.bfloat16
    torch.testing.assert_close(out.loss, full.loss, atol=2e-3, rtol=2e-3)


@pytest.mark.needs_imdb
def test_a_tiny_run_in_bfloat16_reaches_the_float32_loss(tmp_path):
    """Same seed, data and steps: the bfloat16 run's validation loss is within 0.5% of float32's (the
    rounding of bfloat16's 8-bit mantissa, not a different optimisation), and metrics.json says which
    precision ran."""
    texts = [clean_text(t) for t in pd.read_parquet(IMDB / "train.parquet")["text"].sample(200, random_state=0)]
    BPETokenizer.train(texts, vocab_size=500).save(tmp_path / "tok.json")
    losses = {}
    for precision in ("fp32", "bf16"):
        out = tmp_path / precision
        run.main(["--task", "lm", "--preset", "tiny", "--data-dir", str(IMDB), "--out", str(out),
                  "--tokenizer", str(tmp_path / "tok.json"), "--max-examples", "200", "--val-size", "30",
                  "--max-steps", "30", "--eval-every", "30", "--precision", precision])
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["precision"] == precision and metrics["train_config"]["precision"] == precision
        losses[precision] = metrics["val_loss"]
    assert losses["fp32"] < 6.0  # it learned: ln(500) = 6.2
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=0.005)
