"""The start-up memory estimate (`training.memory`): its arithmetic written out by hand, its attention
term against the bytes autograd really keeps, its constants against the benchmark that measured
them, and the warning `training.run` prints on a CPU that lacks the memory."""

import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from model import DecoderOnlyConfig, EncoderDecoder, EncoderDecoderConfig, read_config
from tokenization import BPETokenizer, clean_text
from training import memory, run, run_report

ROOT = Path(__file__).resolve().parents[1]
IMDB = ROOT.parent / "shared" / "data" / "imdb"
SHIPPED = {k: v for k, v in read_config(ROOT / "checkpoints" / "sentiment").items()
           if k in EncoderDecoderConfig.__dataclass_fields__}
# the shipped classifier: 6 encoder layers + 1 decoder layer, 5 heads, 320 channels, sources of 1,024
CLASSIFIER = EncoderDecoderConfig(**SHIPPED)
LM = DecoderOnlyConfig(vocab_size=8192, block_size=256, n_layer=6, n_head=5, d_model=320, d_ff=1280, dropout=0.0)


def test_the_estimate_is_the_formula_written_out():
    c, c0, w = memory.BYTES_PER_CHANNEL, memory.BYTES_PER_CHANNEL_NO_DROPOUT, memory.BYTES_PER_WEIGHT
    # 16 rows of 1,024: encoder 6 x 16,384 tokens x (c x 320 + w x 5 heads x 1,024 keys); decoder 1 x 16 x 8
    # target tokens, each attending to its 8 targets and the 1,024 source tokens; + 12 bytes a parameter
    encoder = 6 * 16 * 1024 * (c * 320 + w * 5 * 1024)
    decoder = 1 * 16 * 8 * (c * 320 + w * 5 * (8 + 1024))
    assert memory.training_bytes(CLASSIFIER, 16, 1000) == pytest.approx(encoder + decoder + 12 * 1000, abs=2)
    # the LM trains without dropout: the fused kernel keeps no attention weights, no dropout masks either
    assert memory.training_bytes(LM, 64, 0) == pytest.approx(6 * 64 * 256 * c0 * 320, abs=1)
    dropped = DecoderOnlyConfig(**{**LM.__dict__, "dropout": 0.1})
    assert memory.training_bytes(dropped, 64, 0) == pytest.approx(6 * 64 * 256 * (c * 320 + w * 5 * 256), abs=1)
    # dropout everywhere but on the attention weights: the fused kernel keeps none of them, the masks stay
    fused = EncoderDecoderConfig(**{**SHIPPED, "attention_dropout": 0.0})
    assert memory.training_bytes(fused, 16, 0) == pytest.approx(6 * 16 * 1024 * c * 320 + 16 * 8 * c * 320, abs=2)


def test_the_worst_batch_fills_the_token_budget_with_the_longest_rows():
    assert memory.worst_rows(CLASSIFIER, 32, 16384) == 16  # 16,384 // 1,024
    assert memory.worst_rows(CLASSIFIER, 32, 1000) == 1  # a budget below one row still trains one row
    assert memory.worst_rows(CLASSIFIER, 32, None) == 32  # no budget: batch_size rows
    assert memory.worst_rows(LM, 64, 16384) == 64  # the LM's batches are always batch_size windows


def test_the_attention_term_is_what_autograd_keeps_under_dropout():
    """Counted independently: the distinct storages autograd saves during a forward of the shipped
    classifier's shape, 2 rows of 256 against 4 rows of 128 (512 tokens either way; a single row
    would let some tensors stay views of a larger one). Their difference is the attention weights'
    alone: every other saved tensor has as many elements either way."""
    def saved(rows, length):
        torch.manual_seed(0)
        model = EncoderDecoder(EncoderDecoderConfig(**{**SHIPPED, "max_src_len": 256})).train()
        params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        kept = {}

        def pack(t):
            kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        src, tgt = torch.randint(3, 8192, (rows, length)), torch.randint(3, 8192, (rows, 2))
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(src, tgt, torch.ones_like(src), tgt, loss_only=True)
        return sum(n for ptr, n in kept.items() if ptr not in params)

    extra_weights = 6 * 5 * 512 * (256 - 128)  # encoder layers x heads x tokens x the keys each query gains
    per_weight = (saved(2, 256) - saved(4, 128)) / extra_weights
    assert per_weight == pytest.approx(memory.BYTES_PER_WEIGHT, rel=0.1)
    # three float32 (T, T) copies a head: the softmax's output, the dropout's, the batched product's input
    assert per_weight == pytest.approx(3 * 4, rel=0.05)


