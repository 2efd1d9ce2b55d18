"""Build a tiny, randomly initialised checkpoint directory in the shipped layout.

The tests and benchmarks need checkpoints before (and independently of) the real training run:
this writes `<out>/tokenizer.json`, `<out>/lm/` (with three weight snapshots in `lm/snapshots/`,
for the "Watch it learn" tab) and `<out>/sentiment/` in a second or two on CPU. The models are
untrained, so their text is gibberish; only shapes and plumbing matter.

    python -m demo.tiny OUT_DIR
"""

import argparse
import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path

from classifier import ClassifierConfig
from model import DecoderOnlyConfig, DecoderOnlyLM, EncoderDecoder, EncoderDecoderConfig
from storage import METRICS_NAME, SNAPSHOTS_DIR, snapshot_name, write_index
from tokenization import BPETokenizer, clean_texts

REPO_ROOT = Path(__file__).resolve().parents[1]
IMDB = REPO_ROOT.parent / "shared" / "data" / "imdb" / "train.parquet"

FALLBACK_TEXTS = [
    "This movie was great, the acting was wonderful and the story kept me watching.",
    "The film was terrible: the plot made no sense and the acting was even worse.",
    "I loved the music, the characters and the ending of this wonderful film.",
    "One of the worst movies I have ever seen. Do not waste your time watching it.",
    "A beautiful story about family, friendship and growing up in a small town.",
    "Honestly, I expected more from such a famous cast. What a disappointment!",
]


def sample_texts(n: int = 200) -> list[str]:
    """`n` IMDb reviews as the models read them (`clean_texts`), or a few built-in sentences when
    the local data set is not there (e.g. on a Space)."""
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(IMDB, columns=["text"])
        texts = table.column("text").to_pylist()
        step = max(1, len(texts) // n)  # spread over both classes (the file is sorted by label)
        return clean_texts(texts[::step][:n])
    except Exception:
        return FALLBACK_TEXTS * 5


def make_tiny_checkpoints(out: str | Path, vocab_size: int = 384, block_size: int = 64,
                          max_src_len: int = 64, with_metrics: bool = True, seed: int = 0) -> Path:
    """Write a tiny tokenizer, LM and sentiment model under `out`; return `out`."""
    import torch

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = BPETokenizer.train(sample_texts(), vocab_size=vocab_size)
    tokenizer.save(out)  # out/tokenizer.json
    torch.manual_seed(seed)
    lm = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=tokenizer.vocab_size, block_size=block_size, n_layer=2,
                                         n_head=2, d_model=32, d_ff=64, dropout=0.0))
    sentiment = EncoderDecoder(EncoderDecoderConfig(
        vocab_size=tokenizer.vocab_size, max_src_len=max_src_len, max_tgt_len=8, n_encoder_layer=2,
        n_decoder_layer=2, n_head=2, d_model=32, d_ff=64, dropout=0.0))
    for name, model, metrics in [
        ("lm", lm, {"val_loss": 5.9, "val_ppl": 365.0, "val_bpb": 2.1, "steps": 0, "device": "cpu",
                    "command": "python -m demo.tiny (random init)"}),
        ("sentiment", sentiment, {"val_accuracy": 0.5, "steps": 0, "device": "cpu",
                                  "command": "python -m demo.tiny (random init)"}),
    ]:
        model.save_pretrained(out / name)
        if name == "sentiment":
            ClassifierConfig(labels=["negative", "positive"]).save_pretrained(out / name)
        tokenizer.save(out / name)
        if with_metrics:
            metrics["parameters"] = model.num_parameters()
            (out / name / METRICS_NAME).write_text(json.dumps(metrics, indent=2), encoding="utf-8")
    write_tiny_snapshots(out / "lm" / SNAPSHOTS_DIR, lm, tokenizer, seed)
    return out


TINY_SNAPSHOT_STEPS = (0, 10, 100)


def write_tiny_snapshots(folder: Path, lm: DecoderOnlyLM, tokenizer: BPETokenizer, seed: int = 0) -> Path:
    """Random LMs shaped like `lm` standing in for a run's snapshots (`storage.snapshots`): the one
    at step `TINY_SNAPSHOT_STEPS[i]` seeded with seed + i + 1, the last one `lm` itself, with a
    made-up falling loss curve."""
    import torch

    entries = []
    for i, step in enumerate(TINY_SNAPSHOT_STEPS):
        torch.manual_seed(seed + i + 1)
        model = lm if i == len(TINY_SNAPSHOT_STEPS) - 1 else DecoderOnlyLM(lm.config)
        model.save_pretrained(folder / snapshot_name(step), dtype=torch.float16)
        entries.append({"step": step, "tokens": step * 512, "path": snapshot_name(step), "val_loss": 6.0 - step / 25})
    tokenizer.save(folder)
    history = [{"step": step, "train_loss": 6.5 - step / 20, "val_loss": 6.0 - step / 25} for step in (20, 60, 100)]
    write_index(folder, {"model_type": lm.model_type, "max_steps": TINY_SNAPSHOT_STEPS[-1], "snapshots": entries,
                         "history": history, "commands": ["python -m demo.tiny (random init)"]})
    return folder


@functools.cache
def shared_tiny_checkpoints() -> Path:
    """One tiny checkpoint directory per process, removed at exit: several test modules share it
    (treat it as read-only; copy it before breaking files on purpose)."""
    out = Path(tempfile.mkdtemp(prefix="demo-tiny-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    return make_tiny_checkpoints(out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    print(make_tiny_checkpoints(parser.parse_args().out))
