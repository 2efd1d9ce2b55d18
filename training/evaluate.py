"""Evaluate a checkpoint on any file, and the metric functions training itself uses.

    python -m training.evaluate --checkpoint checkpoints/sentiment --data reviews.parquet
    python -m training.evaluate --checkpoint checkpoints/lm --data some_reviews.txt
    python -m training.evaluate --checkpoint checkpoints/lm --data-dir ../shared/data/imdb  # its validation split

A sentiment checkpoint needs `text` and `label` columns (0 = negative, 1 = positive) and prints
accuracy and a confusion matrix; a language-model checkpoint reads a `text` column or a plain
.txt file and prints loss, perplexity and bits per byte.
"""

import argparse
import json
import math
import sys
from pathlib import Path

import torch

from model import DecoderOnlyLM, EncoderDecoder, load_pretrained
from storage import resolve_checkpoint
from tokenization import BPETokenizer, clean_text

from .data import DataError, PairSet, TokenStream, load_table, require_columns, validation_rows


@torch.inference_mode()
def evaluate_lm(model: DecoderOnlyLM, stream: TokenStream, limit: int | None = None) -> dict:
    """Loss summed over non-overlapping context-sized windows of the concatenated documents.

    Bits per byte = total loss / ln 2 / UTF-8 bytes covered, which compares across tokenizers;
    with a window limit the byte count is scaled by the fraction of tokens covered.
    """
    model.eval()
    device = next(model.parameters()).device
    total, n_tokens = 0.0, 0
    for x, y in stream.windows(model.config.block_size, limit):
        logits = model(x.to(device)).logits  # (b, T, vocab)
        total += torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), y.flatten().to(device),
                                                   reduction="sum").item()
        n_tokens += y.numel()
    if n_tokens == 0:
        raise DataError("not enough text for one evaluation window")
    n_bytes = stream.n_bytes * n_tokens / (len(stream.ids) - 1)
    loss = total / n_tokens
    return {"loss": loss, "ppl": math.exp(loss), "bpb": total / math.log(2) / n_bytes, "tokens": n_tokens}


def label_candidates(model: EncoderDecoder, tokenizer: BPETokenizer) -> list[list[int]]:
    if not model.config.labels:
        raise DataError("this encoder-decoder checkpoint has no labels in its config.json")
    return [tokenizer.encode(label) for label in model.config.labels]


@torch.inference_mode()
def evaluate_classifier(model: EncoderDecoder, pairs: PairSet, labels: list[int], tokenizer: BPETokenizer,
                        batch_size: int = 32, limit: int | None = None) -> dict:
    """Accuracy of text-to-text classification: each review gets the label whose word sequence the
    decoder finds most likely. Also the confusion matrix and the target loss (cross-entropy per
    target token, label words and end token), read off the true label's score so that the
    encoder runs once per batch."""
    model.eval()
    device = next(model.parameters()).device
    candidates = label_candidates(model, tokenizer)
    k = len(candidates)
    confusion = [[0] * k for _ in range(k)]  # rows: true label, columns: predicted
    nll, n_tokens, n = 0.0, 0, 0
    ids = {"pad_id": tokenizer.pad_id, "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id}
    for idx, batch in pairs.batches(batch_size, limit, **ids):
        scores = model.score_candidates(batch["src_ids"].to(device), candidates, batch["src_mask"].to(device))
        for i, row, pred in zip(idx, scores.tolist(), scores.argmax(-1).tolist(), strict=True):
            confusion[labels[i]][pred] += 1
            nll -= row[labels[i]]
            n_tokens += len(candidates[labels[i]]) + 1  # + the end token
        n += len(idx)
    correct = sum(confusion[i][i] for i in range(k))
    return {"accuracy": correct / n, "loss": nll / n_tokens, "examples": n, "confusion": confusion}


def _texts(path: Path, column: str = "text") -> list[str]:
    if path.suffix == ".txt":
        return [t for t in path.read_text(encoding="utf-8").split("\n\n") if t.strip()]
    ds = load_table(path)
    require_columns(ds, [column], str(path))
    return [clean_text(t) for t in ds[column]]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m training.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (config.json, model.safetensors)")
    data = parser.add_mutually_exclusive_group(required=True)
    data.add_argument("--data", help="a .parquet/.csv/.jsonl file (or .txt for a language model)")
    data.add_argument("--data-dir", help="the validation split that training.run carves out of this folder's "
                                         "train split (with the same --val-size and --seed)")
    parser.add_argument("--val-size", type=int, default=2500, help="as training.run --val-size")
    parser.add_argument("--seed", type=int, default=1337, help="as training.run --seed")
    parser.add_argument("--limit", type=int, default=None, help="evaluate only the first N rows/windows")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    try:
        ckpt = resolve_checkpoint(args.checkpoint)  # a local folder or a Hub repo id
        model = load_pretrained(ckpt, args.device)
        tokenizer = BPETokenizer.from_file(ckpt)
        held_out = validation_rows(args.data_dir, args.val_size, args.seed) if args.data_dir else None
        what = f"the validation split of {args.data_dir}" if args.data_dir else args.data
        if isinstance(model, DecoderOnlyLM):
            texts = [clean_text(t) for t in held_out["text"]] if held_out is not None else _texts(Path(args.data))
            result = evaluate_lm(model, TokenStream.from_texts(texts, tokenizer), args.limit)
        else:
            ds = held_out if held_out is not None else load_table(args.data)
            require_columns(ds, ["text", "label"], what)
            rows = ds.select(range(min(args.limit, len(ds)))) if args.limit else ds
            texts, labels = [clean_text(t) for t in rows["text"]], list(rows["label"])
            bad = sorted({y for y in labels if not 0 <= y < len(model.config.labels or [])})
            if bad:
                raise DataError(f"{what}: labels {bad} are outside 0..{len(model.config.labels or []) - 1}")
            pairs = PairSet.from_texts(texts, [model.config.labels[y] for y in labels], tokenizer, model.config)
            result = evaluate_classifier(model, pairs, labels, tokenizer, args.batch_size)
    except (DataError, FileNotFoundError, ValueError) as e:
        sys.exit(f"error: {e}")
    if "confusion" in result:
        names = model.config.labels
        print(f"accuracy {result['accuracy']:.4f} on {result['examples']} examples (loss {result['loss']:.4f})")
        print("confusion matrix (rows: true, columns: predicted)")
        print(" " * 10 + "".join(f"{n:>10}" for n in names))
        for name, row in zip(names, result["confusion"], strict=True):
            print(f"{name:>10}" + "".join(f"{v:>10}" for v in row))
    else:
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}))
    return result


if __name__ == "__main__":
    main()