def test_the_constants_are_the_ones_the_benchmark_measured():
    measured = json.loads((ROOT / "benchmarks" / "results" / "train_memory.json").read_text())
    assert memory.BYTES_PER_CHANNEL == round(measured["bytes_per_channel"])
    assert memory.BYTES_PER_CHANNEL_NO_DROPOUT == round(measured["bytes_per_channel_no_dropout"])
    assert memory.BYTES_PER_WEIGHT == round(measured["bytes_per_weight"], 1)
    # and with them the estimate stays within 25% of every peak the benchmark measured
    assert all(0.75 <= probe["ratio"] <= 1.25 for probe in measured["probes"]), measured["probes"]


def test_the_warning_names_a_setting_that_fits():
    params = 11_664_960
    need = memory.training_bytes(CLASSIFIER, 16, params)
    assert memory.memory_warning(CLASSIFIER, 32, 16384, params, int(need / memory.HEADROOM) + 10) is None
    assert memory.memory_warning(CLASSIFIER, 32, 16384, params, None) is None  # no MemAvailable: no check
    available = 8 * 10**9
    line = memory.memory_warning(CLASSIFIER, 32, 16384, params, available)
    fits = int(line.split("--max-tokens ")[1].split()[0])
    assert fits % 1024 == 0 and "\n" not in line and f"about {need / 1e9:.1f} GB" in line and "8.0 GB" in line
    budget = memory.HEADROOM * available
    assert memory.training_bytes(CLASSIFIER, fits // 1024, params) <= budget
    assert memory.training_bytes(CLASSIFIER, fits // 1024 + 1, params) > budget  # the largest that fits
    # the LM's knob is the batch size; with too little for a single row, a shorter context
    lm_line = memory.memory_warning(LM, 64, None, 0, 10**9)
    rows = int(lm_line.split("--batch-size ")[1].split()[0])
    assert memory.training_bytes(LM, rows, 0) <= memory.HEADROOM * 10**9 < memory.training_bytes(LM, rows + 1, 0)
    assert "shorter context" in memory.memory_warning(CLASSIFIER, 32, 16384, params, 10**8)


def test_available_memory_is_read_from_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n")
    assert memory.available_bytes(meminfo) == 20_000_000 * 1024
    meminfo.write_text("MemTotal:       24000000 kB\n")  # an old kernel: no estimate, no check
    assert memory.available_bytes(meminfo) is None
    assert memory.available_bytes(tmp_path / "missing") is None


@pytest.mark.needs_imdb
def test_a_run_on_a_cpu_short_of_memory_warns_in_one_line_and_trains(tmp_path, monkeypatch, capsys):
    texts = [clean_text(t) for t in pd.read_parquet(IMDB / "train.parquet")["text"].sample(200, random_state=0)]
    tokenizer = tmp_path / "tokenizer.json"
    BPETokenizer.train(texts, vocab_size=600).save(tokenizer)
    monkeypatch.setattr(run_report, "available_bytes", lambda: 10**6)  # 1 MB free
    metrics = run.main(["--task", "sentiment", "--preset", "tiny", "--data-dir", str(IMDB), "--out",
                        str(tmp_path / "s"), "--tokenizer", str(tokenizer), "--max-examples", "200",
                        "--val-size", "40", "--max-steps", "2", "--eval-every", "2", "--max-tokens", "512"])
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: memory:")]
    assert len(warnings) == 1 and "0.0 GB is available" in warnings[0] and "Would fit: " in warnings[0]
    assert metrics["steps"] == 2  # a warning, not a refusal: the estimate can be wrong either way
